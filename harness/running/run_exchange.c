/* run_exchange.c — packing finished items into bytes and back (see run_exchange.h). */
#include "harness/running/run_exchange.h"

#include <stdlib.h>
#include <string.h>

void byte_buffer_free(byte_buffer *buffer) {
    free(buffer->data);
    memset(buffer, 0, sizeof *buffer);
}

cpparity_status run_exchange_append(byte_buffer *buffer, const void *data, int64_t size,
                                    cpparity_error *error) {
    if (buffer->size + size > buffer->capacity) {
        int64_t capacity = buffer->capacity * 2 + size + 4096;
        uint8_t *grown = realloc(buffer->data, (size_t)capacity);
        if (grown == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (packing)");
        }
        buffer->data = grown;
        buffer->capacity = capacity;
    }
    if (size > 0) {
        memcpy(buffer->data + buffer->size, data, (size_t)size);
    }
    buffer->size += size;
    return CPPARITY_OK;
}

/* Elements of a record's stored arrays (0 when none). */
static int64_t stored_count(const tensor_record *record) {
    if (record->values == NULL) {
        return 0;
    }
    int64_t shape[4], count = 0;
    tensor_record_stored_shape(record, shape, &count);
    return count;
}

cpparity_status run_exchange_pack(byte_buffer *buffer, int64_t plan_index, const run_item *item,
                                  cpparity_error *error) {
    cpparity_status status = run_exchange_append(buffer, &plan_index, sizeof plan_index, error);
    if (status == CPPARITY_OK) {
        status = run_exchange_append(buffer, item, sizeof *item, error);
    }
    for (int64_t i = 0; i < item->tensor_count && status == CPPARITY_OK; i++) {
        const tensor_record *record = &item->tensors[i];
        const int64_t count = stored_count(record);
        status = run_exchange_append(buffer, record, sizeof *record, error);
        if (status == CPPARITY_OK) {
            status = run_exchange_append(buffer, &count, sizeof count, error);
        }
        if (status == CPPARITY_OK && count > 0) {
            status =
                run_exchange_append(buffer, record->values, count * (int64_t)sizeof(float), error);
        }
        if (status == CPPARITY_OK && count > 0) {
            status = run_exchange_append(buffer, record->reference, count * (int64_t)sizeof(double),
                                         error);
        }
        const int64_t positions = record->position_error != NULL ? record->shape[1] : 0;
        if (status == CPPARITY_OK) {
            status = run_exchange_append(buffer, &positions, sizeof positions, error);
        }
        if (status == CPPARITY_OK && positions > 0) {
            status = run_exchange_append(buffer, record->position_error,
                                         positions * (int64_t)sizeof(double), error);
        }
        /* each position's limit, where the per-position rule applies */
        const int64_t limits = positions > 0 && record->position_limit != NULL ? positions : 0;
        if (status == CPPARITY_OK) {
            status = run_exchange_append(buffer, &limits, sizeof limits, error);
        }
        if (status == CPPARITY_OK && limits > 0) {
            status = run_exchange_append(buffer, record->position_limit,
                                         limits * (int64_t)sizeof(double), error);
        }
        /* rows that are not consecutive positions (zigzag, round-robin): each row's position */
        const int64_t rows = record->positions != NULL ? record->shape[1] : 0;
        if (status == CPPARITY_OK) {
            status = run_exchange_append(buffer, &rows, sizeof rows, error);
        }
        if (status == CPPARITY_OK && rows > 0) {
            status = run_exchange_append(buffer, record->positions, rows * (int64_t)sizeof(int64_t),
                                         error);
        }
    }
    return status;
}

/* Copies size bytes at *offset out of bytes, failing past the end. */
static cpparity_status take(const uint8_t *bytes, int64_t size, int64_t *offset, void *out,
                            int64_t length, cpparity_error *error) {
    if (*offset + length > size) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "corrupt result exchange: %lld bytes wanted at %lld of %lld",
                                  (long long)length, (long long)*offset, (long long)size);
    }
    memcpy(out, bytes + *offset, (size_t)length);
    *offset += length;
    return CPPARITY_OK;
}

