/*
 * lm_head.c — the LM head and the loss in float64 without ever holding the logits whole (see
 * model_layers.h; docs/architecture.md, "Long context: row blocks").
 *
 * Forward, one row block at a time (at most CPPARITY_ROW_BLOCK × V held):
 *   logits = normed · lm_headᵀ     one dgemm per LINEAR_TILE output columns, over all D
 *   lse    = m + log Σ_v exp(logits[v] − m),  m = max_v logits[v]
 *   term   = lse − logits[label]  (labels ≠ −100; the loss is the sum of the terms / valid labels)
 * Backward, one vocabulary chunk [v0, v1) of LM_HEAD_CHUNK ids at a time (N × LM_HEAD_CHUNK held):
 *   logits[:, v0:v1] recomputed with the forward's very dgemm calls (same bits);
 *   dlogits = scale · exp(logits − lse), minus scale at the label (0 on ignored rows);
 *   dnormed (N, D)        += dlogits · lm_head[v0:v1]       one dgemm per (row block, D tile),
 *                                                           chunk after chunk in order
 *   dlm_head[v0:v1] (w, D) += dlogitsᵀ · normed              one dgemm per row block, added in
 *                                                           row-block order (as linear.c)
 * So the arithmetic depends on the row blocks and the chunk width, never on the thread count or
 * on how many ranks hold the row blocks (spread over ranks, each chunk of dlm_head is handed
 * from rank to rank in block order, the chunks pipelined: team.h). The logits of a row block can be
 * recomputed at any time from the normed hidden state (lm_head_logits_rows): bit for bit the
 * forward's.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "common/batch.h"
#include "exponential.h"
#include "model_layers.h"
#include "parallel.h"

/* Output columns per dgemm: linear.c's tile. */
enum { LINEAR_TILE = 256 };
_Static_assert(LM_HEAD_CHUNK % LINEAR_TILE == 0, "a chunk is whole column tiles");

static int64_t minimum(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* The logits tile of rows × columns [column, column + n) of the head: C (rows × n, leading
 * dimension ldc) = normed (rows × D) · lm_head[column : column + n]ᵀ. Every logits value the
 * reference computes comes from this call with the same arguments. */
static void logits_tile(double *result, int64_t ldc, const double *normed, const double *weight,
                        int64_t rows, int64_t hidden, int64_t column, int64_t n) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)hidden, 1.0,
                normed, (int)hidden, weight + column * hidden, (int)hidden, 0.0, result, (int)ldc);
}

/* --- logits rows --------------------------------------------------------------------------- */

typedef struct rows_work {
    double *out;
    const double *normed, *weight;
    int64_t rows, hidden, vocab;
} rows_work;

static void rows_item(void *context, int64_t item, void *scratch) {
    (void)scratch;
    const rows_work *w = context;
    const int64_t column = item * LINEAR_TILE;
    logits_tile(w->out + column, w->vocab, w->normed, w->weight, w->rows, w->hidden, column,
                minimum(LINEAR_TILE, w->vocab - column));
}

void lm_head_logits_rows(double *out, const double *normed, const double *weight, int64_t rows,
                         int64_t hidden, int64_t vocab) {
    if (rows <= 0 || vocab <= 0) {
        return;
    }
    rows_work work = {out, normed, weight, rows, hidden, vocab};
    const reference_parallel_work parallel = {(vocab + LINEAR_TILE - 1) / LINEAR_TILE, 0, rows_item,
                                              &work};
    (void)reference_parallel_run(&parallel, "the logits of a row block", NULL);
}

/* --- forward: lse and the loss terms -------------------------------------------------------- */

/* log Σ_v exp(row[v]) with the maximum subtracted first; scratch holds vocab doubles. */
static double log_sum_exp(const double *row, int64_t vocab, double *scratch) {
    double largest = row[0];
    for (int64_t v = 1; v < vocab; v++) {
        largest = row[v] > largest ? row[v] : largest;
    }
    for (int64_t v = 0; v < vocab; v++) {
        scratch[v] = row[v] - largest;
    }
    exponential_in_place(scratch, vocab);
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; v++) {
        sum += scratch[v];
    }
    return largest + log(sum);
}

typedef struct terms_work {
    const double *logits; /* (rows, V) of the block */
    const int64_t *labels;
    double *lse, *term; /* (rows) of the block */
    int64_t vocab;
} terms_work;

