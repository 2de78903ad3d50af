/*
 * implementation.h — the implementation under test, as the harness sees it: one table of
 * functions per implementation (the float32 model on CPU ranks is the first,
 * distributed/models/implementation_cpu.c), chosen by device name through
 * distributed/models/implementation_registry.h. The harness knows only this interface.
 *
 * One instance runs one (case, cp size, dtype) on one rank of a CP group:
 *
 *     check      refuse a configuration before any compute (same answer on every rank)
 *     estimate   the host memory one rank of an instance holds at its peak, before anything is
 *                allocated (optional: the harness adds it to its own share and refuses what
 *                cannot fit; harness/running/memory_estimate.h)
 *     create     allocate for B rows of S tokens on the group's communicator, with a kernel
 *     load_parameters   take every weight, by model.md's name, from the harness (float64 values,
 *                rounded to the instance's dtype by the implementation)
 *     forward    from the whole batch [B, S] (every rank gets the same inputs and takes its own
 *                slice: sharding, automatic padding and label handling are part of what is
 *                tested), logits of this rank's slice and the loss
 *     backward   every parameter gradient, all-reduced over the group
 *     read_*     copy the loss, this rank's logits slice [B, L, V] and each gradient by name into
 *                host float32 buffers (bf16 values widen exactly). The slice's rows are the
 *                positions the setup's layout gives the rank, in increasing order (common/case.h:
 *                contiguous, rank r holds [r·L, (r+1)·L), L = ceil(S / cp); zigzag and
 *                round-robin pad S to a multiple of 2·cp and cp); positions past S are automatic
 *                padding
 *     destroy    release everything
 *
 * Every function returns CPPARITY_OK or fills error (CPPARITY_ERROR_INPUT for a refusal or a
 * request the instance cannot satisfy, CPPARITY_ERROR_RUNTIME for an environment failure) and
 * never prints or exits. Collectives go through the communicator of the setup; a failure on one
 * rank must not leave the others waiting past the communicator's deadline.
 *
 * To add an implementation: one file defining a `const cpparity_implementation` and one line in
 * distributed/models/implementation_registry.c (docs/architecture.md). No harness file changes: not
 * even the memory estimate, which asks the implementation's `estimate`.
 */
#ifndef CPPARITY_DISTRIBUTED_IMPLEMENTATION_H
#define CPPARITY_DISTRIBUTED_IMPLEMENTATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/batch.h"
#include "common/case.h"
#include "common/error.h"
#include "common/model_config.h"
#include "common/tensor_table.h"
#include "distributed/comm/comm.h"
#include "common/fault.h"
#include "distributed/kernels/kernel.h"

/* What one instance is created for. Everything is borrowed for the instance's life except
 * config, which is copied. */
typedef struct cpparity_implementation_setup {
    const cpparity_model_config *config;     /* validated */
    int64_t batch;                           /* B */
    int64_t seq_len;                         /* S of the case, before automatic padding */
    cpparity_dtype dtype;                    /* storage dtype of parameters and activations */
    cpparity_comm *comm;                     /* the CP group; cp = comm->size */
    const cpparity_attention_kernel *kernel; /* the attention kernel to call */
    cpparity_fault fault;   /* a fault to plant (fault.h; self-test only), NONE normally; an
                               implementation that cannot plant it fails create with an input
                               error naming it */
    cpparity_layout layout; /* who holds which tokens (one of its layouts[]) */
    cpparity_algorithm_choice algorithm; /* how attention crosses ranks (its kind one of the
                                            implementation's algorithms[]) */
} cpparity_implementation_setup;

/* What an estimate is asked about: one rank of an instance created for these sizes, in a job run
 * this way. Nothing is allocated; everything is borrowed for the call. */
typedef struct cpparity_implementation_estimate {
    const cpparity_model_config *config;     /* validated */
    int64_t batch;                           /* B */
    int64_t seq_len;                         /* S of the case, before automatic padding */
    int64_t cp;                              /* ranks of the CP group */
    cpparity_dtype dtype;                    /* storage dtype */
    cpparity_layout layout;                  /* the layout it will run */
    cpparity_algorithm_choice algorithm;     /* the algorithm it will run */
    const cpparity_attention_kernel *kernel; /* the kernel it will call (NULL: unknown); its
                                                workspace through kernel_support.h */
    cpparity_fault fault;                    /* the fault planted, NONE normally */
    bool every_fault;                        /* self-test: each fault planted in turn; the
                                                estimate is the largest of them */
    bool comm_on_device;                     /* the communicator moves device memory (nccl):
                                                nothing is staged through the host */
    bool comm_gathers_reduce;                /* the communicator's all-reduce of n values holds
                                                every rank's n on each rank (mpi: cp · n) */
} cpparity_implementation_estimate;

