/* case_sweep.c — a case's `sweep`: the family of cases at tile edges (see case_sweep.h). */
#include "harness/suite/case_sweep.h"

#include <stdlib.h>
#include <string.h>

#include "common/names.h"

const char *const case_sweep_quantity_names[CASE_SWEEP_QUANTITY_COUNT] = {"window", "chunk",
                                                                          "document", "padding"};

static const char *const sweep_keys[] = {"tiles", "multiples", "residues", "gqa_groups", "vary"};
#define SWEEP_KEY_COUNT (sizeof sweep_keys / sizeof *sweep_keys)
#define KEY_PATH_CAPACITY 64

static int compare_integers(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A list of 1 … capacity integers >= minimum (at most maximum) under sweep.key into values. */
static cpparity_status read_integers(yaml_source *source, const yaml_node_t *node,
                                     const char *scope, const char *key, int64_t minimum,
                                     int64_t maximum, int capacity, int64_t *values,
                                     const yaml_node_t **nodes, int *count) {
    char key_path[KEY_PATH_CAPACITY];
    yaml_source_format(key_path, sizeof key_path, "sweep.%s", key);
    cpparity_status status =
        yaml_source_check_sequence(source, node, scope, key_path, "integers", true);
    if (status != CPPARITY_OK) {
        return status;
    }
    const int64_t length = yaml_source_length(node);
    if (length > capacity) {
        return yaml_source_fail(source, yaml_source_item(source, node, capacity), scope, key_path,
                                "at most %d entries", capacity);
    }
    for (int64_t i = 0; i < length; i++) {
        char item_path[KEY_PATH_CAPACITY];
        yaml_source_format(item_path, sizeof item_path, "%s[%lld]", key_path, (long long)i);
        const yaml_node_t *item = yaml_source_item(source, node, i);
        status = yaml_source_read_integer(source, item, scope, item_path, minimum, &values[i]);
        if (status == CPPARITY_OK && values[i] > maximum) {
            status = yaml_source_fail(source, item, scope, item_path, "must be <= %lld, got %lld",
                                      (long long)maximum, (long long)values[i]);
        }
        for (int64_t j = 0; status == CPPARITY_OK && j < i; j++) {
            if (values[j] == values[i]) {
                status = yaml_source_fail(source, item, scope, item_path,
                                          "duplicate %lld (also %s[%lld])", (long long)values[i],
                                          key_path, (long long)j);
            }
        }
        if (status != CPPARITY_OK) {
            return status;
        }
        if (nodes != NULL) {
            nodes[i] = item;
        }
    }
    *count = (int)length;
    return CPPARITY_OK;
}

/* sweep.key, when written, into *value: an integer from minimum to 64 (*value keeps its default
 * otherwise). */
static cpparity_status read_bounded(yaml_source *source, const yaml_node_t *node, const char *scope,
                                    const char *key, int64_t minimum, int64_t *value) {
    const yaml_node_t *written = yaml_source_value(source, node, key, NULL);
    if (written == NULL) {
        return CPPARITY_OK;
    }
    char key_path[KEY_PATH_CAPACITY];
    yaml_source_format(key_path, sizeof key_path, "sweep.%s", key);
    cpparity_status status =
        yaml_source_read_integer(source, written, scope, key_path, minimum, value);
    if (status == CPPARITY_OK && *value > 64) {
        status = yaml_source_fail(source, written, scope, key_path, "must be <= 64, got %lld",
                                  (long long)*value);
    }
    return status;
}

/* The edges: m × tile + r for every tile, m in 1 … multiples and r in −residues … +residues, the
 * positive ones, sorted and distinct. */
static cpparity_status gather_edges(yaml_source *source, const char *scope, case_sweep *sweep) {
    int64_t count = 0;
    for (int t = 0; t < sweep->tile_count; t++) {
        for (int64_t m = 1; m <= sweep->multiples; m++) {
            for (int64_t r = -sweep->residues; r <= sweep->residues; r++) {
                const int64_t edge = m * sweep->tiles[t] + r;
                if (edge < 1) {
                    continue;
                }
                if (count == CASE_SWEEP_MAX_EDGES) {
                    return yaml_source_fail(source, sweep->node, scope, "sweep",
                                            "generates more than %d edges (fewer tiles, "
                                            "multiples or residues)",
                                            CASE_SWEEP_MAX_EDGES);
                }
                sweep->edges[count++] = edge;
            }
        }
    }
    qsort(sweep->edges, (size_t)count, sizeof *sweep->edges, compare_integers);
    int64_t distinct = 0;
    for (int64_t i = 0; i < count; i++) {
        if (distinct == 0 || sweep->edges[distinct - 1] != sweep->edges[i]) {
            sweep->edges[distinct++] = sweep->edges[i];
        }
    }
    sweep->edge_count = distinct;
    if (distinct == 0) {
        return yaml_source_fail(source, sweep->node, scope, "sweep", "generates no edge >= 1");
    }
    return CPPARITY_OK;
}

cpparity_status case_sweep_read(yaml_source *source, const yaml_node_t *node, const char *scope,
                                case_sweep *sweep) {
    memset(sweep, 0, sizeof *sweep);
    sweep->node = node;
    sweep->multiples = 1;
    sweep->residues = 2;
    for (int q = 0; q < CASE_SWEEP_QUANTITY_COUNT; q++) {
        sweep->vary[q] = true;
    }
    cpparity_status status =
        yaml_source_check_mapping(source, node, scope, "sweep", sweep_keys, SWEEP_KEY_COUNT);
    if (status != CPPARITY_OK) {
        return status;
    }
    const yaml_node_t *tiles = yaml_source_value(source, node, "tiles", NULL);
    if (tiles == NULL) {
        return yaml_source_fail(source, node, scope, "sweep.tiles",
                                "missing (the tile sizes whose edges are swept, e.g. [16, 32, 64, "
                                "128])");
    }
    /* 2^20 keeps every generated length far from overflow */
    status = read_integers(source, tiles, scope, "tiles", 1, (int64_t)1 << 20, CASE_SWEEP_MAX_TILES,
                           sweep->tiles, NULL, &sweep->tile_count);
    if (status == CPPARITY_OK) {
        status = read_bounded(source, node, scope, "multiples", 1, &sweep->multiples);
    }
    if (status == CPPARITY_OK) {
        status = read_bounded(source, node, scope, "residues", 0, &sweep->residues);
    }
    const yaml_node_t *groups = yaml_source_value(source, node, "gqa_groups", NULL);
    if (status == CPPARITY_OK && groups != NULL) {
        status = read_integers(source, groups, scope, "gqa_groups", 1, 1024, CASE_SWEEP_MAX_GROUPS,
                               sweep->groups, sweep->group_nodes, &sweep->group_count);
    }
    const yaml_node_t *vary = yaml_source_value(source, node, "vary", NULL);
    if (status == CPPARITY_OK && vary != NULL) {
        status = yaml_source_check_sequence(source, vary, scope, "sweep.vary", "quantities", true);
        for (int q = 0; q < CASE_SWEEP_QUANTITY_COUNT; q++) {
            sweep->vary[q] = false;
        }
        for (int64_t i = 0; status == CPPARITY_OK && i < yaml_source_length(vary); i++) {
            char item_path[KEY_PATH_CAPACITY];
            yaml_source_format(item_path, sizeof item_path, "sweep.vary[%lld]", (long long)i);
            int index = 0;
            const yaml_node_t *item = yaml_source_item(source, vary, i);
            status =
                yaml_source_read_name(source, item, scope, item_path, case_sweep_quantity_names,
                                      CASE_SWEEP_QUANTITY_COUNT, "quantity", &index);
            if (status == CPPARITY_OK && sweep->vary[index]) {
                status = yaml_source_fail(source, item, scope, item_path, "duplicate quantity '%s'",
                                          case_sweep_quantity_names[index]);
            }
            sweep->vary[index] = true;
        }
    }
    if (status != CPPARITY_OK) {
        return status;
    }
    for (int t = 0; t < sweep->tile_count; t++) {
        sweep->largest_tile =
            sweep->tiles[t] > sweep->largest_tile ? sweep->tiles[t] : sweep->largest_tile;
    }
    status = gather_edges(source, scope, sweep);
    if (status == CPPARITY_OK && case_sweep_members(sweep) > CASE_SWEEP_MAX_MEMBERS) {
        status =
            yaml_source_fail(source, node, scope, "sweep", "generates %lld cases, more than %d",
                             (long long)case_sweep_members(sweep), CASE_SWEEP_MAX_MEMBERS);
    }
    return status;
}

int64_t case_sweep_members(const case_sweep *sweep) {
    return sweep->edge_count * (sweep->group_count > 0 ? sweep->group_count : 1);
}

/* One row of document_count documents of the given lengths after left_padding tokens; false when
 * out of memory. */
static bool set_row(cpparity_row_layout *row, int64_t left_padding, int64_t first, int64_t second) {
    memset(row, 0, sizeof *row);
    row->left_padding = left_padding;
    row->document_count = second > 0 ? 2 : 1;
    row->document_lengths = calloc((size_t)row->document_count, sizeof *row->document_lengths);
    if (row->document_lengths == NULL) {
        return false;
    }
    row->document_lengths[0] = first;
    if (second > 0) {
        row->document_lengths[1] = second;
    }
    return true;
}

/* Marks the model field called name as set by the node of the sweep. */
static void set_model_field(case_settings *settings, const char *name, const yaml_node_t *node) {
    for (int f = 0; f < CPPARITY_MODEL_FIELD_COUNT; f++) {
        if (strcmp(cpparity_model_fields[f].name, name) == 0) {
            settings->model.values[f] = node;
        }
    }
}

cpparity_status case_sweep_member(case_reader *reader, const case_sweep *sweep, const char *scope,
                                  int64_t member, int64_t heads, const char *base, char *name,
                                  size_t capacity, case_settings *settings) {
    yaml_source *source = reader->source;
    const int64_t edge = sweep->edges[member % sweep->edge_count];
    const int group_index = (int)(member / sweep->edge_count);
    const int64_t S = edge + sweep->largest_tile; /* one largest tile past the edge */
    const int written = sweep->group_count > 0
                            ? snprintf(name, capacity, "%s.%lld.g%lld", base, (long long)edge,
                                       (long long)sweep->groups[group_index])
                            : snprintf(name, capacity, "%s.%lld", base, (long long)edge);
    if (written < 0 || (size_t)written >= capacity) {
        return yaml_source_fail(source, sweep->node, scope, "sweep",
                                "the generated case name '%s…' is longer than %zu characters", base,
                                capacity - 1);
    }
    /* rows: the whole sequence one document; a document boundary at the edge; padding to it */
    cpparity_row_layout rows[3];
    int64_t row_count = 0;
    bool ok = set_row(&rows[row_count++], 0, S, 0);
    if (ok && sweep->vary[CASE_SWEEP_DOCUMENT]) {
        ok = set_row(&rows[row_count++], 0, edge, S - edge);
    }
    if (ok && sweep->vary[CASE_SWEEP_PADDING]) {
        /* positions counting through the padding: only key padding masks it, not documents */
        ok = set_row(&rows[row_count++], edge, S - edge, 0);
        rows[row_count - 1].padding_continues = true;
    }
    int64_t entries = 0;
    for (int64_t r = 0; r < row_count; r++) {
        entries += 1 + rows[r].document_count;
    }
    if (!ok || !case_reader_take_rows(reader, entries)) {
        for (int64_t r = 0; r < row_count; r++) {
            free(rows[r].document_lengths);
        }
        return ok ? yaml_source_fail(source, sweep->node, scope, "sweep",
                                     "the suite holds more than %lld rows and document lengths "
                                     "(cases/README.md, Limits)",
                                     (long long)CASE_MAX_ROW_ENTRIES)
                  : yaml_source_out_of_memory(source);
    }
    settings->values.rows = calloc((size_t)row_count, sizeof *settings->values.rows);
    if (settings->values.rows == NULL) {
        for (int64_t r = 0; r < row_count; r++) {
            free(rows[r].document_lengths);
        }
        return yaml_source_out_of_memory(source);
    }
    memcpy(settings->values.rows, rows, (size_t)row_count * sizeof *rows);
    settings->values.batch_size = row_count;
    settings->values.seq_len = S;
    settings->nodes[CASE_KEY_ROWS] = sweep->node;
    settings->nodes[CASE_KEY_SEQ_LEN] = sweep->node;
    /* layers: full where a boundary is swept (or nothing else is), sliding, chunked */
    cpparity_model_config *config = &settings->model.config;
    int64_t layers = 0;
    if (sweep->vary[CASE_SWEEP_DOCUMENT] || sweep->vary[CASE_SWEEP_PADDING] ||
        (!sweep->vary[CASE_SWEEP_WINDOW] && !sweep->vary[CASE_SWEEP_CHUNK])) {
        config->layer_types[layers++] = CPPARITY_LAYER_FULL;
    }
    if (sweep->vary[CASE_SWEEP_WINDOW]) {
        config->layer_types[layers++] = CPPARITY_LAYER_SLIDING;
        config->sliding_window = edge;
        set_model_field(settings, "sliding_window", sweep->node);
    }
    if (sweep->vary[CASE_SWEEP_CHUNK]) {
        config->layer_types[layers++] = CPPARITY_LAYER_CHUNKED;
        config->attention_chunk_size = edge;
        set_model_field(settings, "attention_chunk_size", sweep->node);
    }
    settings->model.layer_count = layers;
    config->num_hidden_layers = layers;
    set_model_field(settings, "layer_types", sweep->node);
    set_model_field(settings, "num_hidden_layers", sweep->node);
    if (sweep->group_count > 0 && heads > 0) {
        const int64_t group = sweep->groups[group_index];
        if (heads % group != 0) {
            char item_path[KEY_PATH_CAPACITY];
            yaml_source_format(item_path, sizeof item_path, "sweep.gqa_groups[%d]", group_index);
            return yaml_source_fail(source, sweep->group_nodes[group_index], scope, item_path,
                                    "group %lld does not divide num_attention_heads (%lld)",
                                    (long long)group, (long long)heads);
        }
        config->num_key_value_heads = heads / group;
        set_model_field(settings, "num_key_value_heads", sweep->node);
    }
    return CPPARITY_OK;
}
