/*
 * test_model_config.c — the model configuration's one table (common/model_config.h): every
 * field has a member, a unique transformers name, a default when optional; validation names the
 * offending key; values format as text; and the case loader takes exactly the table's keys.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/model_config.h"
#include "common/names.h"
#include "harness/suite/case_file.h"
#include "tests/support/test_models.h"

/* A valid configuration: every required size set, W and C unset (no layer uses them). */
static cpparity_model_config valid_config(void) {
    cpparity_model_config config = test_small_model(CPPARITY_LAYER_FULL, CPPARITY_LAYER_FULL);
    config.sliding_window = 0;
    config.attention_chunk_size = 0;
    return config;
}

Test(model_config, table__unique_names_members_inside_the_struct_findable) {
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        const cpparity_model_field *field = &cpparity_model_fields[i];
        cr_assert_not_null(field->name);
        cr_assert_lt(field->offset, sizeof(cpparity_model_config), "%s", field->name);
        cr_assert_eq(cpparity_model_field_find(field->name), field, "%s", field->name);
        cr_assert_not_null(field->description, "%s", field->name);
        for (int j = 0; j < i; j++) {
            cr_assert_str_neq(field->name, cpparity_model_fields[j].name);
            cr_assert_neq(field->offset, cpparity_model_fields[j].offset, "%s shares a member",
                          field->name);
        }
    }
    cr_assert_null(cpparity_model_field_find("max_position_embeddings"));
}

Test(model_config, defaults__the_documented_values) {
    cpparity_model_config config = valid_config();
    cr_assert_eq(config.rms_norm_eps, 1e-6);
    cr_assert_eq(config.rope_theta, 10000.0);
    cr_assert_eq(config.chunk_origin, CPPARITY_CHUNK_ORIGIN_ROW);
    cr_assert_not(config.tie_word_embeddings);
    for (int l = 0; l < CPPARITY_MAX_LAYERS; l++) {
        cr_assert_eq(config.layer_types[l], CPPARITY_LAYER_FULL);
    }
    cpparity_error error;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_OK, "%s", error.message);
}

Test(model_config, validate__each_required_size_named_when_zero) {
    for (int i = 0; i < CPPARITY_MODEL_FIELD_COUNT; i++) {
        const cpparity_model_field *field = &cpparity_model_fields[i];
        if (!field->required) {
            continue;
        }
        cpparity_model_config config = valid_config();
        *(int64_t *)cpparity_model_field_address(&config, field) = 0;
        cpparity_error error;
        cpparity_error_clear(&error);
        cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_ERROR_INPUT, "%s",
                     field->name);
        cr_assert(strstr(error.message, field->name) != NULL, "%s: %s", field->name, error.message);
    }
}

Test(model_config, validate__window_and_chunk_required_only_by_their_layers) {
    cpparity_model_config config = valid_config();
    cpparity_error error;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_OK,
                 "W and C are 0 but no layer uses them");
    config.layer_types[1] = CPPARITY_LAYER_SLIDING;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "sliding_window") != NULL &&
                  strstr(error.message, "layer 1 is sliding_attention") != NULL,
              "%s", error.message);
    config.sliding_window = 3;
    config.layer_types[0] = CPPARITY_LAYER_CHUNKED;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "attention_chunk_size") != NULL, "%s", error.message);
    config.attention_chunk_size = 2;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_OK, "%s", error.message);
    config.rope_theta = INFINITY;
    cr_assert_eq(cpparity_model_config_validate(&config, &error), CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "rope_theta") != NULL, "%s", error.message);
}