typedef struct cpparity_implementation {
    const char *name;                          /* e.g. "cpu-f32-model" */
    const char *device;                        /* "cpu" or "cuda": what --device selects */
    const char *description;                   /* one line for --help and --version */
    bool dtypes[CPPARITY_DTYPE_COUNT];         /* dtypes it runs (others are NOT RUN, with why) */
    bool layouts[CPPARITY_LAYOUT_COUNT];       /* layouts it shards by (others NOT RUN) */
    bool algorithms[CPPARITY_ALGORITHM_COUNT]; /* algorithms it runs (others NOT RUN) */
    const char *default_kernel;                /* registry name of the kernel used by default */
    /* Whether this machine can run it (NULL: always); when it cannot, why, in why (size bytes),
     * e.g. "no CUDA device: cudaGetDeviceCount returned ...". Asked once, before any job. */
    bool (*available)(char *why, size_t size);
    /* Refuses (CPPARITY_ERROR_INPUT, message starting "refused: " and naming the constraint) a
     * configuration it cannot run at cp ranks with this dtype, algorithm and kernel. No compute. */
    cpparity_status (*check)(const cpparity_model_config *config, int64_t cp, cpparity_dtype dtype,
                             cpparity_algorithm_choice algorithm,
                             const cpparity_attention_kernel *kernel, cpparity_error *error);
    /* Optional (NULL: the harness counts only its own share and says the implementation's is
     * unknown). The most bytes of host memory one rank of an instance holds at once for setup —
     * from create to destroy: its model, the slice of the batch it keeps, scratch, communication
     * buffers, a planted fault's buffers, the kernel's workspace on the host — into *bytes; not
     * what the harness gives or reads back (the batch, the float64 weights, the output buffers),
     * nor device memory. CPPARITY_ERROR_INPUT naming the size (common/checked_size.h) when a
     * size does not fit int64. No allocation of the sizes' order, no collective, same answer on
     * every rank. *kept (not NULL) receives what an instance still holds after backward — its
     * model, parameters, gradients, saved activations, without scratch —, which an
     * implementation with read_logits_rows holds while the harness reads its logits. */
    cpparity_status (*estimate)(const cpparity_implementation_estimate *setup, int64_t *bytes,
                                int64_t *kept, cpparity_error *error);
    /* A new instance in *instance (release with destroy). */
    cpparity_status (*create)(const cpparity_implementation_setup *setup, void **instance,
                              cpparity_error *error);
    /* Takes every parameter it holds from table/values (values has table->total elements; each
     * tensor found by model.md's name, shapes must match). */
    cpparity_status (*load_parameters)(void *instance, const cpparity_tensor_table *table,
                                       const double *values, cpparity_error *error);
    /* Forward on the whole batch (B × S host arrays, common/batch.h); keeps what backward needs. */
    cpparity_status (*forward)(void *instance, const cpparity_batch *batch, cpparity_error *error);
    /* Backward after forward: every parameter gradient, identical on every rank of the group. */
    cpparity_status (*backward)(void *instance, cpparity_error *error);
    /* The loss (the same on every rank). */
    cpparity_status (*read_loss)(void *instance, float *loss, cpparity_error *error);
    /* This rank's logits [B, L, V] into logits (count = B·L·V elements, else an input error). */
    cpparity_status (*read_logits)(void *instance, float *logits, int64_t count,
                                   cpparity_error *error);
    /* Optional (NULL: the harness reads the whole slice with read_logits): this rank's logits
     * rows [row, row + count) of batch row batch_row into rows (count × V), for an
     * implementation that does not hold its slice's logits (a chunked loss, as at long
     * sequences and large vocabularies). The harness reads every row once, one block of
     * positions at a time, after backward and before destroy. */
    cpparity_status (*read_logits_rows)(void *instance, int64_t batch_row, int64_t row,
                                        int64_t count, float *rows, cpparity_error *error);
    /* Number of parameter gradients the instance holds, and the name of gradient index (NULL
     * past the end), so the harness can tell a missing or an extra gradient. */
    int64_t (*gradient_count)(void *instance);
    const char *(*gradient_name)(void *instance, int64_t index);
    /* The gradient of the parameter called name (count elements, else an input error). */
    cpparity_status (*read_gradient)(void *instance, const char *name, float *values, int64_t count,
                                     cpparity_error *error);
    /* Releases the instance; safe on NULL. */
    void (*destroy)(void *instance);
    /* true when its layouts other than contiguous call the kernel's block calls (kernel.h ABI 3):
     * with a kernel that has none their items are NOT CLAIMED, as ring items are. */
    bool layouts_need_block_calls;
} cpparity_implementation;

/* Whether fault (common/fault.h) lives in ring attention, alone or inside a hybrid, and so runs
 * only through a kernel's block calls: ring-merge-max, ring-merge-step-lse, ring-last-step,
 * ring-causal-skip, ring-dkv-direction, hybrid-group-across-ring. */
bool fault_needs_block_calls(cpparity_fault fault);

/* Whether implementation runs the code fault is planted in: the ring faults need its ring
 * algorithm, zigzag-chunk-swap its zigzag layout, hybrid-group-across-ring its hybrid; every
 * other fault is the implementation's own
 * business (its create refuses what it cannot plant). */
typedef enum implementation_fault_support {
    IMPLEMENTATION_FAULT_SUPPORTED = 0,
    IMPLEMENTATION_FAULT_NEEDS_RING = 1,
    IMPLEMENTATION_FAULT_NEEDS_ZIGZAG = 2,
    IMPLEMENTATION_FAULT_NEEDS_HYBRID = 3,
} implementation_fault_support;
implementation_fault_support
implementation_supports_fault(const cpparity_implementation *implementation, cpparity_fault fault);

/* The float32 model of docs/model.md on CPU ranks (distributed/models/implementation_cpu.c). */
extern const cpparity_implementation cpparity_cpu_implementation;

#ifdef CPPARITY_HAVE_CUDA_IMPLEMENTATION
/* The same model on CUDA devices (distributed/models/implementation_cuda.cu, model_cuda.h). */
extern const cpparity_implementation cpparity_cuda_implementation;
#endif

#endif
