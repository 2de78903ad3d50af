/*
 * model_memory.h — the host memory one rank of the model under test holds at its peak, worked out
 * from the sizes before anything is allocated: the `estimate` of the implementations
 * (distributed/models/implementation.h) on the CPU (implementation_cpu.c, model_f32*.c) and on CUDA
 * (implementation_cuda.cu, model_cuda*.cu: only what lives on the host). Each figure follows the
 * code's own allocations; the harness adds the inputs it gives and the outputs it reads back
 * (harness/running/memory_estimate.h). Checked: tests/test_memory_estimate.c counts every
 * allocation of real CPU runs (within 5 %), Ulysses, ring and hybrid, contiguous and zigzag.
 *
 * With L = ceil(S/cp) tokens per rank, Nl = B·L, Sp = cp·L (padded), Hl = H/cp, Hkvl = Hkv/cp
 * (1 when replicated), widest = max(H, cp), P parameters:
 *
 *   both: this rank's slice of the batch (25 bytes a token), the compact mask 17·B·Sp + 8B, and
 *     at its peak the mask gather 9(cp·Nl + B·Sp); when the communicator's all-reduce gathers
 *     every rank's buffer (mpi), the gradients' reduce holds 4·cp·P.
 *   cpu (model_f32*.c): the instance (its model struct, parameter and activation tables),
 *     parameters and gradients 8P, the activations (activation_layout.c's table, float32), and
 *     the largest of: the mask gather; forward's scratch 4(2·Nl·widest·Dh + Nl·cp·Dh + Nl·D);
 *     backward's 17 buffers (model_f32_backward.c) with the reduce's gather; plus the kernel's
 *     workspace (cpparity/kernel.h workspace_bytes) during an attention call. Ring and hybrid:
 *     the "sequence" tensors hold a ring member's rows (L, or U·L for a hybrid) with H/U heads,
 *     ring.c's buffers join forward's scratch (6 key/value blocks, 2 query blocks, an lse, the
 *     row lists: 82 bytes a row) and backward's (12 key/value, 4 query blocks), and the ring's
 *     tokens 8·cp·L are kept.
 *   cuda (model_cuda*.cu): the tensors live on the GPU and are not counted (nor is the CUDA
 *     runtime's own host memory); counted are the host mask, the groups 8(4Nl + 1), the ring's
 *     tokens 8·cp·L (ring, hybrid), the pinned staging 4·max(2·Nl·widest·Dh (Ulysses, hybrid),
 *     8·B·rows·Hkvl·Dh (ring, hybrid: the backward's travelling k, v, dk, dv of a member's rows,
 *     rows = L or U·L, sent and received), P) (not when the communicator moves device memory),
 *     and the largest of the parameters' upload 4P, the mask gather and the reduce's gather.
 *   A planted fault adds its buffers (stale-rank-slice 4(1 + cp)·Nl·V, grad-reduce-order
 *   4·cp·P, positions-local 8Nl); with every fault in turn (self-test), the largest.
 */
#ifndef CPPARITY_DISTRIBUTED_MODEL_MEMORY_H
#define CPPARITY_DISTRIBUTED_MODEL_MEMORY_H

#include <stdint.h>

#include "common/error.h"
#include "distributed/models/implementation.h"

#ifdef __cplusplus
extern "C" { /* C linkage for CUDA (C++) translation units */
#endif

/* The estimate of the cpu implementation (implementation.h `estimate`). */
cpparity_status model_memory_cpu(const cpparity_implementation_estimate *setup, int64_t *bytes,
                                 int64_t *kept, cpparity_error *error);

/* The estimate of the cuda implementation: its host memory only. */
cpparity_status model_memory_cuda(const cpparity_implementation_estimate *setup, int64_t *bytes,
                                  int64_t *kept, cpparity_error *error);

#ifdef __cplusplus
}
#endif

#endif