static void terms_item(void *context, int64_t item, void *scratch) {
    const terms_work *w = context;
    const double *row = w->logits + item * w->vocab;
    w->lse[item] = log_sum_exp(row, w->vocab, scratch);
    w->term[item] =
        w->labels[item] == CPPARITY_IGNORE_INDEX ? 0.0 : w->lse[item] - row[w->labels[item]];
}

cpparity_status lm_head_forward(double *lse, double *term, const double *normed,
                                const double *weight, const int64_t *labels,
                                const reference_rows *rows, int64_t hidden, int64_t vocab,
                                cpparity_error *error) {
    if (rows->first >= rows->end) {
        return CPPARITY_OK;
    }
    const int64_t widest = row_blocks_widest(&rows->blocks);
    double *logits = malloc((size_t)(widest * vocab + 1) * sizeof *logits);
    if (logits == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the logits of a row block: %lld x %lld)",
                                  (long long)widest, (long long)vocab);
    }
    const int64_t origin = row_blocks_at(&rows->blocks, rows->first).flat;
    cpparity_status status = CPPARITY_OK;
    for (int64_t b = rows->first; b < rows->end && status == CPPARITY_OK; b++) {
        const row_block block = row_blocks_at(&rows->blocks, b);
        const int64_t start = block.flat - origin, size = block.end - block.begin;
        lm_head_logits_rows(logits, normed + start * hidden, weight, size, hidden, vocab);
        terms_work work = {logits, labels + start, lse + start, term + start, vocab};
        const reference_parallel_work parallel = {size, (size_t)vocab * sizeof(double), terms_item,
                                                  &work};
        status = reference_parallel_run(&parallel, "the loss of a row block", error);
    }
    free(logits);
    return status;
}

/* --- backward, one vocabulary chunk at a time ------------------------------------------------ */

typedef struct chunk_work {
    const reference_rows *rows;
    int64_t origin;                /* flattened row of the first block */
    const double *normed, *weight; /* (N, D), (V, D) */
    const double *lse;             /* (N) */
    const int64_t *labels;         /* (N) */
    double *dnormed, *dweight;     /* (N, D), (V, D) */
    double *logits;                /* (N, width) this chunk's logits, then dlogits */
    int64_t hidden, vocab;
    double scale;
    int64_t v0, width;    /* the chunk: [v0, v0 + width) */
    int64_t column_tiles; /* ceil(width / LINEAR_TILE) */
    int64_t hidden_tiles; /* ceil(D / LINEAR_TILE) */
    int64_t blocks;       /* row blocks held */
} chunk_work;

static void block_of(const chunk_work *w, int64_t index, int64_t *start, int64_t *size) {
    const row_block block = row_blocks_at(&w->rows->blocks, w->rows->first + index);
    *start = block.flat - w->origin;
    *size = block.end - block.begin;
}

/* items: row blocks × column tiles of the chunk: the forward's logits tiles again */
static void chunk_logits_item(void *context, int64_t item, void *scratch) {
    (void)scratch;
    const chunk_work *w = context;
    int64_t start = 0, size = 0;
    block_of(w, item / w->column_tiles, &start, &size);
    const int64_t offset = item % w->column_tiles * LINEAR_TILE;
    logits_tile(w->logits + start * w->width + offset, w->width, w->normed + start * w->hidden,
                w->weight, size, w->hidden, w->v0 + offset,
                minimum(LINEAR_TILE, w->width - offset));
}

/* items: row blocks: logits → dlogits in place */
static void chunk_softmax_item(void *context, int64_t item, void *scratch) {
    (void)scratch;
    const chunk_work *w = context;
    int64_t start = 0, size = 0;
    block_of(w, item, &start, &size);
    for (int64_t n = start; n < start + size; n++) {
        double *row = w->logits + n * w->width;
        const int64_t label = w->labels[n];
        if (label == CPPARITY_IGNORE_INDEX) {
            for (int64_t v = 0; v < w->width; v++) {
                row[v] = 0.0;
            }
            continue;
        }
        for (int64_t v = 0; v < w->width; v++) {
            row[v] -= w->lse[n];
        }
        exponential_in_place(row, w->width);
        for (int64_t v = 0; v < w->width; v++) {
            row[v] = w->scale * row[v];
        }
        if (label >= w->v0 && label < w->v0 + w->width) {
            row[label - w->v0] -= w->scale;
        }
    }
}

