/* memory_estimate.c — what a job will hold, and what this machine has (see memory_estimate.h). */
#include "harness/running/memory_estimate.h"

#include "common/row_blocks.h"
#include "harness/judging/judge_item.h"

#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/batch.h"
#include "common/checked_size.h"
#include "common/model_parameters.h"
#include "common/tensor_table.h"
#include "distributed/comm/comm_launch.h"
#include "distributed/kernels/kernel_registry.h"
#include "distributed/kernels/kernel_support.h"
#include "fixtures/parameter_cache.h"
#include "harness/judging/naive_model.h"
#include "harness/running/attention_stream.h"
#include "harness/running/run_plan.h"
#include "reference/memory.h"

/* Checked sums and products of sizes (common/checked_size.h), under short names. */
#define PRODUCT CPPARITY_PRODUCT
#define SUM CPPARITY_SUM
#define LARGEST CPPARITY_LARGEST

/* --- sizes in text ---------------------------------------------------------------------------- */

bool memory_size_parse(const char *text, int64_t *bytes) {
    if (text == NULL || !isdigit((unsigned char)text[0])) {
        return false;
    }
    const char *p = text;
    int64_t whole = 0;
    for (; isdigit((unsigned char)*p); p++) {
        if (!cpparity_multiply_checked(whole, 10, &whole) ||
            !cpparity_add_checked(whole, *p - '0', &whole)) {
            return false;
        }
    }
    long double fraction = 0.0L, place = 0.1L;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) {
            return false;
        }
        for (; isdigit((unsigned char)*p); p++, place /= 10.0L) {
            fraction += (long double)(*p - '0') * place;
        }
    }
    static const char units[] = "BKMGTP";
    int64_t multiple = 1;
    if (*p != '\0') {
        const char *unit = strchr(units, toupper((unsigned char)*p));
        if (unit == NULL) {
            return false;
        }
        for (const char *u = units + 1; u <= unit; u++) {
            multiple *= 1024; /* K = 1024, M = 1024², ... */
        }
        p++;
        if (unit != units) { /* K, M, ...: then "i", "iB" or "B" may follow */
            if (*p == 'i' || *p == 'I') {
                p++;
                if (*p != 'B' && *p != 'b') {
                    return false;
                }
            }
            if (*p == 'B' || *p == 'b') {
                p++;
            }
        }
        if (*p != '\0') {
            return false;
        }
    }
    int64_t result = 0;
    if (!cpparity_multiply_checked(whole, multiple, &result)) {
        return false;
    }
    const int64_t part = (int64_t)(fraction * (long double)multiple); /* < multiple: no overflow */
    if (!cpparity_add_checked(result, part, &result) || result < 1) {
        return false;
    }
    *bytes = result;
    return true;
}

void memory_size_format(int64_t bytes, char *text, size_t size) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(text, size, "%lld B", (long long)bytes);
        return;
    }
    double value = (double)bytes / 1024.0;
    int unit = 0;
    while (value >= 1024.0 && unit + 1 < (int)(sizeof units / sizeof *units)) {
        value /= 1024.0;
        unit++;
    }
    snprintf(text, size, "%.1f %s", value, units[unit]);
}

/* --- the memory this machine has -------------------------------------------------------------- */

/* The first line of root + path, without its newline; false when it cannot be read. */
static bool read_line(const char *root, const char *path, char *line, size_t size) {
    char full[1024];
    snprintf(full, sizeof full, "%s%s", root, path);
    FILE *file = fopen(full, "r");
    if (file == NULL) {
        return false;
    }
    const bool read = fgets(line, (int)size, file) != NULL;
    fclose(file);
    if (read) {
        line[strcspn(line, "\n")] = '\0';
    }
    return read;
}

/* A whole non-negative number of bytes from a cgroup file ("max" and absurd limits: none). */
static bool read_bytes(const char *root, const char *path, int64_t *bytes) {
    char line[128];
    if (!read_line(root, path, line, sizeof line) || !isdigit((unsigned char)line[0])) {
        return false;
    }
    errno = 0;
    char *end = NULL;
    const long long value = strtoll(line, &end, 10);
    if (errno != 0 || *end != '\0' || value < 0) {
        return false;
    }
    *bytes = value;
    return true;
}

/* MemAvailable of root/proc/meminfo in bytes. */
static bool mem_available(const char *root, int64_t *bytes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/proc/meminfo", root);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return false;
    }
    char line[256];
    bool found = false;
    long long kib = 0;
    while (!found && fgets(line, sizeof line, file) != NULL) {
        found = sscanf(line, "MemAvailable: %lld kB", &kib) == 1 && kib >= 0;
    }
    fclose(file);
    if (found && cpparity_multiply_checked(kib, 1024, bytes)) {
        return true;
    }
    return false;
}

static bool exists(const char *root, const char *path) {
    char full[1024];
    struct stat info;
    snprintf(full, sizeof full, "%s%s", root, path);
    return stat(full, &info) == 0;
}

/* Limits at least this large are "no limit" (cgroup v1 writes 2^63 rounded down to a page). */
#define UNLIMITED ((int64_t)1 << 62)

/* Walks from mount + path up to mount: where limit_file holds a limit, the room left is the limit
 * less usage_file; the smallest room lowers *bytes (and names its source). */
static void cgroup_room(const char *root, const char *mount, const char *path,
                        const char *limit_file, const char *usage_file, const char *label,
                        int64_t *bytes, char *source, size_t source_size) {
    char folder[1024];
    snprintf(folder, sizeof folder, "%s%s", mount, strcmp(path, "/") == 0 ? "" : path);
    if (!exists(root, folder)) { /* a namespaced view: our cgroup is the mount's root */
        snprintf(folder, sizeof folder, "%s", mount);
    }
    const size_t mount_length = strlen(mount);
    for (;;) {
        char file[1200];
        int64_t limit = 0, usage = 0;
        snprintf(file, sizeof file, "%s/%s", folder, limit_file);
        if (read_bytes(root, file, &limit) && limit < UNLIMITED) {
            snprintf(file, sizeof file, "%s/%s", folder, usage_file);
            if (!read_bytes(root, file, &usage)) {
                usage = 0;
            }
            const int64_t room = limit > usage ? limit - usage : 0;
            if (room < *bytes) {
                *bytes = room;
                snprintf(source, source_size, "%s of %s", label, folder);
            }
        }
        char *slash = strrchr(folder, '/');
        if (strlen(folder) <= mount_length || slash == NULL ||
            (size_t)(slash - folder) < mount_length) {
            break;
        }
        *slash = '\0';
    }
}

