/* memory.c — what the float64 reference holds at most (see memory.h). */
#include "reference/memory.h"

#include <string.h>

#include "common/checked_size.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "common/row_blocks.h"
#include "reference/attention_tiles.h"
#include "reference/mask.h"
#include "reference/mixed_blocks.h"
#include "reference/model_layers.h"
#include "reference/threads.h"

/* One attention's scratch (attention_forward.c, attention_backward.c): tiles of `edge` = the
 * mask's block size, in groups of g = edge / TILE_PRODUCT_ROWS + 1 bands; each of the threads (at
 * most one per work item) holds 64-byte aligned scratch — forward the scores, the query tile, the
 * accumulated values, a key and a value tile and five values per query (e² + 4e·Dh + 5e doubles),
 * backward two edge × edge tiles and six edge × Dh ones (2e² + 6e·Dh), both the bands (2g of 16
 * bytes) and the predicate (e²). A call computing every tile (one process: `whole`) whose items
 * go by (b, key/value head) (attention_items_by_row) has each also copy its keys and values
 * (2S·Dh doubles and a byte a tile), and finds its mixed blocks once
 * (mixed_blocks_most_bytes); backward adds delta (B·H·S) and a byte per token. */
static int64_t attention_bytes(cpparity_sizer *s, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                               int64_t Dh, bool backward, bool whole) {
    const int64_t edge = REFERENCE_MASK_DEFAULT_BLOCK;
    const int64_t tiles = S / edge + (S % edge != 0);
    const reference_attention_shape shape = {B, S, H, Hkv, Dh};
    const bool by_row = whole && Hkv > 0 && attention_items_by_row(shape, reference_threads());
    const int64_t items = by_row ? CPPARITY_PRODUCT(s, "the attention's work items", B, Hkv)
                                 : CPPARITY_PRODUCT(s, "the attention's work items", B, H, tiles);
    const int64_t threads = reference_threads() < items ? reference_threads() : items;
    const int64_t doubles =
        backward
            ? CPPARITY_SUM(s, 2 * edge * edge,
                           CPPARITY_PRODUCT(s, "the attention scratch", 6, edge, Dh))
            : CPPARITY_SUM(s, edge * edge,
                           CPPARITY_PRODUCT(s, "the attention scratch", 4, edge, Dh), 5 * edge);
    const int64_t row =
        by_row ? CPPARITY_PRODUCT(s, "the attention's keys and values", 2, S, Dh) : 0;
    const int64_t bands = 2 * (edge / TILE_PRODUCT_ROWS + 1) * (int64_t)sizeof(tile_band);
    const int64_t scratch = CPPARITY_SUM(
        s, CPPARITY_PRODUCT(s, "the attention scratch", 8, CPPARITY_SUM(s, doubles, row)), bands,
        edge * edge, by_row ? tiles : 0);
    const int64_t aligned = CPPARITY_SUM(s, scratch, 63) / 64 * 64;
    return CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "the attention scratch", threads, aligned),
                        whole ? mixed_blocks_most_bytes(B, tiles, edge) : 0,
                        backward ? CPPARITY_PRODUCT(s, "the attention's delta", 8, B, H, S) : 0,
                        backward ? CPPARITY_PRODUCT(s, "the attention's delta", B, S) : 0);
}

/* Every layer's mask (mask.c): key_valid (1), document (8) and, chunked, chunk (8) per token;
 * valid_prefix 8·B(S+1); left_padding 8B. */
static int64_t masks_bytes(cpparity_sizer *s, const cpparity_model_config *config, int64_t B,
                           int64_t S) {
    const int64_t tokens = CPPARITY_PRODUCT(s, "the masks", B, S);
    const int64_t plain = CPPARITY_SUM(s, CPPARITY_PRODUCT(s, "a mask", 9, tokens),
                                       CPPARITY_PRODUCT(s, "a mask", 8, B, CPPARITY_SUM(s, S, 1)),
                                       CPPARITY_PRODUCT(s, "a mask", 8, B));
    int64_t total = 0;
    for (int64_t l = 0; l < config->num_hidden_layers; l++) {
        const bool chunked = config->layer_types[l] == CPPARITY_LAYER_CHUNKED;
        total =
            CPPARITY_SUM(s, total, plain, chunked ? CPPARITY_PRODUCT(s, "a mask", 8, tokens) : 0);
    }
    return total;
}