/* items: row blocks × D tiles (dnormed), then chunk tiles × D tiles (dlm_head) */
static void chunk_gradient_item(void *context, int64_t item, void *scratch) {
    (void)scratch;
    const chunk_work *w = context;
    const int64_t input_items = w->blocks * w->hidden_tiles;
    const int D = (int)w->hidden, width = (int)w->width;
    if (item < input_items) {
        int64_t start = 0, size = 0;
        block_of(w, item / w->hidden_tiles, &start, &size);
        const int64_t column = item % w->hidden_tiles * LINEAR_TILE;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)size,
                    (int)minimum(LINEAR_TILE, w->hidden - column), width, 1.0,
                    w->logits + start * w->width, width, w->weight + w->v0 * w->hidden + column, D,
                    1.0, w->dnormed + start * w->hidden + column, D);
        return;
    }
    item -= input_items;
    const int64_t row = item / w->hidden_tiles * LINEAR_TILE;
    const int64_t column = item % w->hidden_tiles * LINEAR_TILE;
    const int m = (int)minimum(LINEAR_TILE, w->width - row);
    const int n = (int)minimum(LINEAR_TILE, w->hidden - column);
    double *result = w->dweight + (w->v0 + row) * w->hidden + column;
    for (int64_t b = 0; b < w->blocks; b++) {
        int64_t start = 0, size = 0;
        block_of(w, b, &start, &size);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, (int)size, 1.0,
                    w->logits + start * w->width + row, width,
                    w->normed + start * w->hidden + column, D, 1.0, result, D);
    }
}

/* One vocabulary chunk: its logits again, dlogits, dnormed and (pipelined over the team's ranks
 * with reference_team_pipeline) dlm_head. */
static void chunk_add(void *context, int64_t chunk) {
    chunk_work *work = context;
    work->v0 = chunk * LM_HEAD_CHUNK;
    work->width = minimum(LM_HEAD_CHUNK, work->vocab - work->v0);
    work->column_tiles = (work->width + LINEAR_TILE - 1) / LINEAR_TILE;
    const reference_parallel_work steps[3] = {
        {work->blocks * work->column_tiles, 0, chunk_logits_item, work},
        {work->blocks, 0, chunk_softmax_item, work},
        {work->blocks * work->hidden_tiles + work->column_tiles * work->hidden_tiles, 0,
         chunk_gradient_item, work},
    };
    for (int s = 0; s < 3; s++) {
        (void)reference_parallel_run(&steps[s], "the LM head's backward", NULL);
    }
}

static double *chunk_values(void *context, int64_t chunk, int64_t *count) {
    const chunk_work *work = context;
    const int64_t v0 = chunk * LM_HEAD_CHUNK;
    *count = minimum(LM_HEAD_CHUNK, work->vocab - v0) * work->hidden;
    return work->dweight + v0 * work->hidden;
}

cpparity_status lm_head_backward(double *dnormed, double *dweight, const double *normed,
                                 const double *weight, const double *lse, const int64_t *labels,
                                 const reference_rows *rows, int64_t hidden, int64_t vocab,
                                 double scale, cpparity_error *error) {
    const int64_t tokens = reference_rows_count(rows);
    if (vocab == 0 || (tokens == 0 && reference_team_size(rows->team) == 1)) {
        return CPPARITY_OK;
    }
    const int64_t widest = minimum(LM_HEAD_CHUNK, vocab);
    double *logits = malloc((size_t)(tokens * widest + 1) * sizeof *logits);
    if (logits == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (the logits of a vocabulary chunk: %lld x %lld)",
                                  (long long)tokens, (long long)widest);
    }
    chunk_work work = {.rows = rows,
                       .origin = row_blocks_at(&rows->blocks, rows->first).flat,
                       .normed = normed,
                       .weight = weight,
                       .lse = lse,
                       .labels = labels,
                       .dnormed = dnormed,
                       .dweight = dweight,
                       .logits = logits,
                       .hidden = hidden,
                       .vocab = vocab,
                       .scale = scale,
                       .hidden_tiles = (hidden + LINEAR_TILE - 1) / LINEAR_TILE,
                       .blocks = rows->end - rows->first};
    const cpparity_status status =
        reference_team_pipeline(rows->team, (vocab + LM_HEAD_CHUNK - 1) / LM_HEAD_CHUNK,
                                chunk_values, chunk_add, &work, error);
    free(logits);
    return status;
}