bool memory_available(const char *root, int64_t *bytes, char *source, size_t source_size) {
    if (!mem_available(root, bytes)) {
        return false;
    }
    snprintf(source, source_size, "MemAvailable of this machine");
    char path[1024];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return true;
    }
    char line[1200];
    while (fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *controllers = strchr(line, ':');
        char *cgroup = controllers != NULL ? strchr(controllers + 1, ':') : NULL;
        if (cgroup == NULL) {
            continue;
        }
        *controllers++ = '\0';
        *cgroup++ = '\0';
        if (strcmp(line, "0") == 0 && controllers[0] == '\0') { /* cgroup v2 */
            const char *mount = exists(root, "/sys/fs/cgroup/cgroup.controllers")
                                    ? "/sys/fs/cgroup"
                                    : "/sys/fs/cgroup/unified";
            cgroup_room(root, mount, cgroup, "memory.max", "memory.current",
                        "cgroup memory.max - memory.current", bytes, source, source_size);
            continue;
        }
        bool memory = false; /* "memory" among the comma-separated controllers */
        for (const char *name = controllers; name != NULL && !memory;) {
            const char *comma = strchr(name, ',');
            const size_t length = comma != NULL ? (size_t)(comma - name) : strlen(name);
            memory = length == 6 && strncmp(name, "memory", 6) == 0;
            name = comma != NULL ? comma + 1 : NULL;
        }
        if (memory) { /* cgroup v1 */
            cgroup_room(root, "/sys/fs/cgroup/memory", cgroup, "memory.limit_in_bytes",
                        "memory.usage_in_bytes",
                        "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes", bytes, source,
                        source_size);
        }
    }
    fclose(file);
    return true;
}