cpparity_status reference_memory_estimate(const cpparity_model_config *config, int64_t batch,
                                          int64_t seq_len, reference_memory *memory,
                                          cpparity_error *error) {
    return reference_memory_estimate_spread(config, batch, seq_len, 1, 0, memory, error);
}

/* The rows rank r of `ranks` holds (model.c: row_blocks_first's split). */
static int64_t rank_rows(int64_t B, int64_t S, int64_t ranks, int64_t r) {
    const row_blocks blocks = row_blocks_of(B, S);
    int64_t first = 0, end = 0;
    row_blocks_rows(&blocks, row_blocks_first(&blocks, ranks, r),
                    row_blocks_first(&blocks, ranks, r + 1), &first, &end);
    return end - first;
}

/* reference_team_gather_rows's scratch: a send of the widest rank's rows and every rank's. */
static int64_t gather_scratch(cpparity_sizer *s, int64_t widest, int64_t width, int64_t ranks) {
    return ranks > 1 ? CPPARITY_PRODUCT(s, "a gather's scratch", 8, widest, width, ranks + 1) : 0;
}

cpparity_status reference_memory_estimate_spread(const cpparity_model_config *config, int64_t batch,
                                                 int64_t seq_len, int64_t ranks, int64_t rank,
                                                 reference_memory *memory, cpparity_error *error) {
    memset(memory, 0, sizeof *memory);
    cpparity_sizer s = CPPARITY_SIZER_START;
    if (ranks < 1) {
        ranks = 1;
    }
    const int64_t B = batch, S = seq_len, V = config->vocab_size, D = config->hidden_size;
    const int64_t F = config->intermediate_size, H = config->num_attention_heads;
    const int64_t Hkv = config->num_key_value_heads, Dh = config->head_dim;
    const int64_t layers = config->num_hidden_layers;
    cpparity_tensor_table table = {0};
    cpparity_error why;
    if (cpparity_model_parameter_table(config, &table, &why) != CPPARITY_OK) {
        cpparity_sizer_fail(&s, why.message);
    }
    const int64_t P = table.total, parameter_tensors = table.count;
    cpparity_tensor_table_free(&table);
    const int64_t N = CPPARITY_PRODUCT(&s, "the tokens B x S", B, S);
    /* this rank's tokens, and the widest rank's (a gather's scratch is sized for them) */
    int64_t widest = 0;
    for (int64_t r = 0; r < ranks; r++) {
        const int64_t rows = rank_rows(B, S, ranks, r);
        widest = rows > widest ? rows : widest;
    }
    const int64_t n = rank_rows(B, S, ranks, rank);
    /* model.c's activation table: rotary tables, every layer, the final norm, the logits */
    const int64_t layer = CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "a layer's activations", 4, D), 2,
                                       CPPARITY_PRODUCT(&s, "a layer's activations", 2, H, Dh),
                                       CPPARITY_PRODUCT(&s, "a layer's activations", 2, Hkv, Dh), H,
                                       CPPARITY_PRODUCT(&s, "a layer's activations", 3, F));
    const int64_t per_token =
        CPPARITY_SUM(&s, Dh, CPPARITY_PRODUCT(&s, "the activations", layers, layer),
                     CPPARITY_PRODUCT(&s, "the activations", 2, D), 3);
    memory->masks = masks_bytes(&s, config, B, S);
    /* every per-token activation for this rank's n tokens, but each layer's lse (H a token),
     * which is whole on every rank */
    const int64_t lse_whole = CPPARITY_PRODUCT(&s, "the attention's lse", 8, layers, N, H);
    const int64_t per_token_here = per_token - layers * H;
    memory->model =
        CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the parameters", 16, P),
                     CPPARITY_PRODUCT(&s, "the reference's activations", 8, n, per_token_here),
                     lse_whole, memory->masks, cpparity_tensor_table_bytes(parameter_tensors),
                     cpparity_tensor_table_bytes(14 * layers + 7));
    /* lm_head.c: one row block's logits, and per thread a row of exponentials */
    const int64_t threads = reference_threads();
    memory->logits_forward =
        CPPARITY_SUM(&s,
                     CPPARITY_PRODUCT(&s, "a row block's logits", 8,
                                      S < CPPARITY_ROW_BLOCK ? S : CPPARITY_ROW_BLOCK, V),
                     CPPARITY_PRODUCT(&s, "the loss's scratch", threads, 8, V));
    /* model_forward.c attention_forward: spread, the queries and outputs whole-shaped and the
     * keys and values gathered whole, with a gather's scratch, the tiles' scratch, or the lse's
     * share (this rank's and the whole lse, and a gather's scratch) on top */
    const int64_t tiles_forward = attention_bytes(&s, B, S, H, Hkv, Dh, false, ranks == 1);
    const int64_t attention_forward =
        ranks == 1
            ? tiles_forward
            : CPPARITY_SUM(
                  &s,
                  CPPARITY_PRODUCT(&s, "the spread attention", 16, N, CPPARITY_SUM(&s, H, Hkv), Dh),
                  CPPARITY_LARGEST(gather_scratch(&s, widest, Hkv * Dh, ranks), tiles_forward,
                                   CPPARITY_SUM(&s,
                                                CPPARITY_PRODUCT(&s, "the lse's share", 8, n, H),
                                                CPPARITY_PRODUCT(&s, "the lse's share", 8, N, H),
                                                gather_scratch(&s, widest, H, ranks))));
    memory->forward = CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the reference's projection", 8, n, D),
                                   attention_forward, memory->logits_forward);
    /* model_backward.c: the stream, residual and normed (D each), swiglu, gate, up (F each),
     * attention and q (H·Dh), k and v (Hkv·Dh) per token */
    const int64_t gradients =
        CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "the reference's backward", 3, D),
                     CPPARITY_PRODUCT(&s, "the reference's backward", 3, F),
                     CPPARITY_PRODUCT(&s, "the reference's backward", 2, H, Dh),
                     CPPARITY_PRODUCT(&s, "the reference's backward", 2, Hkv, Dh));
    /* model_backward.c attention_backward: spread, dq, dk and dv whole-shaped and the queries,
     * keys, values, outputs and output gradients gathered whole, with a gather's scratch or the
     * tiles' scratch on top */
    const int64_t tiles_backward = attention_bytes(&s, B, S, H, Hkv, Dh, true, ranks == 1);
    memory->attention_backward =
        ranks == 1
            ? tiles_backward
            : CPPARITY_SUM(
                  &s,
                  CPPARITY_PRODUCT(&s, "the spread attention", 8, N,
                                   CPPARITY_SUM(&s, CPPARITY_PRODUCT(&s, "", 4, H, Dh),
                                                CPPARITY_PRODUCT(&s, "", 4, Hkv, Dh))),
                  CPPARITY_LARGEST(gather_scratch(&s, widest, H * Dh, ranks), tiles_backward));
    /* lm_head.c: one vocabulary chunk's logits for every token (while the layers' backward has
     * not started: the larger of the two is held) */
    memory->logits_backward =
        CPPARITY_SUM(&s,
                     CPPARITY_PRODUCT(&s, "a vocabulary chunk's logits", 8, n,
                                      V < LM_HEAD_CHUNK ? V : LM_HEAD_CHUNK),
                     ranks > 1 ? CPPARITY_PRODUCT(&s, "a chunk handed on", 16,
                                                  V < LM_HEAD_CHUNK ? V : LM_HEAD_CHUNK, D)
                               : 0);
    memory->backward = CPPARITY_SUM(
        &s, CPPARITY_PRODUCT(&s, "the reference's backward", 8, n, gradients),
        memory->attention_backward > memory->logits_backward ? memory->attention_backward
                                                             : memory->logits_backward);
    memory->features_off = CPPARITY_PRODUCT(&s, "the masks", 9, N); /* model_forward.c */
    /* reference_model_final_normed_whole: a gather's scratch */
    memory->gather_final = gather_scratch(&s, widest, D, ranks);
    if (!s.ok) {
        memset(memory, 0, sizeof *memory);
        return cpparity_error_set(error, CPPARITY_ERROR_INPUT, "%s", s.what);
    }
    return CPPARITY_OK;
}
