/*
 * test_fault_injection.c — the faults of common/fault.h: the table is complete and agrees with
 * docs/bug-classes.md, and each deviation planted outside the end-to-end self-test does exactly
 * what its one line says (so a fault that silently stops being planted fails here, not only in
 * `cpparity selftest`).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fault.h"
#include "distributed/models/layer_attention.h"
#include "distributed/kernels/mask_description.h"
#include "distributed/kernels/mask_predicate.h"
#include "distributed/cp/shard.h"
#include "distributed/cp/ulysses.h"

Test(fault_table, every_fault_has_a_unique_name_a_bug_and_a_place) {
    for (int f = 1; f < CPPARITY_FAULT_COUNT; f++) {
        const cpparity_fault_info *info = &cpparity_faults[f];
        cr_assert(info->name != NULL && info->name[0] != '\0', "fault %d has no name", f);
        cr_expect(info->bug != NULL && strlen(info->bug) > 10, "%s: no bug described", info->name);
        cr_expect(info->where != NULL && strstr(info->where, ".") != NULL,
                  "%s: no file named in where", info->name);
        cr_expect(!info->kernel || strstr(info->where, "kernel_cpu.c") != NULL,
                  "%s is a kernel fault but is not planted in kernel_cpu.c", info->name);
        cr_expect_eq(cpparity_fault_from_name(info->name), f, "%s does not round-trip", info->name);
        for (int g = 1; g < f; g++) {
            cr_expect(strcmp(cpparity_faults[g].name, info->name) != 0, "%s twice", info->name);
        }
    }
    cr_expect_eq(cpparity_fault_from_name("none"), CPPARITY_FAULT_NONE);
    cr_expect_eq(cpparity_fault_from_name("no-such-fault"), -1);
    cr_expect_eq(cpparity_fault_from_name(NULL), -1);
}

/* Every class of docs/bug-classes.md's table is a fault that can be planted, and its table of
 * faults lists each fault. */
Test(fault_table, every_class_of_bug_classes_md_can_be_planted) {
    FILE *file = fopen(CPPARITY_SOURCE_DIR "/docs/bug-classes.md", "r");
    cr_assert(file != NULL, "cannot read docs/bug-classes.md");
    char line[1024], name[64];
    int classes = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        /* table rows: "| name | the bug | ..." with a lower-case hyphenated name */
        /* skip the tables' separators and header rows ("name", "fault") */
        if (sscanf(line, "| %63[a-z0-9-] |", name) == 1 && name[0] != '-' &&
            strcmp(name, "name") != 0 && strcmp(name, "fault") != 0) {
            classes++;
            cr_expect(cpparity_fault_from_name(name) > 0, "bug class %s has no fault", name);
        }
    }
    fclose(file);
    /* the 30 classes of the first table (23, and 7 of ring and hybrid attention and the zigzag
     * layout) and the 36 faults of the second */
    cr_expect_eq(classes, 30 + CPPARITY_FAULT_COUNT - 1, "read %d rows from docs/bug-classes.md",
                 classes);
}

/* One row of 8 tokens: 2 padding (positions continuing), a document of 6, built with fault
 * planted (shard length shard). */
static mask_storage row_storage(cpparity_fault fault, int64_t shard) {
    const int8_t attention_mask[8] = {0, 0, 1, 1, 1, 1, 1, 1};
    const int64_t position_ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    mask_storage storage;
    cr_assert_eq(mask_storage_build_planted(&storage, 1, 8, attention_mask, position_ids, fault,
                                            shard, NULL),
                 CPPARITY_OK);
    return storage;
}

Test(fault_mask, docs_local_splits_documents_at_every_shard_start) {
    mask_storage storage = row_storage(CPPARITY_FAULT_DOCS_LOCAL, 3);
    const int64_t document[8] = {0, 0, 0, 1, 1, 1, 2, 2};
    const int64_t start[8] = {0, 0, 0, 3, 3, 3, 6, 6};
    for (int t = 0; t < 8; t++) {
        cr_expect_eq(storage.document[t], document[t], "document[%d]", t);
        cr_expect_eq(storage.document_start[t], start[t], "document_start[%d]", t);
    }
    mask_storage_free(&storage);
}