/* A positive whole number from the environment variable name, or 0. */
static int64_t environment_count(const char *name) {
    const char *value = getenv(name);
    if (value == NULL || !isdigit((unsigned char)value[0])) {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    const long long parsed = strtoll(value, &end, 10);
    return errno == 0 && *end == '\0' && parsed > 0 ? parsed : 0;
}

void memory_limit_resolve(int64_t max_memory, bool ranks_are_processes, const char *root,
                          memory_limit *limit) {
    memset(limit, 0, sizeof *limit);
    if (max_memory > 0) {
        limit->bytes = max_memory;
        snprintf(limit->source, sizeof limit->source, "--max-memory");
        return;
    }
    char source[MEMORY_TEXT];
    if (!memory_available(root, &limit->bytes, source, sizeof source)) {
        /* not Linux, or no /proc: only sizes that overflow are refused */
        limit->bytes = INT64_MAX;
        snprintf(limit->source, sizeof limit->source,
                 "--max-memory not given, and the memory available could not be read "
                 "(MemAvailable in /proc/meminfo): no limit");
        return;
    }
    static const char *const local_sizes[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    int64_t ranks = 0;
    const char *from = NULL;
    for (size_t i = 0; ranks_are_processes && ranks == 0 && i < 2; i++) {
        ranks = environment_count(local_sizes[i]);
        from = local_sizes[i];
    }
    if (ranks > 1) {
        limit->bytes /= ranks;
        snprintf(limit->source, sizeof limit->source,
                 "--max-memory not given; default: %.160s / %lld node-local MPI ranks (%s)", source,
                 (long long)ranks, from);
    } else {
        snprintf(limit->source, sizeof limit->source, "--max-memory not given; default: %.200s",
                 source);
    }
}

void memory_allocator_pin(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* glibc's default, no longer raised dynamically */
#endif
}

/* --- one item ----------------------------------------------------------------------------- */

/* B, S and the model's sizes of a case, and the parameter count (model.md's table). */
typedef struct case_sizes {
    int64_t B, S, V, H, Hkv, Dh, layers;
    int64_t N;          /* tokens B·S */
    int64_t P;          /* parameters */
    int64_t parameters; /* tensors in the parameter table */
} case_sizes;

/* The bytes of a batch of `tokens` (common/batch.h). */
static int64_t batch_bytes(cpparity_sizer *s, int64_t tokens) {
    return PRODUCT(s, "the batch", CPPARITY_BATCH_TOKEN_BYTES, tokens);
}

/* The kernel an item calls: the setting's, else the implementation's default (NULL: none). */
static const cpparity_attention_kernel *kernel_of(const memory_setting *setting) {
    if (setting->kernel != NULL || setting->implementation == NULL) {
        return setting->kernel;
    }
    return kernel_registry_find(setting->implementation->default_kernel);
}

/* attention_item.c: one kernel alone, all heads, on the root; no model, no cache. float32 q,
 * dout, out, dq and their naive and second-call copies (8 each of Q), k, v, dk, dv likewise (8
 * each of K), lse four times (R); float64 inputs and reference outputs (4 of Q, 4 of K, 2 of R);
 * the guarded copies of a plugin's outputs (2Q + 2K + R floats); the batch, both masks, the
 * reference attention's backward (reference/memory.h) and a CPU kernel's own workspace. */
static void attention_item(cpparity_sizer *s, const cpparity_case *c, const case_sizes *z,
                           const memory_setting *setting, memory_item *item) {
    const int64_t Q = PRODUCT(s, "q", z->N, z->H, z->Dh), K = PRODUCT(s, "k", z->N, z->Hkv, z->Dh);
    const int64_t R = PRODUCT(s, "lse", z->N, z->H);
    reference_memory reference;
    cpparity_error error;
    if (reference_memory_estimate(&c->model, z->B, z->S, &reference, &error) != CPPARITY_OK) {
        cpparity_sizer_fail(s, error.message);
    }
    const cpparity_attention_kernel *kernel = kernel_of(setting);
    const cpparity_attention_dims dims = {z->B, z->S, z->H, z->Hkv, z->Dh};
    int64_t workspace = 0;
    if (!kernel_workspace_bytes(kernel, &dims, &workspace)) {
        cpparity_sizer_fail(s, "the attention kernel's workspace");
    }
    item->implementation = SUM(
        s, PRODUCT(s, "the float32 buffers", 4, SUM(s, 10 * Q, 10 * K, 5 * R)),
        PRODUCT(s, "the float64 buffers", 8, SUM(s, 4 * Q, 4 * K, 2 * R)), R, batch_bytes(s, z->N),
        PRODUCT(s, "the kernel's mask", 17, z->N), reference.masks, reference.attention_backward,
        PRODUCT(s, "the records", 5 * z->layers, (int64_t)sizeof(tensor_record)),
        kernel != NULL && kernel->device == CPPARITY_KERNEL_DEVICE_CPU ? workspace : 0);
    item->implementation_known = true; /* no implementation runs */
}

/* The implementation's own share of one rank (its `estimate`), into item; unknown without one. */
static void implementation_share(cpparity_sizer *s, const cpparity_case *c, int64_t cp,
                                 cpparity_dtype dtype, cpparity_layout layout,
                                 cpparity_algorithm_choice algorithm, const memory_setting *setting,
                                 memory_item *item) {
    const cpparity_implementation *implementation = setting->implementation;
    if (implementation == NULL || implementation->estimate == NULL) {
        return; /* only the harness's share is counted; implementation_known says so */
    }
    const cpparity_implementation_estimate setup = {
        .config = &c->model,
        .batch = c->batch_size,
        .seq_len = c->seq_len,
        .cp = cp,
        .dtype = dtype,
        .layout = layout,
        .algorithm = algorithm,
        .kernel = kernel_of(setting),
        .fault = setting->fault,
        .every_fault = setting->selftest,
        .comm_on_device = setting->device_comm,
        .comm_gathers_reduce = setting->ranks_are_processes && !setting->device_comm,
    };
    cpparity_error error;
    int64_t bytes = 0, kept = 0;
    const bool stated = implementation->estimate(&setup, &bytes, &kept, &error) == CPPARITY_OK;
    if (!stated || bytes < 0) {
        char what[CPPARITY_SIZER_TEXT];
        snprintf(what, sizeof what, "the %.64s implementation's estimate: %.150s",
                 implementation->name, stated ? "a negative size" : error.message);
        cpparity_sizer_fail(s, what);
        return;
    }
    item->implementation_own = bytes;
    item->implementation_kept = kept;
    item->implementation_known = true;
}

bool memory_estimate_item(const cpparity_case *c, int64_t cp, cpparity_dtype dtype,
                          cpparity_layout layout, cpparity_algorithm_choice algorithm,
                          const memory_setting *setting, memory_item *item, char *what,
                          size_t what_size) {
    memset(item, 0, sizeof *item);
    cpparity_sizer s = CPPARITY_SIZER_START;
    const cpparity_model_config *m = &c->model;
    case_sizes z = {c->batch_size,
                    c->seq_len,
                    m->vocab_size,
                    m->num_attention_heads,
                    m->num_key_value_heads,
                    m->head_dim,
                    m->num_hidden_layers,
                    0,
                    0,
                    0};
    cpparity_tensor_table table = {0};
    cpparity_error error;
    if (cpparity_model_parameter_table(m, &table, &error) != CPPARITY_OK) {
        cpparity_sizer_fail(&s, error.message);
    }
    z.P = table.total;
    z.parameters = table.count;
    cpparity_tensor_table_free(&table);
    z.N = PRODUCT(&s, "the tokens B x S", z.B, z.S);
    if (cp < 1) {
        cp = 1;
    }
    if (c->level == CPPARITY_LEVEL_ATTENTION) {
        attention_item(&s, c, &z, setting, item);
        if (!s.ok) {
            memset(item, 0, sizeof *item);
            snprintf(what, what_size, "%s", s.what);
        }
        return s.ok;
    }

    /* the float64 reference (reference_cache.c compute: the batch, the model of
     * reference/memory.h, the outputs it copies out and keeps) */
    reference_memory reference;
    if (reference_memory_estimate(m, z.B, z.S, &reference, &error) != CPPARITY_OK) {
        cpparity_sizer_fail(&s, error.message);
    }
    const int64_t parameter_table = cpparity_tensor_table_bytes(z.parameters);
    const int64_t batch = batch_bytes(&s, z.N);
    /* never the logits (B, S, V): the final norm's output and the head, from which any row block
     * of them is made again */
    const int64_t D = m->hidden_size;
    item->reference_kept = SUM(&s, PRODUCT(&s, "the reference's final hidden state", 8, z.N, D),
                               PRODUCT(&s, "the reference's LM head", 8, z.V, D),
                               PRODUCT(&s, "the gradients", 8, z.P), z.N, parameter_table);
    item->reference = SUM(&s, batch, reference.model,
                          LARGEST(reference.forward, reference.backward, item->reference_kept));
    /* spread over the job's ranks (run.c spread_references): each rank computes its row blocks
     * and ends with the kept outputs whole, gathered */
    for (int64_t r = 0; setting->ranks > 1 && r < setting->ranks; r++) {
        reference_memory spread;
        if (reference_memory_estimate_spread(m, z.B, z.S, setting->ranks, r, &spread, &error) !=
            CPPARITY_OK) {
            cpparity_sizer_fail(&s, error.message);
            break;
        }
        const int64_t share = SUM(&s, batch, spread.model,
                                  LARGEST(spread.forward, spread.backward,
                                          SUM(&s, item->reference_kept, spread.gather_final)));
        item->reference_spread = LARGEST(item->reference_spread, share);
        item->reference_spread_all = SUM(&s, item->reference_spread_all, share);
    }
    /* discrimination.c: the same model on its own batch, without outputs kept, a mask feature
     * off */
    item->discrimination =
        SUM(&s, batch, reference.model,
            LARGEST(reference.features_off, reference.forward, reference.backward));
    /* spread like the reference (a rank's share, the variant's outputs kept whole on each rank),
     * the masks of a feature off on top */
    item->discrimination_spread = SUM(&s, item->reference_spread, reference.features_off);

    /* the naive baseline (reference_cache.c compute_naive: the batch, the weights in float64 and
     * their table, naive_model.h's run) */
    int64_t naive = 0;
    if (naive_model_memory(m, z.B, z.S, &naive, &item->baseline_kept, &error) != CPPARITY_OK) {
        cpparity_sizer_fail(&s, error.message);
    }
    item->baseline = SUM(&s, batch, PRODUCT(&s, "the weights", 8, z.P), parameter_table, naive);
    /* spread with the reference (run.c spread_baselines): a rank's share, the largest */
    for (int64_t r = 0; setting->ranks > 1 && r < setting->ranks; r++) {
        int64_t share = 0, kept = 0;
        if (naive_model_memory_spread(m, z.B, z.S, setting->ranks, r, &share, &kept, &error) !=
            CPPARITY_OK) {
            cpparity_sizer_fail(&s, error.message);
            break;
        }
        share = SUM(&s, batch, PRODUCT(&s, "the weights", 8, z.P), parameter_table, share);
        item->baseline_spread = LARGEST(item->baseline_spread, share);
        item->baseline_spread_all = SUM(&s, item->baseline_spread_all, share);
    }

    /* the implementation, per rank: what run_item.c run_on_rank gives and reads back (the whole
     * batch, the float64 weights, the outputs of a slice of L tokens (ceil(S/cp), zigzag
     * 2·ceil(S/2cp)), the parameter tables of run_on_rank and run_item_execute), and the
     * implementation's own share; once per process, the copy of the weights and their table
     * that fixtures/parameter_cache.h keeps when they are small enough */
    const int64_t per = layout == CPPARITY_LAYOUT_ZIGZAG ? 2 * cp : cp;
    const int64_t L = (z.S / per + (z.S % per != 0)) * (per / cp);
    const int64_t Sp = PRODUCT(&s, "the padded sequence", cp, L);
    const int64_t logits = PRODUCT(&s, "a rank's logits", z.B, L, z.V);
    /* an implementation that reads its logits by rows hands over no slice, and its instance
     * lives on while the root reads them */
    const bool by_rows =
        setting->implementation != NULL && setting->implementation->read_logits_rows != NULL;
    const int64_t outputs = SUM(&s, by_rows ? 0 : PRODUCT(&s, "a rank's logits", 4, logits),
                                PRODUCT(&s, "a rank's gradients", 4, z.P));
    implementation_share(&s, c, cp, dtype, layout, algorithm, setting, item);
    const int64_t weights = PRODUCT(&s, "the weights", 8, z.P);
    item->parameter_cache =
        fixture_parameter_cache_keeps(z.P) ? SUM(&s, weights, parameter_table) : 0;
    item->implementation =
        SUM(&s, batch, weights, outputs, PRODUCT(&s, "the parameter tables", 2, parameter_table),
            item->implementation_own);
    /* while the root judges, each rank holds its outputs and, for the logits sent one block of
     * positions at a time (run_item.c streamed_logits), every rank's positions and one block of
     * its rows */
    const row_blocks padded_blocks = row_blocks_of(z.B, Sp);
    const int64_t block =
        PRODUCT(&s, "a row block of logits", row_blocks_widest(&padded_blocks), z.V);
    item->rank_outputs = SUM(&s, outputs, PRODUCT(&s, "the ranks' positions", 8, Sp),
                             PRODUCT(&s, "a row block of logits", 4, block),
                             by_rows ? item->implementation_kept : 0);

    /* the root: the gathered gradients (run_item.c), the comparison one block of positions at a
     * time (judge_item.c: the gathered rows, the block by position, a run as read, 4 bytes each,
     * and the reference's block, 8; the owner and row of every position and each row's profile
     * sums, 40 bytes a position), what the results keep */
    const int64_t records = PRODUCT(&s, "the tensor records", cp, SUM(&s, z.parameters, 2),
                                    (int64_t)sizeof(tensor_record));
    /* --store all keeps every tensor whole; failures keeps each rank's logits whole up to
     * judge_item.c's bound and past it a window of the rank's rows of one block (at most its L
     * rows), 12 bytes a value: while the logits are compared every rank's are held, pass or fail
     * (the verdict comes at the end); afterwards only a failing tensor's stay (with a fault
     * planted the results are expected to keep them) */
    const bool keep_values = setting->store == RUN_STORE_ALL ||
                             (setting->store == RUN_STORE_FAILURES && !setting->selftest &&
                              setting->fault != CPPARITY_FAULT_NONE);
    const int64_t rank_rows = PRODUCT(&s, "a rank's rows of logits", L, z.V);
    const int64_t kept_logits =
        setting->store == RUN_STORE_ALL || logits <= JUDGE_STORE_WHOLE_LOGITS
            ? logits
            : (block < rank_rows ? block : rank_rows);
    const int64_t compared_window =
        setting->store == RUN_STORE_FAILURES && !keep_values
            ? PRODUCT(&s, "the logits kept while compared", 12, cp, kept_logits)
            : 0;
    item->judging = SUM(&s, PRODUCT(&s, "the gathered gradients", cp, 4, z.P),
                        PRODUCT(&s, "the rank summaries", cp, (int64_t)sizeof(cpparity_error)),
                        PRODUCT(&s, "a block of logits compared", 20, block),
                        PRODUCT(&s, "the position maps", 40, Sp), records, compared_window);
    const int64_t values = keep_values
                               ? PRODUCT(&s, "the stored values", 12,
                                         SUM(&s, PRODUCT(&s, "the stored values", cp, kept_logits),
                                             PRODUCT(&s, "the stored values", cp, z.P), cp))
                               : 0;
    const int64_t profiles = PRODUCT(&s, "the logits profiles", 8, Sp); /* cp × L doubles */
    item->stored = SUM(&s, records, profiles, values);
    if (!s.ok) {
        memset(item, 0, sizeof *item);
        snprintf(what, what_size, "%s", s.what);
    }
    return s.ok;
}

/* --- the job ------------------------------------------------------------------------------ */

static const char *comm_name(const run_options *options) {
    if (options->comm != NULL) {
        return options->comm;
    }
    return comm_backend_detect()->name;
}

memory_setting memory_setting_for(const run_options *options, const run_plan *plan,
                                  const cpparity_implementation *implementation,
                                  const cpparity_attention_kernel *kernel) {
    memory_setting setting;
    memset(&setting, 0, sizeof setting);
    setting.implementation = implementation;
    setting.kernel = kernel;
    const char *name = comm_name(options);
    const cpparity_comm_backend *backend = comm_backend_find(name);
    setting.ranks_are_processes =
        backend != NULL ? backend->ranks_from_launcher : strcmp(name, "local") != 0;
    setting.device_comm = strcmp(name, "nccl") == 0;
    setting.store = options->store;
    setting.selftest = options->selftest;
    setting.fault = options->fault;
    if (setting.ranks_are_processes) { /* what the launcher started; a singleton without one */
        setting.ranks = environment_count("OMPI_COMM_WORLD_SIZE");
        if (setting.ranks == 0) {
            setting.ranks = environment_count("PMI_SIZE");
        }
    } else {
        setting.ranks = options->ranks > 0 ? options->ranks : plan->least_ranks;
    }
    if (setting.ranks < 1) {
        setting.ranks = 1;
    }
    return setting;
}

/* The discrimination check reruns the reference of a case with a mask feature off
 * (discrimination.c): when it has sliding or chunked layers, packed documents or padding. */
static bool discriminated(const cpparity_case *c) {
    if (c->level == CPPARITY_LEVEL_ATTENTION) {
        return false; /* run.c skips them: no model to switch a mask feature off in */
    }
    bool any = false;
    for (int64_t l = 0; l < c->model.num_hidden_layers; l++) {
        any |= c->model.layer_types[l] != CPPARITY_LAYER_FULL;
    }
    for (int64_t b = 0; b < c->batch_size; b++) {
        any |= c->rows[b].document_count > 1 || c->rows[b].left_padding > 0 ||
               c->rows[b].right_padding > 0;
    }
    return any;
}

/* One item of a round as one process sees it. */
typedef struct round_share {
    int64_t item;    /* plan index */
    int64_t process; /* which process */
    int64_t own;     /* what the item holds there at most */
    int64_t ranks;   /* ranks of its group there */
    bool root;       /* the process holds the group's root */
} round_share;

/* The job's bookkeeping: per process what is cached and stored, per case what was computed. */
typedef struct job_state {
    const memory_setting *setting;
    int64_t processes;
    int64_t *cached;      /* (processes) reference and baseline outputs kept so far */
    int64_t *weights;     /* (processes) the parameter cache's largest copy so far */
    int64_t *results;     /* (processes) stored results (rank 0's process) */
    int64_t *round;       /* (processes) what this round's items hold */
    bool *reference_done; /* (cases) */
    bool *baseline_done;  /* (cases × dtypes) */
    round_share *shares;  /* one round's shares */
    int64_t share_count;
    memory_item *parts; /* (items) */
} job_state;

static int64_t process_of(const job_state *state, int64_t rank) {
    return state->setting->ranks_are_processes ? rank : 0;
}

/* Sums of parts that each fit int64 but together may not: they stop at SATURATED, which is more
 * than any machine has (and so still refused). */
#define SATURATED (INT64_MAX / 4)

static int64_t plus(int64_t a, int64_t b) {
    int64_t sum = 0;
    return cpparity_add_checked(a, b, &sum) && sum < SATURATED ? sum : SATURATED;
}

static int64_t times(int64_t count, int64_t bytes) {
    int64_t product = 0;
    return cpparity_multiply_checked(count, bytes, &product) && product < SATURATED ? product
                                                                                    : SATURATED;
}

/* A round every rank takes part in before the items (a reference or a naive baseline spread over
 * the job's ranks): each process holds `share` beside what it holds already; the home process
 * then keeps `kept`. */
static void spread_round(job_state *state, memory_total *total, int64_t share, int64_t home,
                         int64_t kept) {
    for (int64_t p = 0; p < state->processes; p++) {
        const int64_t others = plus(plus(state->cached[p], state->weights[p]), state->results[p]);
        if (plus(others, share) > total->bytes) {
            total->bytes = plus(others, share);
            total->others = others;
        }
    }
    state->cached[home] = plus(state->cached[home], kept);
}

/* Adds item i (group g of cp ranks, its case's home rank `home`) to the round: what it holds in
 * each process its group's ranks live in, at the largest of its phases — computing (the prefetch
 * thread beside the ranks), judging (the root with every rank's outputs), collecting (the stored
 * values on their way to rank 0). *pending_cache is what it leaves in its root's cache. */
static void add_to_round(job_state *state, const cpparity_case *c, const run_plan_item *planned,
                         int64_t i, int64_t g, int64_t home, memory_total *totals,
                         int64_t *pending_cache) {
    const memory_item *parts = &state->parts[i];
    const int64_t cp = planned->cp;
    int64_t prefetch = 0, fresh = 0; /* the prefetch thread's peak, what it leaves in the cache */
    bool *baseline_done =
        &state->baseline_done[planned->case_index * CPPARITY_DTYPE_COUNT + (int64_t)planned->dtype];
    if (!c->expect_refuse && !state->reference_done[planned->case_index]) {
        prefetch = LARGEST(parts->reference, plus(parts->reference_kept, parts->baseline));
        fresh = plus(parts->reference_kept, parts->baseline_kept);
        totals[i].reference = parts->reference;
        totals[i].baseline = parts->baseline;
        state->reference_done[planned->case_index] = true;
        *baseline_done = true;
    } else if (!c->expect_refuse && !*baseline_done) {
        prefetch = parts->baseline;
        fresh = parts->baseline_kept;
        totals[i].baseline = parts->baseline;
        *baseline_done = true;
    }
    *pending_cache = fresh;
    for (int64_t k = 0; k < cp; k++) { /* every process of the group fills the weights */
        int64_t *kept = &state->weights[process_of(state, g * cp + k)];
        *kept = LARGEST(*kept, parts->parameter_cache);
    }
    const int64_t root_process = process_of(state, home);
    const bool processes = state->setting->ranks_are_processes;
    const int64_t ranks = processes ? 1 : cp; /* the group's ranks in one process */
    for (int64_t k = 0; k < (processes ? cp : 1); k++) {
        const int64_t process = process_of(state, g * cp + k);
        const bool root = process == root_process;
        const int64_t computing = plus(root ? prefetch : 0, times(ranks, parts->implementation));
        const int64_t judging = plus(root ? plus(fresh, plus(parts->judging, parts->stored)) : 0,
                                     times(ranks, parts->rank_outputs));
        const int64_t collecting = root ? plus(fresh, times(3, parts->stored)) : 0;
        const int64_t own = LARGEST(computing, judging, collecting);
        state->round[process] = plus(state->round[process], own);
        state->shares[state->share_count++] = (round_share){i, process, own, ranks, root};
    }
}

/* Closes a round: every share's total is what its process holds. */
static void close_round(job_state *state, memory_total *totals) {
    for (int64_t k = 0; k < state->share_count; k++) {
        const round_share *share = &state->shares[k];
        const int64_t p = share->process;
        const memory_item *parts = &state->parts[share->item];
        const int64_t held = plus(plus(state->cached[p], state->weights[p]),
                                  plus(state->results[p], state->round[p]));
        memory_total *total = &totals[share->item];
        if (held > total->bytes) {
            total->bytes = held;
            total->implementation = parts->implementation;
            total->implementation_own = parts->implementation_own;
            total->implementation_known = parts->implementation_known;
            total->ranks = share->ranks;
            total->harness = share->root ? plus(parts->judging, parts->stored) : 0;
            total->others = held - share->own;
        }
    }
    for (int64_t k = 0; k < state->share_count; k++) {
        state->round[state->shares[k].process] = 0;
    }
    state->share_count = 0;
}

static int compare_int64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

cpparity_status memory_estimate_job(const cpparity_case *const *cases, int64_t case_count,
                                    const run_plan_item *items, int64_t item_count,
                                    const memory_setting *setting, memory_total *totals,
                                    memory_discrimination *discrimination, int64_t *overflow_item,
                                    char *overflow_what, size_t overflow_size,
                                    cpparity_error *error) {
    const int64_t N = setting->ranks > 0 ? setting->ranks : 1;
    memset(totals, 0, (size_t)item_count * sizeof *totals);
    *discrimination = (memory_discrimination){0, -1, 0};
    *overflow_item = -1;
    job_state state = {.setting = setting, .processes = setting->ranks_are_processes ? N : 1};
    state.cached = calloc((size_t)state.processes, sizeof *state.cached);
    state.weights = calloc((size_t)state.processes, sizeof *state.weights);
    state.results = calloc((size_t)state.processes, sizeof *state.results);
    state.round = calloc((size_t)state.processes, sizeof *state.round);
    state.reference_done = calloc((size_t)case_count + 1, sizeof *state.reference_done);
    state.baseline_done =
        calloc((size_t)(case_count * CPPARITY_DTYPE_COUNT) + 1, sizeof *state.baseline_done);
    state.shares = calloc((size_t)N + 1, sizeof *state.shares);
    state.parts = calloc((size_t)item_count + 1, sizeof *state.parts);
    int64_t *phases = calloc((size_t)item_count + 1, sizeof *phases);
    int64_t *order = calloc((size_t)item_count + 1, sizeof *order);
    int64_t *offsets = calloc((size_t)N + 2, sizeof *offsets);
    int64_t *pending = calloc((size_t)N + 1, sizeof *pending);
    cpparity_status status = CPPARITY_OK;
    if (!state.cached || !state.weights || !state.results || !state.round ||
        !state.reference_done || !state.baseline_done || !state.shares || !state.parts || !phases ||
        !order || !offsets || !pending) {
        status = cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                    "out of memory (estimating the memory of the run)");
    }
    /* every planned item's parts; the first that overflows ends the estimate */
    int64_t phase_count = 0;
    for (int64_t i = 0; status == CPPARITY_OK && i < item_count && *overflow_item < 0; i++) {
        totals[i].planned = items[i].cp >= 1 && N % items[i].cp == 0 && !items[i].memory_skipped;
        if (!totals[i].planned) {
            continue;
        }
        if (!memory_estimate_item(cases[items[i].case_index], items[i].cp, items[i].dtype,
                                  items[i].layout, items[i].algorithm, setting, &state.parts[i],
                                  overflow_what, overflow_size)) {
            *overflow_item = i;
        }
        phases[phase_count++] = items[i].cp;
    }
    if (phase_count > 0) { /* phases is NULL when its allocation failed (phase_count 0 then) */
        qsort(phases, (size_t)phase_count, sizeof *phases, compare_int64);
    }
    if (status == CPPARITY_OK && *overflow_item < 0) {
        state.results[0] = (int64_t)sizeof(run_item) * item_count; /* rank 0's results table */
    }
    /* run.c spread_references: on more than one rank, every case's reference computed by all
     * the ranks together before any item, one case after another; its home rank keeps it */
    for (int64_t i = 0; status == CPPARITY_OK && *overflow_item < 0 && i < item_count; i++) {
        const int64_t case_index = items[i].case_index;
        const cpparity_case *c = cases[case_index];
        if (!totals[i].planned || state.reference_done[case_index] ||
            !run_spreads_reference(c, N, setting->ranks_are_processes)) {
            continue;
        }
        state.reference_done[case_index] = true;
        /* a process holds one rank's share, the largest (only processes spread it) */
        const int64_t share = state.parts[i].reference_spread;
        totals[i].reference = share;
        totals[i].reference_spread = true;
        /* whether the item's own rounds count the implementation's share (they say so when
         * larger than this one; the implementation does not run in it) */
        totals[i].implementation_known = state.parts[i].implementation_known;
        spread_round(&state, &totals[i], share, process_of(&state, case_index % N),
                     state.parts[i].reference_kept);
    }
    /* run.c spread_baselines: then, case after case, the naive baseline of each dtype its items
     * check, spread the same way; the home rank keeps it */
    for (int64_t i = 0; status == CPPARITY_OK && *overflow_item < 0 && i < item_count; i++) {
        const int64_t case_index = items[i].case_index;
        bool *done = &state.baseline_done[case_index * CPPARITY_DTYPE_COUNT + items[i].dtype];
        if (!totals[i].planned || *done ||
            !run_spreads_reference(cases[case_index], N, setting->ranks_are_processes)) {
            continue;
        }
        *done = true;
        const int64_t share = state.parts[i].baseline_spread;
        totals[i].baseline = share;
        spread_round(&state, &totals[i], share, process_of(&state, case_index % N),
                     state.parts[i].baseline_kept);
    }
    /* run.c run_streamed_attention: an attention-level item by query blocks runs on every rank
     * at once, one after another, before the phases; each process holds its ranks' shares */
    for (int64_t i = 0; status == CPPARITY_OK && *overflow_item < 0 && i < item_count; i++) {
        if (!totals[i].planned || items[i].query_block <= 0) {
            continue;
        }
        const int64_t share =
            attention_stream_memory(cases[items[i].case_index], items[i].query_block, N);
        const int64_t ranks = setting->ranks_are_processes ? 1 : N;
        int64_t held = 0;
        if (share < 0 || !cpparity_multiply_checked(share, ranks, &held)) {
            *overflow_item = i;
            snprintf(overflow_what, overflow_size, "the query blocks' buffers");
            break;
        }
        totals[i].implementation = share;
        totals[i].implementation_known = true; /* no implementation runs: the kernel alone */
        totals[i].ranks = ranks;
        totals[i].query_block = items[i].query_block;
        for (int64_t p = 0; p < state.processes; p++) {
            const int64_t others = plus(plus(state.cached[p], state.weights[p]), state.results[p]);
            if (plus(others, held) > totals[i].bytes) {
                totals[i].bytes = plus(others, held);
                totals[i].others = others;
            }
        }
    }
    /* run.c run_pass: cp size by cp size; run_phase: a queue per group, in rounds */
    for (int64_t f = 0; status == CPPARITY_OK && *overflow_item < 0 && f < phase_count; f++) {
        const int64_t cp = phases[f];
        if (f > 0 && cp == phases[f - 1]) {
            continue;
        }
        const int64_t groups = N / cp;
        memset(offsets, 0, (size_t)(groups + 2) * sizeof *offsets);
        for (int64_t i = 0; i < item_count; i++) {
            if (totals[i].planned && items[i].cp == cp && items[i].query_block <= 0) {
                offsets[items[i].case_index % N / cp + 2]++;
            }
        }
        for (int64_t g = 0; g < groups; g++) {
            offsets[g + 2] += offsets[g + 1];
        }
        for (int64_t i = 0; i < item_count; i++) { /* stable: plan order within a group */
            if (totals[i].planned && items[i].cp == cp && items[i].query_block <= 0) {
                order[offsets[items[i].case_index % N / cp + 1]++] = i;
            }
        }
        /* offsets[g] .. offsets[g + 1] now hold group g's queue */
        int64_t rounds = 0;
        for (int64_t g = 0; g < groups; g++) {
            rounds = offsets[g + 1] - offsets[g] > rounds ? offsets[g + 1] - offsets[g] : rounds;
        }
        for (int64_t r = 0; r < rounds; r++) {
            int64_t ran = 0;
            for (int64_t g = 0; g < groups; g++) {
                if (offsets[g] + r >= offsets[g + 1]) {
                    continue;
                }
                const int64_t i = order[offsets[g] + r];
                add_to_round(&state, cases[items[i].case_index], &items[i], i, g,
                             items[i].case_index % N, totals, &pending[ran]);
                ran++;
            }
            close_round(&state, totals);
            /* what the round's items left: outputs in their root's cache, results on rank 0 */
            ran = 0;
            for (int64_t g = 0; g < groups; g++) {
                if (offsets[g] + r >= offsets[g + 1]) {
                    continue;
                }
                const int64_t i = order[offsets[g] + r];
                const int64_t p = process_of(&state, items[i].case_index % N);
                state.cached[p] = plus(state.cached[p], pending[ran++]);
                state.results[0] = plus(state.results[0], state.parts[i].stored);
            }
        }
    }
    /* run.c run_discrimination: each home rank reruns its cases one at a time, beside the cache;
     * a case whose reference is spread has its reruns spread too, every process holding its
     * share, one case after another */
    if (status == CPPARITY_OK && *overflow_item < 0 && !setting->selftest) {
        int64_t *rerun = pending; /* per rank: its largest rerun and that case */
        int64_t *rerun_case = offsets;
        int64_t spread_rerun = 0, spread_case = -1; /* the largest spread rerun, every process */
        for (int64_t k = 0; k < N; k++) {
            rerun[k] = 0;
            rerun_case[k] = -1;
        }
        for (int64_t i = 0; i < item_count; i++) {
            const cpparity_case *c = cases[items[i].case_index];
            const int64_t home = items[i].case_index % N;
            if (!totals[i].planned || items[i].cp != 1 || c->expect_refuse || !discriminated(c)) {
                continue;
            }
            if (run_spreads_reference(c, N, setting->ranks_are_processes)) {
                if (state.parts[i].discrimination_spread > spread_rerun) {
                    spread_rerun = state.parts[i].discrimination_spread;
                    spread_case = items[i].case_index;
                }
            } else if (state.parts[i].discrimination > rerun[home]) {
                rerun[home] = state.parts[i].discrimination;
                rerun_case[home] = items[i].case_index;
            }
        }
        for (int64_t p = 0; p < state.processes; p++) {
            int64_t held = plus(plus(state.cached[p], state.weights[p]), state.results[p]);
            int64_t largest = 0, which = -1;
            if (spread_case >= 0) {
                held = plus(held, spread_rerun);
                largest = spread_rerun;
                which = spread_case;
            }
            for (int64_t k = 0; k < N; k++) {
                if (process_of(&state, k) == p && rerun_case[k] >= 0) {
                    held = plus(held, rerun[k]);
                    if (rerun[k] > largest) {
                        largest = rerun[k];
                        which = rerun_case[k];
                    }
                }
            }
            if (which >= 0 && held > discrimination->bytes) {
                *discrimination = (memory_discrimination){held, which, largest};
            }
        }
    }
    free(state.cached);
    free(state.weights);
    free(state.results);
    free(state.round);
    free(state.reference_done);
    free(state.baseline_done);
    free(state.shares);
    free(state.parts);
    free(phases);
    free(order);
    free(offsets);
    free(pending);
    return status;
}

bool memory_estimate_case(const cpparity_case *c, const cpparity_implementation *implementation,
                          int64_t *bytes, bool *implementation_known, char *what,
                          size_t what_size) {
    *implementation_known = true;
    run_options options;
    memset(&options, 0, sizeof options);
    options.store = RUN_STORE_FAILURES;
    run_plan_item items[RUN_PLAN_CASE_ITEMS];
    memory_total totals[RUN_PLAN_CASE_ITEMS];
    const int64_t count = run_plan_case_items(c, 0, &options, items);
    memory_setting setting;
    memset(&setting, 0, sizeof setting);
    setting.implementation = implementation;
    setting.ranks = run_plan_least_ranks(items, count);
    setting.store = RUN_STORE_FAILURES;
    setting.fault = CPPARITY_FAULT_NONE;
    memory_discrimination discrimination;
    int64_t overflow = -1;
    cpparity_error error;
    if (memory_estimate_job(&c, 1, items, count, &setting, totals, &discrimination, &overflow, what,
                            what_size, &error) != CPPARITY_OK) {
        snprintf(what, what_size, "%s", error.message);
        return false;
    }
    if (overflow >= 0) {
        return false;
    }
    *bytes = discrimination.bytes;
    for (int64_t i = 0; i < count; i++) {
        *bytes = totals[i].bytes > *bytes ? totals[i].bytes : *bytes;
        *implementation_known = *implementation_known && totals[i].implementation_known;
    }
    return true;
}

/* "reference 30.1 GiB, baseline 8.0 GiB after it, implementation 4 x 0.8 GiB (cpu-f32-model's own
 * 0.6 GiB), ..."; name: the implementation's. */
static void describe_parts(const memory_total *total, const char *name, char *text, size_t size) {
    char reference[32], baseline[32], implementation[32], own[32], harness[32], others[32];
    memory_size_format(total->reference, reference, sizeof reference);
    memory_size_format(total->baseline, baseline, sizeof baseline);
    memory_size_format(total->implementation, implementation, sizeof implementation);
    memory_size_format(total->implementation_own, own, sizeof own);
    memory_size_format(total->harness, harness, sizeof harness);
    memory_size_format(total->others, others, sizeof others);
    size_t used = 0;
    text[0] = '\0';
    if (total->reference > 0) {
        used += (size_t)snprintf(text + used, size - used,
                                 total->reference_spread
                                     ? "reference %s, spread over the ranks before the items; "
                                     : "reference %s, ",
                                 reference);
    }
    if (total->baseline > 0 && total->ranks > 0 && used < size) {
        used +=
            (size_t)snprintf(text + used, size - used, "baseline %s%s, ", baseline,
                             total->reference > 0 && !total->reference_spread ? " after it" : "");
    }
    if (used < size && total->query_block > 0) {
        used += (size_t)snprintf(text + used, size - used,
                                 "attention by query blocks of %lld tokens over the ranks: %lld "
                                 "x %s",
                                 (long long)total->query_block, (long long)total->ranks,
                                 implementation);
    } else if (used < size && total->ranks == 0) { /* the spread reference's round */
        used += (size_t)snprintf(text + used, size - used, "no implementation running");
    } else if (used < size) {
        used += (size_t)snprintf(text + used, size - used, "implementation %lld x %s",
                                 (long long)total->ranks, implementation);
    }
    if (used < size && total->ranks > 0 && total->implementation_known &&
        total->implementation_own > 0) {
        used += (size_t)snprintf(text + used, size - used, " (%s's own %s)", name, own);
    } else if (used < size && !total->implementation_known) {
        used += (size_t)snprintf(text + used, size - used,
                                 " (%s's own share unknown: it declares no estimate)", name);
    }
    if (total->harness > 0 && used < size) {
        used += (size_t)snprintf(text + used, size - used, ", harness %s", harness);
    }
    if (total->others * 100 >= total->bytes && total->others > 0 && used < size) { /* >= 1 % */
        snprintf(text + used, size - used, ", held from other items %s", others);
    }
}

/* Marks the attention-level items over the limit to run by query blocks of
 * ATTENTION_STREAM_BLOCK tokens (memory_check_plan). Returns how many were marked. */
static int64_t stream_long_attention_items(run_plan *plan, const memory_total *totals,
                                           const memory_limit *limit,
                                           const memory_setting *setting) {
    int64_t marked = 0;
    for (int64_t i = 0; i < plan->item_count; i++) {
        run_plan_item *item = &plan->items[i];
        const cpparity_case *c = plan->cases[item->case_index];
        if (c->level != CPPARITY_LEVEL_ATTENTION || item->query_block > 0 || !totals[i].planned ||
            totals[i].bytes <= limit->bytes) {
            continue;
        }
        /* only where it holds less: a sequence shorter than a block gains nothing */
        const int64_t ranks = setting->ranks > 0 ? setting->ranks : 1;
        const int64_t share = attention_stream_memory(c, ATTENTION_STREAM_BLOCK, ranks);
        int64_t held = 0;
        if (share >= 0 &&
            cpparity_multiply_checked(share, setting->ranks_are_processes ? 1 : ranks, &held) &&
            held < totals[i].bytes) {
            item->query_block = ATTENTION_STREAM_BLOCK;
            marked++;
        }
    }
    return marked;
}

/* Marks the cp = 1 items over the limit whose case's other items (same dtype) all fit: they are
 * left out (memory_check_plan). Returns how many were marked. */
static int64_t skip_whole_sequence_items(run_plan *plan, const memory_total *totals,
                                         const memory_limit *limit) {
    int64_t marked = 0;
    for (int64_t i = 0; i < plan->item_count; i++) {
        run_plan_item *item = &plan->items[i];
        if (!item->is_baseline || !totals[i].planned || totals[i].bytes <= limit->bytes) {
            continue;
        }
        bool others = false, others_fit = true;
        for (int64_t j = 0; j < plan->item_count; j++) {
            const run_plan_item *other = &plan->items[j];
            if (j != i && other->case_index == item->case_index && other->dtype == item->dtype &&
                totals[j].planned) {
                others = true;
                others_fit &= totals[j].bytes <= limit->bytes;
            }
        }
        if (!others || !others_fit) {
            continue; /* nothing would run at cp > 1 either: refused as any item over the limit */
        }
        char needed[32], allowed[32];
        memory_size_format(totals[i].bytes, needed, sizeof needed);
        memory_size_format(limit->bytes, allowed, sizeof allowed);
        item->memory_skipped = true;
        item->runnable = false;
        snprintf(item->not_run_reason, sizeof item->not_run_reason,
                 "cp 1 not run: needs about %s per process, over the limit of %s (%.120s)", needed,
                 allowed, limit->source);
        marked++;
    }
    return marked;
}

cpparity_status memory_check_plan(run_plan *plan, const run_options *options,
                                  const cpparity_implementation *implementation,
                                  const cpparity_attention_kernel *kernel, cpparity_error *error) {
    const memory_setting setting = memory_setting_for(options, plan, implementation, kernel);
    memory_total *totals = calloc((size_t)plan->item_count + 1, sizeof *totals);
    if (totals == NULL) {
        return cpparity_error_set(error, CPPARITY_ERROR_RUNTIME,
                                  "out of memory (estimating the memory of the run)");
    }
    memory_discrimination discrimination;
    int64_t overflow = -1;
    char what[MEMORY_TEXT] = "";
    memory_limit limit;
    memory_limit_resolve(options->max_memory, setting.ranks_are_processes, "", &limit);
    for (int64_t i = 0; i < plan->item_count; i++) { /* --query-block: every attention item */
        const bool attention =
            plan->cases[plan->items[i].case_index]->level == CPPARITY_LEVEL_ATTENTION;
        plan->items[i].query_block = attention ? options->query_block : 0;
    }
    cpparity_status status =
        memory_estimate_job(plan->cases, plan->case_count, plan->items, plan->item_count, &setting,
                            totals, &discrimination, &overflow, what, sizeof what, error);
    /* an attention-level item too long to hold whole runs by query blocks over the ranks */
    if (status == CPPARITY_OK && overflow < 0 &&
        stream_long_attention_items(plan, totals, &limit, &setting)) {
        memset(totals, 0, (size_t)plan->item_count * sizeof *totals);
        status = memory_estimate_job(plan->cases, plan->case_count, plan->items, plan->item_count,
                                     &setting, totals, &discrimination, &overflow, what,
                                     sizeof what, error);
    }
    /* a case whose whole sequence does not fit one rank is still run at cp > 1, without cp 1 */
    if (status == CPPARITY_OK && overflow < 0 && skip_whole_sequence_items(plan, totals, &limit)) {
        memset(totals, 0, (size_t)plan->item_count * sizeof *totals);
        status = memory_estimate_job(plan->cases, plan->case_count, plan->items, plan->item_count,
                                     &setting, totals, &discrimination, &overflow, what,
                                     sizeof what, error);
    }
    if (status == CPPARITY_OK && overflow >= 0) {
        const run_plan_item *item = &plan->items[overflow];
        const cpparity_case *c = plan->cases[item->case_index];
        status = cpparity_error_set(error, CPPARITY_ERROR_INPUT,
                                    "%s:%lld: case '%s': cp %lld %s: its sizes overflow, so it "
                                    "cannot be held: %s",
                                    plan->case_suite[item->case_index], (long long)c->line, c->name,
                                    (long long)item->cp, cpparity_dtype_name(item->dtype), what);
    }
    int64_t worst = -1, over = 0;
    for (int64_t i = 0; status == CPPARITY_OK && i < plan->item_count; i++) {
        if (totals[i].planned && totals[i].bytes > limit.bytes) {
            over++;
            worst = worst < 0 || totals[i].bytes > totals[worst].bytes ? i : worst;
        }
    }
    char needed[32], allowed[32], parts[512], more[96] = "";
    memory_size_format(limit.bytes, allowed, sizeof allowed);
    if (status == CPPARITY_OK && discrimination.case_index >= 0 &&
        discrimination.bytes > limit.bytes &&
        (worst < 0 || discrimination.bytes > totals[worst].bytes)) {
        const cpparity_case *c = plan->cases[discrimination.case_index];
        char rerun[32], others[32];
        memory_size_format(discrimination.bytes, needed, sizeof needed);
        memory_size_format(discrimination.rerun, rerun, sizeof rerun);
        memory_size_format(discrimination.bytes - discrimination.rerun, others, sizeof others);
        status = cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "%s:%lld: case '%s': the discrimination check (the float64 reference rerun with a "
            "mask feature off) needs about %s per process (the rerun %s, held from the items "
            "%s) but the limit is %s (%s)",
            plan->case_suite[discrimination.case_index], (long long)c->line, c->name, needed, rerun,
            others, allowed, limit.source);
    } else if (status == CPPARITY_OK && worst >= 0) {
        const run_plan_item *item = &plan->items[worst];
        const cpparity_case *c = plan->cases[item->case_index];
        memory_size_format(totals[worst].bytes, needed, sizeof needed);
        describe_parts(&totals[worst],
                       implementation != NULL ? implementation->name : "the implementation", parts,
                       sizeof parts);
        if (over > 1) {
            snprintf(more, sizeof more, "; %lld other planned item%s over the limit too",
                     (long long)(over - 1), over == 2 ? " is" : "s are");
        }
        status = cpparity_error_set(
            error, CPPARITY_ERROR_INPUT,
            "%s:%lld: case '%s': cp %lld %s needs about %s per process (%s) but the limit is %s "
            "(%s)%s",
            plan->case_suite[item->case_index], (long long)c->line, c->name, (long long)item->cp,
            cpparity_dtype_name(item->dtype), needed, parts, allowed, limit.source, more);
    }
    free(totals);
    return status;
}
