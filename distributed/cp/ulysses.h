/*
 * ulysses.h — the all-to-alls of Ulysses context parallelism around attention.
 *
 * Before attention each rank holds all H heads of its L = S/cp tokens, [B, L, H, Dh]; after
 * ulysses_heads_to_sequence it holds H/cp heads of all S tokens, [B, S, H/cp, Dh] (rank r takes
 * heads [r·H/cp, (r+1)·H/cp), and tokens of rank i land at positions [i·L, (i+1)·L)).
 * ulysses_sequence_to_heads is the inverse. Key/value heads are sharded the same way when
 * cp divides Hkv; when Hkv divides cp they are first repeated to cp heads (rank r then gets
 * kv head r / (cp/Hkv)) and their gradients summed back.
 */
#ifndef CPPARITY_DISTRIBUTED_ULYSSES_H
#define CPPARITY_DISTRIBUTED_ULYSSES_H

#include <stdint.h>

#include "common/error.h"
#include "distributed/comm/comm.h"
#include "common/fault.h"

/* out [B, L·cp, heads/cp, Dh] from in [B, L, heads, Dh]; scratch holds 2·B·L·heads·Dh floats. */
cpparity_status ulysses_heads_to_sequence(cpparity_comm *comm, float *out, const float *in,
                                          int64_t batch, int64_t local_len, int64_t heads,
                                          int64_t head_dim, float *scratch, cpparity_error *error);

/* The same with a planted fault (fault.h): a2a-head-order sends rank r heads i·cp + r. */
cpparity_status ulysses_heads_to_sequence_ordered(cpparity_comm *comm, float *out, const float *in,
                                                  int64_t batch, int64_t local_len, int64_t heads,
                                                  int64_t head_dim, float *scratch,
                                                  cpparity_fault fault, cpparity_error *error);

/* out [B, L, heads, Dh] from in [B, L·cp, heads/cp, Dh]; the inverse of the above. */
cpparity_status ulysses_sequence_to_heads(cpparity_comm *comm, float *out, const float *in,
                                          int64_t batch, int64_t local_len, int64_t heads,
                                          int64_t head_dim, float *scratch, cpparity_error *error);

/* out [B, L, cp, Dh]: head j = in head j / (cp / kv_heads) of in [B, L, kv_heads, Dh]. */
void ulysses_repeat_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads, int64_t cp,
                       int64_t head_dim);

/* out [B, L, kv_heads, Dh] = sums of the cp / kv_heads repeats in in [B, L, cp, Dh]. */
void ulysses_sum_repeated_kv(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                             int64_t cp, int64_t head_dim);

/* The head of a rank's [B, L, H, Dh] input that fills slot `slot` (of H/cp) of the block sent
 * to rank `to` before attention: to·(H/cp) + slot; with a2a-head-order, slot·cp + to. */
int64_t ulysses_sent_head(int64_t to, int64_t slot, int64_t heads, int64_t cp,
                          cpparity_fault fault);

/* The kv head that repeat j (of cp) carries when kv heads are replicated: j / (cp / kv_heads);
 * with gqa-kv-mapping, j mod kv_heads. */
int64_t ulysses_repeated_head(int64_t j, int64_t kv_heads, int64_t cp, cpparity_fault fault);

/* Whether repeat j's gradient is summed back into its kv head: always, but with kv-sum-back only
 * the first repeat of each kv head is. */
int ulysses_sums_repeat(int64_t j, int64_t kv_heads, int64_t cp, cpparity_fault fault);

/* The same two with a planted fault: gqa-kv-mapping maps repeat j to kv head j mod kv_heads
 * (in both), kv-sum-back keeps only the first repeat of each kv head's gradient. */
void ulysses_repeat_kv_mapped(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                              int64_t cp, int64_t head_dim, cpparity_fault fault);
void ulysses_sum_repeated_kv_mapped(float *out, const float *in, int64_t tokens, int64_t kv_heads,
                                    int64_t cp, int64_t head_dim, cpparity_fault fault);

#endif
