/* html_report_charts.c — the JSON data of an HTML report's plots (see html_report_page.h); the
 * points of the error-against-limit plots are the tensor data's (html_report_tensors.c). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/html_escape.h"
#include "reports/html_report_page.h"

/* Positions of one item's profile drawn at most: longer sequences are shown in bins of several
 * positions, each the largest error among them, so a step or a spike is never averaged away. */
#define PROFILE_POINTS 4096

static const char layer_prefix[] = "grads/model.layers.";

deciding_limit html_tensor_deciding(const metrics_row *row) {
    return results_deciding_limit(row->relative_l2, row->limit, row->cp1_limit);
}

static const read_item *item_at(const html_page *page, const html_case *c, int64_t i) {
    return &page->run->items[c->items[i]];
}

bool html_case_has_tensors(const html_page *page, const html_case *c) {
    for (int64_t i = 0; i < c->item_count; i++) {
        if (item_at(page, c, i)->tensor_count > 0) {
            return true;
        }
    }
    return false;
}

bool html_case_has_profiles(const html_page *page, const html_case *c) {
    for (int64_t i = 0; i < c->item_count; i++) {
        if (item_at(page, c, i)->profile_count > 0) {
            return true;
        }
    }
    return false;
}

bool html_case_has_gradients(const html_page *page, const html_case *c) {
    for (int64_t i = 0; i < c->item_count; i++) {
        const read_item *item = item_at(page, c, i);
        for (int64_t t = 0; t < item->tensor_count; t++) {
            if (strcmp(item->tensors[t].kind, "grads") == 0) {
                return true;
            }
        }
    }
    return false;
}

/* A measured value: a number (3 significant digits), or the string "nonfinite" (the page plots
 * it above the rest). */
static void put_measure(FILE *out, double value) {
    if (isfinite(value)) {
        html_put_short_number(out, value);
    } else {
        fputs("\"nonfinite\"", out);
    }
}

/* A number of a profile (3 significant digits), null when not finite: a gap in the line. */
static void put_profile_number(FILE *out, double value) {
    if (isfinite(value)) {
        html_put_short_number(out, value);
    } else {
        fputs("null", out);
    }
}

/* "f32 cp 4 (FAIL)", "bf16 cp 2 zigzag (PASS)": an item's name in a legend; a layout other
 * than contiguous is named. */
static void put_item_label(FILE *out, const read_item *item) {
    char label[128], variant[48];
    const bool named = item->token_layout[0] != '\0' && strcmp(item->token_layout, "contiguous");
    /* a run item names its algorithm too when it is not Ulysses ("f32 cp 4 zigzag ring") */
    results_variant_name(item->token_layout, item->algorithm, variant, sizeof variant);
    snprintf(label, sizeof label, "%s cp %" PRId64 "%s%s (%s)", item->dtype, item->cp,
             named || variant[0] != '\0' ? " " : "",
             variant[0] != '\0' ? variant
             : named            ? item->token_layout
                                : "",
             item->outcome);
    json_put_string(out, label);
}

/* "grads/model.layers.3.mlp.up_proj.weight@rank1": a tensor of a row, for tooltips. */
static void put_tensor_label(FILE *out, const metrics_row *row) {
    char label[CPPARITY_RECORD_NAME + 32];
    snprintf(label, sizeof label, "%s@rank%d", row->tensor, (int)row->rank);
    json_put_string(out, label);
}

