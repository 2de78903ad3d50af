/*
 * kernel_replay.h — a kernel dump (harness/storage/kernel_dump.h) as an attention kernel: its
 * calls give back what the dump recorded for the layer and phase an attention-level item is at
 * (attention_item_observer), so that `cpparity judge EXPORT.h5 KERNEL_DUMP.h5` judges a kernel
 * called from Python through the very code that judges a C plugin (attention_item.h): the same
 * records, checks, verdicts and messages.
 *
 * The kernel is named after the dump's `kernel`; it claims every capability (a layer the dump
 * marks `unsupported` is refused by its supports(), with the dump's reason: NOT CLAIMED),
 * declares determinism when the dump does (its second calls give `again/`), and has block calls
 * when the dump has them (each call given the pair its token lists name). A backward given the
 * reference's out and lse gives `backward_alone/`, or, for a dump whose kernel's backward takes
 * no out and lse (backward_uses_out_lse 0), the gradients of its own call: what such a kernel
 * returns for any out and lse. A call outside what the dump holds fails with a message naming
 * it. Calls are serial (no concurrent-calls capability).
 */
#ifndef CPPARITY_HARNESS_RUNNING_KERNEL_REPLAY_H
#define CPPARITY_HARNESS_RUNNING_KERNEL_REPLAY_H

#include "distributed/kernels/kernel.h"
#include "harness/running/attention_item.h"
#include "harness/storage/kernel_dump.h"

typedef struct kernel_replay {
    cpparity_attention_kernel kernel; /* what attention_item_run_observed calls */
    attention_item_observer observer; /* what it tells */
    const kernel_dump *dump;
    const kernel_dump_case *current; /* the case being judged */
    int64_t layer;                   /* where the item is */
    attention_call_phase phase;
} kernel_replay;

/* Sets replay up over dump (borrowed: it must outlive replay). */
void kernel_replay_init(kernel_replay *replay, const kernel_dump *dump);

/* Selects case index of the dump (its order in the export). */
void kernel_replay_select(kernel_replay *replay, int64_t index);

#endif
