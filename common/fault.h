/*
 * fault.h — the faults `cpparity run --inject NAME` and `cpparity selftest` plant in the
 * implementation under test: each a small, documented deviation at the real place in
 * distributed/ where that class of bug lives (docs/bug-classes.md), off by default and free when
 * off (one integer comparison at that place).
 *
 * Each fault is one bug class: the classes of docs/bug-classes.md and a few of the kernel's own
 * (tiling, online-softmax merge, tile classification, kv sum-back, reduction order, lse layout)
 * and ring attention's (the log-sum-exp merge, the steps, skipped blocks, where dK and dV go, the
 * zigzag layout).
 * A fault is "kernel" when it lives inside the built-in CPU kernel
 * (distributed/kernels/kernel_cpu.c): it can be planted only when that kernel is the one under
 * test. The table is here, in common/, because the harness and the reports name faults too; the
 * deviations are in distributed/.
 */
#ifndef CPPARITY_COMMON_FAULT_H
#define CPPARITY_COMMON_FAULT_H

#include <stdbool.h>

typedef enum cpparity_fault {
    CPPARITY_FAULT_NONE = 0,
    CPPARITY_FAULT_MASK_DROPPED,
    CPPARITY_FAULT_WINDOW_OFF_BY_ONE,
    CPPARITY_FAULT_WINDOW_LOCAL,
    CPPARITY_FAULT_CHUNK_NO_LEFT_PAD,
    CPPARITY_FAULT_CHUNK_LOCAL,
    CPPARITY_FAULT_CHUNK_POSITION_RESTART,
    CPPARITY_FAULT_POSITIONS_LOCAL,
    CPPARITY_FAULT_DOCS_LOCAL,
    CPPARITY_FAULT_PADDING_SIDE,
    CPPARITY_FAULT_PAD_LEAK,
    CPPARITY_FAULT_LABEL_SHIFT_IN_SHARD,
    CPPARITY_FAULT_LOSS_MEAN_OF_MEANS,
    CPPARITY_FAULT_GRAD_SCALED_BY_CP,
    CPPARITY_FAULT_GRAD_NOT_REDUCED,
    CPPARITY_FAULT_A2A_HEAD_ORDER,
    CPPARITY_FAULT_GQA_KV_MAPPING,
    CPPARITY_FAULT_AUTOPAD_TRUNCATE,
    CPPARITY_FAULT_AUTOPAD_UNMASKED,
    CPPARITY_FAULT_BACKWARD_ONLY,
    CPPARITY_FAULT_STALE_RANK_SLICE,
    CPPARITY_FAULT_FULLY_MASKED_NAN,
    CPPARITY_FAULT_SCALE_DROPPED,
    CPPARITY_FAULT_LAYER_TYPE_MIXUP,
    CPPARITY_FAULT_KERNEL_TILING,
    CPPARITY_FAULT_SOFTMAX_MERGE,
    CPPARITY_FAULT_TILE_CLASSIFICATION,
    CPPARITY_FAULT_KV_SUM_BACK,
    CPPARITY_FAULT_GRAD_REDUCE_ORDER,
    CPPARITY_FAULT_LSE_LAYOUT,
    CPPARITY_FAULT_RING_MERGE_MAX,
    CPPARITY_FAULT_RING_MERGE_STEP_LSE,
    CPPARITY_FAULT_RING_LAST_STEP,
    CPPARITY_FAULT_RING_CAUSAL_SKIP,
    CPPARITY_FAULT_RING_DKV_DIRECTION,
    CPPARITY_FAULT_ZIGZAG_CHUNK_SWAP,
    CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING,
    CPPARITY_FAULT_COUNT
} cpparity_fault;

typedef struct cpparity_fault_info {
    const char *name;  /* what --inject takes, e.g. "window-off-by-one" */
    const char *bug;   /* the deviation planted, in one line */
    const char *where; /* file and function of distributed/ where it is planted */
    bool kernel;       /* planted inside the built-in CPU kernel */
} cpparity_fault_info;

/* Indexed by cpparity_fault; entry 0 is "none". */
extern const cpparity_fault_info cpparity_faults[CPPARITY_FAULT_COUNT];

/* The fault called name, or −1 when there is none (names are exact, "none" included). */
int cpparity_fault_from_name(const char *name);

/* The fault's name ("none" for CPPARITY_FAULT_NONE, "?" out of range). */
const char *cpparity_fault_name(cpparity_fault fault);

#endif