/* True when an item of case name compared tensors in one of the runs. */
static bool compared_in_any_run(const html_report_input *input, const char *name) {
    for (int64_t r = 0; r < input->run_count; r++) {
        for (int64_t i = 0; i < input->runs[r]->item_count; i++) {
            const read_item *item = &input->runs[r]->items[i];
            if (item->tensor_count > 0 && strcmp(item->case_name, name) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* The trend: per case of any run (the reported run's first), its worst ratio in each run: the
 * largest over its items that ran; null where it did not run. */
static void put_trend(FILE *out, const html_page *page) {
    const html_report_input *input = page->input;
    fputs("\"labels\":[", out);
    for (int64_t r = 0; r < input->run_count; r++) {
        const read_results *run = input->runs[r];
        char label[96];
        snprintf(label, sizeof label, "%s%s", run->provenance.start_time,
                 r == input->run_count - 1 ? " (this run)" : "");
        fputs(r > 0 ? "," : "", out);
        json_put_string(out, label);
    }
    fputs("],\"files\":[", out);
    for (int64_t r = 0; r < input->run_count; r++) {
        fputs(r > 0 ? "," : "", out);
        json_put_string(out, input->runs[r]->path);
    }
    fputs("],\"series\":[", out);
    bool first_series = true;
    /* Runs from the newest back, so the reported run's cases come first. */
    for (int64_t owner = input->run_count - 1; owner >= 0; owner--) {
        const read_results *source = input->runs[owner];
        for (int64_t i = 0; i < source->item_count; i++) {
            const char *name = source->items[i].case_name;
            bool seen = false; /* named by an earlier item or a newer run */
            for (int64_t j = 0; j < i && !seen; j++) {
                seen = strcmp(source->items[j].case_name, name) == 0;
            }
            for (int64_t newer = owner + 1; newer < input->run_count && !seen; newer++) {
                for (int64_t j = 0; j < input->runs[newer]->item_count && !seen; j++) {
                    seen = strcmp(input->runs[newer]->items[j].case_name, name) == 0;
                }
            }
            if (seen || !compared_in_any_run(input, name)) {
                continue; /* listed once; a case that never compared anything has no line */
            }
            fputs(first_series ? "{\"name\":" : ",{\"name\":", out);
            first_series = false;
            json_put_string(out, name);
            fputs(",\"values\":[", out);
            for (int64_t r = 0; r < input->run_count; r++) {
                const read_results *run = input->runs[r];
                bool ran = false;
                double worst = 0.0;
                for (int64_t j = 0; j < run->item_count; j++) {
                    const read_item *item = &run->items[j];
                    if (strcmp(item->case_name, name) != 0 || item->tensor_count == 0) {
                        continue;
                    }
                    ran = true;
                    worst = isnan(item->worst_ratio) || item->worst_ratio > worst
                                ? item->worst_ratio
                                : worst;
                }
                fputs(r > 0 ? "," : "", out);
                if (ran) {
                    put_measure(out, worst);
                } else {
                    fputs("null", out);
                }
            }
            fputs("]}", out);
        }
    }
    fputs("]", out);
}

/* Error against limit: one series per item, a point per tensor and rank, which the page's script
 * takes from the item's rows of the tensor data ("item": its index in the run). */
static void put_limits(FILE *out, const html_page *page, const html_case *c) {
    fputs("\"series\":[", out);
    bool first_series = true;
    for (int64_t i = 0; i < c->item_count; i++) {
        const read_item *item = item_at(page, c, i);
        if (item->tensor_count == 0) {
            continue;
        }
        fputs(first_series ? "{\"name\":" : ",{\"name\":", out);
        first_series = false;
        put_item_label(out, item);
        fprintf(out, ",\"item\":%" PRId64 "}", c->items[i]);
    }
    fputs("]", out);
}

/* The logits tensor of an item at rank, or NULL. */
static const metrics_row *logits_row(const read_item *item, int rank) {
    for (int64_t t = 0; t < item->tensor_count; t++) {
        if (strcmp(item->tensors[t].tensor, "logits") == 0 && item->tensors[t].rank == rank) {
            return &item->tensors[t];
        }
    }
    return NULL;
}

/* The global position of entry k of a profile; rows_before places a profile from an older file
 * whose rows are not consecutive and whose positions were not recorded (after the ranks before
 * it, in its own order). */
static int64_t profile_position(const read_profile *profile, int64_t k, int64_t rows_before) {
    if (profile->positions != NULL) {
        return profile->positions[k];
    }
    return (profile->position_offset >= 0 ? profile->position_offset : rows_before) + k;
}

/* Runs of consecutive positions of a profile, in its entry order: one for a contiguous slice,
 * two per rank for zigzag, one per chunk for round-robin. */
static int64_t profile_runs(const read_profile *profile) {
    int64_t runs = profile->length > 0 ? 1 : 0;
    for (int64_t k = 1; profile->positions != NULL && k < profile->length; k++) {
        runs += profile->positions[k] != profile->positions[k - 1] + 1;
    }
    return runs;
}

/* The entry of error[from, to) with the largest non-NaN value (the first of equals), −1 when
 * there is none. */
static int64_t largest_entry(const double *error, int64_t from, int64_t to) {
    int64_t at = -1;
    for (int64_t k = from; k < to; k++) {
        at = !isnan(error[k]) && (at < 0 || error[k] > error[at]) ? k : at;
    }
    return at;
}

/* The largest non-NaN value of error[from, to), NaN when there is none. */
static double largest_error(const double *error, int64_t from, int64_t to) {
    const int64_t at = largest_entry(error, from, to);
    return at >= 0 ? error[at] : NAN;
}

/* The limit of the entry with the largest non-NaN error of [from, to) (the per-position rule
 * holds that entry to it), NaN when there is none. */
static double limit_of_largest(const double *error, const double *limit, int64_t from, int64_t to) {
    const int64_t at = largest_entry(error, from, to);
    return at >= 0 ? limit[at] : NAN;
}

/* A run's "limits" (after its "error"): per bin, the own limit of the position whose error the
 * bin shows; nothing when the profile has no per-position limits (older files). */
static void put_profile_limits(FILE *out, const read_profile *profile, int64_t start, int64_t end,
                               int64_t bin) {
    if (profile->limit == NULL) {
        return;
    }
    fputs(",\"limits\":[", out);
    for (int64_t from = start; from < end; from += bin) {
        fputs(from > start ? "," : "", out);
        put_profile_number(out, limit_of_largest(profile->error, profile->limit, from,
                                                 from + bin < end ? from + bin : end));
    }
    fputs("]", out);
}

/* One entry of "ranks": a run of positions [offset, offset + length) of one rank, its error in
 * bins of bin positions. */
static void put_profile_run(FILE *out, bool first, int rank, int64_t offset, int64_t length,
                            int64_t bin, double limit) {
    fprintf(out,
            "%s{\"rank\":%d,\"offset\":%" PRId64 ",\"length\":%" PRId64 ",\"bin\":%" PRId64
            ",\"limit\":",
            first ? "" : ",", rank, offset, length, bin);
    put_profile_number(out, limit);
    fputs(",\"error\":[", out);
}

/* One item's profiles at their global positions, binned to at most about PROFILE_POINTS points
 * in all. Each run of consecutive positions of a rank is one entry of "ranks" (a contiguous
 * layout: one per rank). Ranks cut into more runs than PROFILE_RUNS in all (round-robin with
 * small chunks) are drawn instead over the whole padded sequence, each bin the largest error of
 * the rank's positions in it (null where it holds none). */
#define PROFILE_RUNS 512
static void put_profile_item(FILE *out, const read_item *item) {
    int64_t total = 0, runs = 0;
    for (int64_t p = 0; p < item->profile_count; p++) {
        total += item->profiles[p].length;
        runs += profile_runs(&item->profiles[p]);
    }
    const int64_t padded = item->padded_seq_len > 0 ? item->padded_seq_len : total;
    const int64_t bin = total > PROFILE_POINTS ? (total + PROFILE_POINTS - 1) / PROFILE_POINTS : 1;
    fputs("{\"name\":", out);
    put_item_label(out, item);
    fprintf(out, ",\"padded\":%" PRId64 ",\"bin\":%" PRId64 ",\"layout\":", padded, bin);
    json_put_string(out, item->token_layout);
    fputs(",\"ranks\":[", out);
    bool first = true;
    int64_t rows_before = 0; /* rows of the ranks drawn so far */
    for (int64_t p = 0; p < item->profile_count; p++) {
        const read_profile *profile = &item->profiles[p];
        const metrics_row *row = logits_row(item, profile->rank);
        const double limit = row != NULL ? html_tensor_deciding(row).limit : NAN;
        if (runs > PROFILE_RUNS && profile->positions != NULL) {
            const int64_t count = item->profile_count;
            const int64_t wide = padded * count > PROFILE_POINTS
                                     ? (padded * count + PROFILE_POINTS - 1) / PROFILE_POINTS
                                     : 1;
            const int64_t bins = (padded + wide - 1) / wide;
            double *binned = malloc((size_t)(bins > 0 ? bins : 1) * 2 * sizeof *binned);
            if (binned == NULL) {
                continue; /* the rank is left out of the plot rather than the report */
            }
            double *binned_limit = binned + (bins > 0 ? bins : 1); /* each bin's error's own */
            for (int64_t b = 0; b < bins; b++) {
                binned[b] = binned_limit[b] = NAN;
            }
            for (int64_t k = 0; k < profile->length; k++) {
                const int64_t b = profile->positions[k] / wide;
                const double value = profile->error[k];
                if (b >= 0 && b < bins && !isnan(value) &&
                    (isnan(binned[b]) || value > binned[b])) {
                    binned[b] = value;
                    binned_limit[b] = profile->limit != NULL ? profile->limit[k] : NAN;
                }
            }
            put_profile_run(out, first, profile->rank, 0, padded, wide, limit);
            for (int64_t b = 0; b < bins; b++) {
                fputs(b > 0 ? "," : "", out);
                put_profile_number(out, binned[b]);
            }
            fputs("]", out);
            if (profile->limit != NULL) {
                fputs(",\"limits\":[", out);
                for (int64_t b = 0; b < bins; b++) {
                    fputs(b > 0 ? "," : "", out);
                    put_profile_number(out, binned_limit[b]);
                }
                fputs("]", out);
            }
            fputs("}", out);
            free(binned);
            first = false;
            rows_before += profile->length;
            continue;
        }
        for (int64_t start = 0; start < profile->length;) {
            int64_t end = profile->positions != NULL ? start + 1 : profile->length;
            while (profile->positions != NULL && end < profile->length &&
                   profile->positions[end] == profile->positions[end - 1] + 1) {
                end++;
            }
            put_profile_run(out, first, profile->rank,
                            profile_position(profile, start, rows_before), end - start, bin, limit);
            for (int64_t from = start; from < end; from += bin) {
                fputs(from > start ? "," : "", out);
                put_profile_number(
                    out, largest_error(profile->error, from, from + bin < end ? from + bin : end));
            }
            fputs("]", out);
            put_profile_limits(out, profile, start, end, bin);
            fputs("}", out);
            first = false;
            start = end;
        }
        rows_before += profile->length;
    }
    fputs("]}", out);
}

/* Padding interval k (0 left, 1 right) of row b as [*start, *end); false when empty. */
static bool row_padding(const read_case *layout, int64_t b, int k, int64_t *start, int64_t *end) {
    const int64_t *row = &layout->rows[3 * b];
    *start = k == 0 ? 0 : layout->seq_len - row[2];
    *end = k == 0 ? row[0] : layout->seq_len;
    return *end > *start;
}

/* Padding of every row as [start, end) positions, merged where they overlap or touch, and the
 * start positions of every document that follows another in its row. */
static void put_layout(FILE *out, const read_case *layout) {
    fputs("\"padding\":[", out);
    bool first = true;
    int64_t position = 0; /* every padding before it is written */
    while (layout != NULL) {
        int64_t start = -1, end = -1, lo, hi;
        for (int64_t b = 0; b < layout->batch_size; b++) { /* the next interval past position */
            for (int k = 0; k < 2; k++) {
                if (row_padding(layout, b, k, &lo, &hi) && hi > position) {
                    lo = lo > position ? lo : position;
                    if (start < 0 || lo < start) {
                        start = lo;
                        end = hi;
                    }
                }
            }
        }
        if (start < 0) {
            break;
        }
        for (bool grown = true; grown;) { /* extended over what overlaps or touches it */
            grown = false;
            for (int64_t b = 0; b < layout->batch_size; b++) {
                for (int k = 0; k < 2; k++) {
                    if (row_padding(layout, b, k, &lo, &hi) && lo <= end && hi > end) {
                        end = hi;
                        grown = true;
                    }
                }
            }
        }
        fprintf(out, "%s[%" PRId64 ",%" PRId64 "]", first ? "" : ",", start, end);
        first = false;
        position = end;
    }
    fputs("],\"documents\":[", out);
    first = true;
    for (int64_t document = 0, b = 0; layout != NULL && b < layout->batch_size; b++) {
        const int64_t *row = &layout->rows[3 * b];
        int64_t start = row[0];
        for (int64_t d = 0; d < row[1] && document < layout->document_count; d++, document++) {
            if (d > 0) {
                fprintf(out, "%s%" PRId64, first ? "" : ",", start);
                first = false;
            }
            start += layout->document_lengths[document];
        }
    }
    fprintf(out, "],\"seq_len\":%" PRId64, layout != NULL ? layout->seq_len : 0);
}

/* a > b for worst ratios, NaN (a non-finite error) above everything. */
static bool ratio_above(double a, double b) {
    return isnan(a) ? !isnan(b) : !isnan(b) && a > b;
}

/* The logits error along the sequence: every item with profiles; the one shown first is the
 * worst item at cp > 1 (where sharding can go wrong), else the first. */
static void put_profile(FILE *out, const html_page *page, const html_case *c) {
    fputs("\"items\":[", out);
    int64_t shown = 0, initial = -1;
    const read_item *initial_item = NULL;
    for (int64_t i = 0; i < c->item_count; i++) {
        const read_item *item = item_at(page, c, i);
        if (item->profile_count == 0) {
            continue;
        }
        if (initial_item == NULL ||
            (item->cp > 1 && (initial_item->cp == 1 ||
                              ratio_above(item->worst_ratio, initial_item->worst_ratio)))) {
            initial = shown;
            initial_item = item;
        }
        fputs(shown > 0 ? "," : "", out);
        put_profile_item(out, item);
        shown++;
    }
    fprintf(out, "],\"initial\":%" PRId64 ",", initial < 0 ? 0 : initial);
    put_layout(out, c->layout);
}

/* The layer a gradient belongs to (N of grads/model.layers.N.*), or -1. */
static long layer_of(const char *tensor) {
    if (strncmp(tensor, layer_prefix, sizeof layer_prefix - 1) != 0) {
        return -1;
    }
    char *end = NULL;
    const long layer = strtol(tensor + sizeof layer_prefix - 1, &end, 10);
    return end != tensor + sizeof layer_prefix - 1 && *end == '.' && layer >= 0 ? layer : -1;
}

/* The category of a gradient outside the layers: its name after "grads/". */
static const char *other_name(const char *tensor) {
    return strncmp(tensor, "grads/", 6) == 0 ? tensor + 6 : tensor;
}

/* True when the gradient of items[i].tensors[t] is the first of its name outside the layers
 * among the case's items (so each such category is listed once). */
static bool first_other(const html_page *page, const html_case *c, int64_t i, int64_t t) {
    const char *name = item_at(page, c, i)->tensors[t].tensor;
    for (int64_t j = 0; j <= i; j++) {
        const read_item *item = item_at(page, c, j);
        const int64_t until = j == i ? t : item->tensor_count;
        for (int64_t u = 0; u < until; u++) {
            if (strcmp(item->tensors[u].tensor, name) == 0) {
                return false;
            }
        }
    }
    return true;
}

/* Visits the categories of the layers chart in order: layers 0..top, then the other gradients
 * in first-seen order. visit(category layer or -1, other tensor name or NULL). */
typedef void (*category_visit)(FILE *out, const html_page *page, const html_case *c, long layer,
                               const char *other, const read_item *item, bool first);

static void each_category(FILE *out, const html_page *page, const html_case *c,
                          const read_item *item, category_visit visit) {
    long top = -1;
    for (int64_t i = 0; i < c->item_count; i++) {
        const read_item *candidate = item_at(page, c, i);
        for (int64_t t = 0; t < candidate->tensor_count; t++) {
            const long layer = layer_of(candidate->tensors[t].tensor);
            top = layer > top ? layer : top;
        }
    }
    bool first = true;
    for (long layer = 0; layer <= top; layer++, first = false) {
        visit(out, page, c, layer, NULL, item, first);
    }
    for (int64_t i = 0; i < c->item_count; i++) {
        const read_item *candidate = item_at(page, c, i);
        for (int64_t t = 0; t < candidate->tensor_count; t++) {
            const char *tensor = candidate->tensors[t].tensor;
            if (strcmp(candidate->tensors[t].kind, "grads") == 0 && layer_of(tensor) < 0 &&
                first_other(page, c, i, t)) {
                visit(out, page, c, -1, tensor, item, first);
                first = false;
            }
        }
    }
}

static void put_category_label(FILE *out, const html_page *page, const html_case *c, long layer,
                               const char *other, const read_item *item, bool first) {
    (void)page, (void)c, (void)item;
    fputs(first ? "" : ",", out);
    if (layer >= 0) {
        fprintf(out, "\"layer %ld\"", layer);
    } else {
        json_put_string(out, other_name(other));
    }
}

/* The worst tensor of item in a category (largest ratio over its tensors and ranks). */
static const metrics_row *category_worst(const read_item *item, long layer, const char *other) {
    const metrics_row *worst = NULL;
    for (int64_t t = 0; t < item->tensor_count; t++) {
        const metrics_row *row = &item->tensors[t];
        const bool member =
            strcmp(row->kind, "grads") == 0 &&
            (layer >= 0 ? layer_of(row->tensor) == layer : strcmp(row->tensor, other) == 0);
        if (member && (worst == NULL || isnan(html_tensor_deciding(row).ratio) ||
                       html_tensor_deciding(row).ratio > html_tensor_deciding(worst).ratio)) {
            worst = row;
        }
    }
    return worst;
}

static void put_category_value(FILE *out, const html_page *page, const html_case *c, long layer,
                               const char *other, const read_item *item, bool first) {
    (void)page, (void)c;
    const metrics_row *worst = category_worst(item, layer, other);
    fputs(first ? "" : ",", out);
    if (worst == NULL) {
        fputs("null", out);
    } else {
        put_measure(out, html_tensor_deciding(worst).ratio);
    }
}

static void put_category_tensor(FILE *out, const html_page *page, const html_case *c, long layer,
                                const char *other, const read_item *item, bool first) {
    (void)page, (void)c;
    const metrics_row *worst = category_worst(item, layer, other);
    fputs(first ? "" : ",", out);
    if (worst == NULL) {
        fputs("null", out);
    } else {
        put_tensor_label(out, worst);
    }
}

/* Gradient error / limit per layer: one series per item. */
static void put_layers(FILE *out, const html_page *page, const html_case *c) {
    fputs("\"labels\":[", out);
    each_category(out, page, c, NULL, put_category_label);
    fputs("],\"series\":[", out);
    bool first_series = true;
    for (int64_t i = 0; i < c->item_count; i++) {
        const read_item *item = item_at(page, c, i);
        if (item->tensor_count == 0) {
            continue;
        }
        fputs(first_series ? "{\"name\":" : ",{\"name\":", out);
        first_series = false;
        put_item_label(out, item);
        fputs(",\"values\":[", out);
        each_category(out, page, c, item, put_category_value);
        fputs("],\"tensors\":[", out);
        each_category(out, page, c, item, put_category_tensor);
        fputs("]}", out);
    }
    fputs("]", out);
}

void html_put_chart_data(FILE *out, const html_page *page) {
    static const char *const kinds[] = {"trend", "limits", "profile", "layers"};
    fputs("\"charts\":[", out);
    for (int64_t k = 0; k < page->chart_count; k++) {
        const html_chart *chart = &page->charts[k];
        fprintf(out, "%s\n{\"canvas\":\"chart-%" PRId64 "\",\"kind\":\"%s\",", k > 0 ? "," : "", k,
                kinds[chart->kind]);
        const html_case *c = chart->case_index >= 0 ? &page->cases[chart->case_index] : NULL;
        if (c != NULL) {
            fputs("\"case\":", out);
            json_put_string(out, c->name);
            fputc(',', out);
        }
        switch (chart->kind) {
        case HTML_CHART_TREND:
            put_trend(out, page);
            break;
        case HTML_CHART_LIMITS:
            put_limits(out, page, c);
            break;
        case HTML_CHART_PROFILE:
            put_profile(out, page, c);
            break;
        case HTML_CHART_LAYERS:
            put_layers(out, page, c);
            break;
        }
        fputs("}", out);
    }
    fputs("\n]", out);
}