Test(model_config, format__every_type_as_text) {
    cpparity_model_config config = valid_config();
    config.layer_types[1] = CPPARITY_LAYER_SLIDING;
    config.chunk_origin = CPPARITY_CHUNK_ORIGIN_DOCUMENT;
    config.tie_word_embeddings = true;
    const struct {
        const char *field;
        const char *text;
    } expected[] = {
        {"vocab_size", "11"},
        {"rms_norm_eps", "9.9999999999999995e-07"},
        {"layer_types", "[full_attention, sliding_attention]"},
        {"chunk_origin", "document"},
        {"tie_word_embeddings", "true"},
    };
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        char text[256];
        cpparity_model_field_format(&config, cpparity_model_field_find(expected[i].field), text,
                                    sizeof text);
        cr_assert_str_eq(text, expected[i].text, "%s", expected[i].field);
    }
}

Test(model_config, loader__accepts_every_table_key_and_nothing_else) {
    char text[2048];
    /* every optional field written out, with a non-default value */
    snprintf(text, sizeof text,
             "cases:\n"
             "  - name: all-keys\n"
             "    model: {vocab_size: 11, hidden_size: 8, num_hidden_layers: 2,\n"
             "            num_attention_heads: 4, num_key_value_heads: 2, head_dim: 4,\n"
             "            intermediate_size: 12, rms_norm_eps: 1.0e-5, rope_theta: 500.0,\n"
             "            layer_types: [sliding_attention, chunked_attention],\n"
             "            sliding_window: 3, attention_chunk_size: 5, chunk_origin: document,\n"
             "            tie_word_embeddings: true}\n"
             "    seq_len: 8\n"
             "    rows: [{documents: [8]}]\n"
             "    cp: [1]\n");
    cpparity_suite suite;
    cpparity_error error;
    cr_assert_eq(cpparity_suite_load_text(text, strlen(text), "all.yaml", &suite, &error),
                 CPPARITY_OK, "%s", error.message);
    const cpparity_model_config *model = &suite.cases[0].model;
    cr_assert_eq(model->rms_norm_eps, 1.0e-5);
    cr_assert_eq(model->rope_theta, 500.0);
    cr_assert_eq(model->layer_types[1], CPPARITY_LAYER_CHUNKED);
    cr_assert_eq(model->attention_chunk_size, 5);
    cr_assert_eq(model->chunk_origin, CPPARITY_CHUNK_ORIGIN_DOCUMENT);
    cr_assert(model->tie_word_embeddings);
    cpparity_suite_free(&suite);
    /* a key outside the table is refused with the table's keys listed */
    const char bad[] = "cases:\n"
                       "  - name: extra\n"
                       "    model: {vocab_size: 11, max_position_embeddings: 64}\n"
                       "    seq_len: 8\n"
                       "    rows: [{documents: [8]}]\n"
                       "    cp: [1]\n";
    cr_assert_eq(cpparity_suite_load_text(bad, strlen(bad), "bad.yaml", &suite, &error),
                 CPPARITY_ERROR_INPUT);
    cr_assert(strstr(error.message, "bad.yaml:3:") != NULL &&
                  strstr(error.message, "max_position_embeddings") != NULL &&
                  strstr(error.message, "tie_word_embeddings") != NULL,
              "%s", error.message);
}

Test(names, lookups_and_joins) {
    const char *const names[] = {"a", "bb", "c"};
    cr_assert_str_eq(cpparity_name_of(names, 3, 1), "bb");
    cr_assert_str_eq(cpparity_name_of(names, 3, 3), "unknown");
    cr_assert_str_eq(cpparity_name_of(names, 3, -1), "unknown");
    cr_assert_eq(cpparity_name_index(names, 3, "c"), 2);
    cr_assert_eq(cpparity_name_index(names, 3, "d"), -1);
    cr_assert_eq(cpparity_name_index(names, 3, NULL), -1);
    char joined[32];
    cpparity_names_join(names, 3, ", ", " or ", joined, sizeof joined);
    cr_assert_str_eq(joined, "a, bb or c");
    cpparity_names_join(names, 3, "|", "|", joined, 5);
    cr_assert_str_eq(joined, "a|bb", "truncated to the buffer");
}