cpparity_status run_exchange_unpack(const uint8_t *bytes, int64_t size, const run_plan *plan,
                                    void (*store)(int64_t plan_index, run_item *item,
                                                  void *context),
                                    void *context, cpparity_error *error) {
    int64_t offset = 0;
    while (offset < size) {
        int64_t plan_index = -1;
        run_item item;
        cpparity_status status = take(bytes, size, &offset, &plan_index, sizeof plan_index, error);
        if (status == CPPARITY_OK) {
            status = take(bytes, size, &offset, &item, sizeof item, error);
        }
        if (status != CPPARITY_OK) {
            return status;
        }
        if (plan_index < 0 || plan_index >= plan->item_count) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                      "corrupt result exchange: item %lld", (long long)plan_index);
        }
        item.source = plan->cases[plan->items[plan_index].case_index];
        item.tensors =
            item.tensor_count > 0 ? calloc((size_t)item.tensor_count, sizeof *item.tensors) : NULL;
        if (item.tensor_count > 0 && item.tensors == NULL) {
            return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory (unpacking)");
        }
        for (int64_t i = 0; i < item.tensor_count && status == CPPARITY_OK; i++) {
            tensor_record *record = &item.tensors[i];
            int64_t count = 0;
            status = take(bytes, size, &offset, record, sizeof *record, error);
            record->values = NULL;
            record->reference = NULL;
            record->position_error = NULL;
            record->position_limit = NULL;
            record->positions = NULL;
            if (status == CPPARITY_OK) {
                status = take(bytes, size, &offset, &count, sizeof count, error);
            }
            if (status == CPPARITY_OK && count > 0) {
                record->values = malloc((size_t)count * sizeof(float));
                record->reference = malloc((size_t)count * sizeof(double));
                if (record->values == NULL || record->reference == NULL) {
                    status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory");
                } else {
                    status = take(bytes, size, &offset, record->values,
                                  count * (int64_t)sizeof(float), error);
                    if (status == CPPARITY_OK) {
                        status = take(bytes, size, &offset, record->reference,
                                      count * (int64_t)sizeof(double), error);
                    }
                }
            }
            int64_t positions = 0;
            if (status == CPPARITY_OK) {
                status = take(bytes, size, &offset, &positions, sizeof positions, error);
            }
            if (status == CPPARITY_OK && positions > 0) {
                record->position_error = malloc((size_t)positions * sizeof(double));
                status = record->position_error == NULL
                             ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
                             : take(bytes, size, &offset, record->position_error,
                                    positions * (int64_t)sizeof(double), error);
            }
            int64_t limits = 0;
            if (status == CPPARITY_OK) {
                status = take(bytes, size, &offset, &limits, sizeof limits, error);
            }
            if (status == CPPARITY_OK && limits > 0) {
                record->position_limit = malloc((size_t)limits * sizeof(double));
                status = record->position_limit == NULL
                             ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
                             : take(bytes, size, &offset, record->position_limit,
                                    limits * (int64_t)sizeof(double), error);
            }
            int64_t rows = 0;
            if (status == CPPARITY_OK) {
                status = take(bytes, size, &offset, &rows, sizeof rows, error);
            }
            if (status == CPPARITY_OK && rows > 0) {
                record->positions = malloc((size_t)rows * sizeof(int64_t));
                status = record->positions == NULL
                             ? cpparity_error_set(error, CPPARITY_ERROR_RUNTIME, "out of memory")
                             : take(bytes, size, &offset, record->positions,
                                    rows * (int64_t)sizeof(int64_t), error);
            }
        }
        if (status != CPPARITY_OK) {
            run_item_free_tensors(&item);
            return status;
        }
        store(plan_index, &item, context);
    }
    return CPPARITY_OK;
}