Test(fault_mask, padding_side_treats_the_first_real_count_tokens_as_valid) {
    mask_storage storage = row_storage(CPPARITY_FAULT_PADDING_SIDE, 4);
    for (int t = 0; t < 8; t++) {
        cr_expect_eq(storage.key_valid[t], t < 6, "key_valid[%d]", t);
    }
    cr_expect_eq(storage.left_padding[0], 0);
    mask_storage_free(&storage);
}

Test(fault_mask, chunk_position_restart__positions_rebuilt_from_document_starts) {
    /* two documents: positions 0..2, then 5..9 (a document starting mid-stream, at 5) */
    const int8_t attention_mask[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t position_ids[8] = {0, 1, 2, 5, 6, 7, 8, 9};
    mask_storage storage;
    cr_assert_eq(mask_storage_build_planted(&storage, 1, 8, attention_mask, position_ids,
                                            CPPARITY_FAULT_NONE, 4, NULL),
                 CPPARITY_OK);
    for (int t = 0; t < 8; t++) {
        cr_expect_eq(storage.position[t], position_ids[t], "clean: position[%d]", t);
    }
    mask_storage_free(&storage);
    cr_assert_eq(mask_storage_build_planted(&storage, 1, 8, attention_mask, position_ids,
                                            CPPARITY_FAULT_CHUNK_POSITION_RESTART, 4, NULL),
                 CPPARITY_OK);
    const int64_t restarted[8] = {0, 1, 2, 0, 1, 2, 3, 4};
    for (int t = 0; t < 8; t++) {
        cr_expect_eq(storage.position[t], restarted[t], "planted: position[%d]", t);
        cr_expect_eq(storage.document[t], t < 3 ? 0 : 1, "documents untouched: %d", t);
    }
    mask_storage_free(&storage);
}

Test(fault_mask, pad_leak_and_chunk_no_left_pad_and_mask_dropped) {
    mask_storage storage = row_storage(CPPARITY_FAULT_CHUNK_NO_LEFT_PAD, 4);
    cr_expect_eq(storage.left_padding[0], 0, "the chunk grid must lose the left padding");
    cr_expect_eq(storage.key_valid[0], 0, "chunk-no-left-pad must keep padding masked");
    mask_storage_free(&storage);
    storage = row_storage(CPPARITY_FAULT_PAD_LEAK, 4);
    cr_expect(storage.key_valid[0] == 1 && storage.key_valid[1] == 1, "padding keys must leak");
    cr_expect_eq(storage.left_padding[0], 2, "pad-leak keeps the chunk grid");
    mask_storage_free(&storage);
    storage = row_storage(CPPARITY_FAULT_NONE, 4); /* nothing planted: the true mask */
    cr_expect(storage.key_valid[0] == 0 && storage.key_valid[2] == 1 &&
              storage.left_padding[0] == 2);
    mask_storage_free(&storage);
    const int8_t attention_mask[4] = {0, 1, 1, 1};
    const int64_t position_ids[4] = {0, 0, 0, 1}; /* three documents */
    cr_assert_eq(mask_storage_build_planted(&storage, 1, 4, attention_mask, position_ids,
                                            CPPARITY_FAULT_MASK_DROPPED, 2, NULL),
                 CPPARITY_OK);
    for (int t = 0; t < 4; t++) {
        cr_expect(storage.key_valid[t] == 1 && storage.document[t] == 0, "token %d", t);
    }
    mask_storage_free(&storage);
    cr_assert_eq(mask_storage_build_planted(&storage, 1, 4, attention_mask, position_ids,
                                            CPPARITY_FAULT_NONE, 2, NULL),
                 CPPARITY_OK);
    cr_expect_eq(storage.document[3], 2, "unplanted: three documents");
    mask_storage_free(&storage);
}

Test(fault_mask, tile_classification_without_the_key_scan_calls_a_padded_tile_full) {
    const int8_t attention_mask[8] = {0, 0, 1, 1, 1, 1, 1, 1};
    const int64_t position_ids[8] = {0, 1, 2, 3, 4, 5, 6, 7}; /* one document, padding inside */
    mask_storage storage;
    cr_assert_eq(mask_storage_build(&storage, 1, 8, attention_mask, position_ids, NULL),
                 CPPARITY_OK);
    const cpparity_attention_layer full = {CPPARITY_LAYER_FULL, 1, 1, CPPARITY_CHUNK_ORIGIN_ROW};
    const cpparity_mask_description mask = mask_storage_describe(&storage, full);
    cr_expect_eq(mask_classify_tile(&mask, 0, 4, 8, 0, 4), MASK_TILE_PARTIAL);
    cr_expect_eq(mask_classify_tile_scanning(&mask, 0, 4, 8, 0, 4, false), MASK_TILE_FULL);
    mask_storage_free(&storage);
}

Test(fault_shard, label_shift_and_autopad_faults_change_only_their_tokens) {
    cpparity_batch local;
    cr_assert_eq(cpparity_batch_allocate(&local, 1, 4, NULL), CPPARITY_OK);
    /* rank 1 of 2 for S = 7: global positions 4..7, position 7 is automatic padding */
    const shard_layout layout = shard_layout_make(7, 2, 1, CPPARITY_LAYOUT_CONTIGUOUS);
    const int64_t labels[4] = {11, 12, -100, -100};
    const int8_t mask[4] = {1, 1, 1, 0};
    for (int t = 0; t < 4; t++) {
        local.labels[t] = labels[t];
        local.attention_mask[t] = mask[t];
    }
    shard_inject(&local, &layout, CPPARITY_FAULT_AUTOPAD_UNMASKED);
    cr_expect(local.attention_mask[3] == 1 && local.labels[3] == SHARD_PAD_TOKEN,
              "automatic padding must become a labelled real token");
    local.attention_mask[3] = 0;
    local.labels[3] = -100;
    shard_inject(&local, &layout, CPPARITY_FAULT_AUTOPAD_TRUNCATE);
    /* kept = 2 · floor(7 / 2) = 6: position 6 dropped, position 5 loses its target */
    cr_expect_eq(shard_truncated_length(&layout), 6);
    cr_expect_eq(local.labels[0], 11, "position 4 keeps its label");
    cr_expect_eq(local.labels[1], -100, "position 5's target was truncated");
    cr_expect_eq(local.attention_mask[2], 0, "position 6 is truncated");
    local.labels[0] = 11;
    shard_inject(&local, &layout, CPPARITY_FAULT_LABEL_SHIFT_IN_SHARD);
    cr_expect_eq(local.labels[3], -100, "the last token of the slice loses its label");
    cr_expect_eq(local.labels[0], 11);
    cpparity_batch_free(&local);
}

Test(fault_ulysses, kv_mapping_and_sum_back_faults) {
    /* one token, 2 kv heads repeated to cp = 4: head j of the repeats carries kv head j / 2, or
     * j mod 2 under gqa-kv-mapping */
    const float kv[2] = {10.0f, 20.0f};
    float repeated[4], summed[2];
    ulysses_repeat_kv_mapped(repeated, kv, 1, 2, 4, 1, CPPARITY_FAULT_NONE);
    cr_expect(repeated[0] == 10.0f && repeated[1] == 10.0f && repeated[2] == 20.0f);
    ulysses_repeat_kv_mapped(repeated, kv, 1, 2, 4, 1, CPPARITY_FAULT_GQA_KV_MAPPING);
    cr_expect(repeated[0] == 10.0f && repeated[1] == 20.0f && repeated[2] == 10.0f);
    const float gradients[4] = {1.0f, 2.0f, 4.0f, 8.0f};
    ulysses_sum_repeated_kv_mapped(summed, gradients, 1, 2, 4, 1, CPPARITY_FAULT_NONE);
    cr_expect(summed[0] == 3.0f && summed[1] == 12.0f, "sums %g %g", summed[0], summed[1]);
    ulysses_sum_repeated_kv_mapped(summed, gradients, 1, 2, 4, 1, CPPARITY_FAULT_KV_SUM_BACK);
    cr_expect(summed[0] == 1.0f && summed[1] == 4.0f, "first repeats %g %g", summed[0], summed[1]);
}

Test(fault_ulysses, sent_head_is_contiguous_blocks_or_strided_under_a2a_head_order) {
    /* H = 8 heads, cp = 4: rank j's block holds heads 2j, 2j + 1; strided, heads j and j + 4.
     * Both orders are permutations of the 8 heads (every head sent exactly once). */
    const int64_t heads = 8, cp = 4, local_heads = 2;
    int sent[2][8] = {{0}};
    for (int64_t j = 0; j < cp; j++) {
        for (int64_t i = 0; i < local_heads; i++) {
            const int64_t normal = ulysses_sent_head(j, i, heads, cp, CPPARITY_FAULT_NONE);
            const int64_t strided =
                ulysses_sent_head(j, i, heads, cp, CPPARITY_FAULT_A2A_HEAD_ORDER);
            cr_expect_eq(normal, j * local_heads + i);
            cr_expect_eq(strided, i * cp + j);
            cr_expect_eq(ulysses_sent_head(j, i, heads, cp, CPPARITY_FAULT_GQA_KV_MAPPING), normal,
                         "only a2a-head-order changes the order");
            sent[0][normal]++;
            sent[1][strided]++;
        }
    }
    for (int h = 0; h < 8; h++) {
        cr_expect(sent[0][h] == 1 && sent[1][h] == 1, "head %d sent %d and %d times", h, sent[0][h],
                  sent[1][h]);
    }
}

Test(fault_ulysses, repeated_head_and_sums_repeat_match_the_host_functions) {
    /* 2 kv heads repeated to cp = 6 (3 repeats each): the mapping the CPU functions use and the
     * CUDA model's fault paths share */
    for (int64_t j = 0; j < 6; j++) {
        cr_expect_eq(ulysses_repeated_head(j, 2, 6, CPPARITY_FAULT_NONE), j / 3);
        cr_expect_eq(ulysses_repeated_head(j, 2, 6, CPPARITY_FAULT_GQA_KV_MAPPING), j % 2);
        cr_expect(ulysses_sums_repeat(j, 2, 6, CPPARITY_FAULT_NONE));
        cr_expect_eq(ulysses_sums_repeat(j, 2, 6, CPPARITY_FAULT_KV_SUM_BACK), j % 3 == 0,
                     "repeat %lld", (long long)j);
    }
}

Test(fault_layer, window_mask_type_and_scale_faults_change_the_kernel_call) {
    /* 4 layers: sliding, full, sliding, full (window 3) over one row of 8 tokens */
    cpparity_model_config config = {0};
    config.num_hidden_layers = 4;
    config.sliding_window = 3;
    for (int l = 0; l < 4; l++) {
        config.layer_types[l] = l % 2 == 0 ? CPPARITY_LAYER_SLIDING : CPPARITY_LAYER_FULL;
    }
    const int8_t attention_mask[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t positions[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    mask_storage storage = {0};
    cpparity_error error = {0};
    cr_assert_eq(mask_storage_build(&storage, 1, 8, attention_mask, positions, &error), CPPARITY_OK,
                 "%s", error.message);
    const cpparity_mask_description plain =
        layer_attention_mask(&storage, &config, 0, CPPARITY_FAULT_NONE);
    const cpparity_mask_description wider =
        layer_attention_mask(&storage, &config, 0, CPPARITY_FAULT_WINDOW_OFF_BY_ONE);
    cr_expect_eq(wider.window, plain.window + 1);
    cr_expect_eq(layer_attention_mask(&storage, &config, 0, CPPARITY_FAULT_MASK_DROPPED).layer_type,
                 0, "mask-dropped: plain causal");
    /* layer-type-mixup: layer 0 (sliding) takes layer 3's type (full) */
    cr_expect_neq(
        layer_attention_mask(&storage, &config, 0, CPPARITY_FAULT_LAYER_TYPE_MIXUP).layer_type,
        plain.layer_type);
    cr_expect_eq(layer_attention_mask(&storage, &config, 0, CPPARITY_FAULT_PAD_LEAK).window,
                 plain.window, "faults of other places leave the description alone");
    /* 1/sqrt(64) = 0.125 exactly; scale-dropped passes 1 */
    cr_expect_eq(layer_attention_scale(64, CPPARITY_FAULT_NONE), 0.125f);
    cr_expect_eq(layer_attention_scale(64, CPPARITY_FAULT_SCALE_DROPPED), 1.0f);
    mask_storage_free(&storage);
}
