/*
 * run_exchange.h — moving finished items from the ranks that ran them to rank 0 of the job:
 * items are packed into bytes (every rank runs the same binary, so structs travel as they are,
 * with their pointers rebuilt on arrival) and gathered with the communicator's gather_bytes.
 */
#ifndef CPPARITY_HARNESS_RUNNING_RUN_EXCHANGE_H
#define CPPARITY_HARNESS_RUNNING_RUN_EXCHANGE_H

#include <stdint.h>

#include "common/error.h"
#include "harness/running/run_plan.h"
#include "results_model/results.h"

typedef struct byte_buffer {
    uint8_t *data;    /* owned */
    int64_t size;     /* bytes used */
    int64_t capacity; /* bytes allocated */
} byte_buffer;

void byte_buffer_free(byte_buffer *buffer);

/* Appends size bytes of data to buffer. CPPARITY_ERROR_RUNTIME when out of memory. */
cpparity_status run_exchange_append(byte_buffer *buffer, const void *data, int64_t size,
                                    cpparity_error *error);

/* Appends item (which ran plan item plan_index) with its tensors and stored values. */
cpparity_status run_exchange_pack(byte_buffer *buffer, int64_t plan_index, const run_item *item,
                                  cpparity_error *error);

/* Reads every item packed in bytes [0, size): for each calls store(plan_index, item, context),
 * which takes ownership of the item's tensors. The case pointer is set from plan. */
cpparity_status run_exchange_unpack(const uint8_t *bytes, int64_t size, const run_plan *plan,
                                    void (*store)(int64_t plan_index, run_item *item,
                                                  void *context),
                                    void *context, cpparity_error *error);

#endif
