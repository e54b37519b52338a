/*
 * quantize-model.c — whole-model quantisation: read a GGUF model, write a
 * copy whose tensors are converted to a target type (moe_model_quantize in
 * moe.h). What type each tensor gets is quant-plan.c's business; this file
 * streams the conversion.
 *
 * Memory: the input is mmapped by the GGUF reader, the output written in
 * streaming mode, so at any time we hold one converted tensor plus one F32
 * row per worker thread, never the model. Tensors already in their chosen
 * type are handed to the writer straight from the mapping.
 *
 * Atomicity: the writer produces "<out>.part" (itself via a ".tmp" it
 * renames only when complete), and only after both files are closed is
 * .part renamed over <out>. The second step exists for out == in: Windows
 * cannot replace a file that is still mapped, so the input must be
 * released first. Every error path removes what was written, so a failure
 * never leaves a half-written model where a loader could find it.
 *
 * Threads: each chunk of rows of a tensor is split among n_threads workers
 * (rows are independent); the calling thread waits, reports progress
 * between chunks, and is the only one that touches the writer.
 */
#include "platform.h"
#include "quant-plan.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <pthread.h>
#endif

#define CHUNK_ELEMS_PER_THREAD (INT64_C(1) << 21) /* ~8 MB of F32 per worker */
#define MAX_THREADS 256

/* Rows [row_begin, row_end) of one tensor, converted by one worker. */
typedef struct convert_job {
    const uint8_t *src;
    moe_type       src_type;
    size_t         src_row_bytes;
    uint8_t       *dst;
    moe_type       dst_type;
    size_t         dst_row_bytes;
    int64_t        ne0;
    int64_t        row_begin, row_end;
    float         *row;      /* ne0 floats, owned by the driver */
    moe_status     status;
    int64_t        bad_row;  /* first row that failed, when status != OK */
} convert_job;

static void convert_rows(convert_job *j)
{
    j->status = MOE_OK;
    for (int64_t r = j->row_begin; r < j->row_end; r++) {
        moe_status st = moe_dequantize_row(j->src_type, j->src + (size_t)r * j->src_row_bytes,
                                           j->row, j->ne0);
        if (st == MOE_OK)
            st = moe_quantize_row(j->dst_type, j->row, j->dst + (size_t)r * j->dst_row_bytes,
                                  j->ne0);
        if (st != MOE_OK) {
            j->status = st;
            j->bad_row = r;
            return;
        }
    }
}

#ifdef _WIN32
typedef HANDLE worker_thread;
static DWORD WINAPI worker_main(LPVOID arg)
{
    convert_rows(arg);
    return 0;
}
static bool worker_start(worker_thread *t, convert_job *j)
{
    *t = CreateThread(NULL, 0, worker_main, j, 0, NULL);
    return *t != NULL;
}
static void worker_join(worker_thread t)
{
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}
#else
typedef pthread_t worker_thread;
static void *worker_main(void *arg)
{
    convert_rows(arg);
    return NULL;
}
static bool worker_start(worker_thread *t, convert_job *j)
{
    return pthread_create(t, NULL, worker_main, j) == 0;
}
static void worker_join(worker_thread t)
{
    pthread_join(t, NULL);
}
#endif

/* ---- the driver ------------------------------------------------------------ */

void moe_quantize_params_init(moe_quantize_params *params, moe_type type)
{
    memset(params, 0, sizeof *params);
    params->type = type;
    params->n_threads = 1;
}

moe_status moe_model_quantize(const char *in_path, const char *out_path,
                              moe_type type, moe_err *err)
{
    moe_quantize_params params;
    moe_quantize_params_init(&params, type);
    return moe_model_quantize_ex(in_path, out_path, &params, err);
}

/* Everything one run owns, so one cleanup path frees it all. */
typedef struct quant_run {
    const moe_quantize_params *params;
    const char      *in_path;
    moe_gguf        *gguf;
    moe_gguf_writer *writer;
    moe_type        *types;     /* chosen type per tensor */
    uint8_t         *out_buf;   /* one converted tensor */
    float           *rows;      /* n_threads rows of rows_stride floats */
    int64_t          rows_stride;
    int              n_threads;
    int64_t          done, total;
} quant_run;

/* Sets up the plan from the model's hyperparameters and picks every
 * tensor's type. */
static moe_status plan_types(quant_run *run, moe_err *err)
{
    const moe_gguf *g = run->gguf;
    const int64_t n = moe_gguf_n_tensors(g);
    const char *arch = moe_gguf_str_or(g, "general.architecture", "");
    char key[256];
    snprintf(key, sizeof key, "%s.block_count", arch);
    uint64_t n_layer = moe_gguf_u64_or(g, key, 0);
    snprintf(key, sizeof key, "%s.expert_count", arch);
    const uint64_t n_expert = moe_gguf_u64_or(g, key, 0);
    if (n_layer == 0 || n_layer > 1000000) {
        n_layer = 0; /* not stated: 1 + the largest blk.N */
        for (int64_t i = 0; i < n; i++) {
            int layer;
            if (sscanf(moe_gguf_tensor_at(g, i)->name, "blk.%d.", &layer) == 1 &&
                layer >= 0 && (uint64_t)layer + 1 > n_layer && layer < 1000000)
                n_layer = (uint64_t)layer + 1;
        }
    }
    moe_quant_plan plan;
    if (!moe_quant_plan_init(&plan, run->params->type, (int)n_layer,
                             n_expert > 1000000 ? 0 : (int)n_expert))
        return moe_fail(err, MOE_ERR_UNSUPPORTED, "cannot quantise a model to %s",
                        moe_type_name(run->params->type) ? moe_type_name(run->params->type)
                                                         : "an unknown type");
    for (int64_t i = 0; i < n; i++)
        moe_quant_plan_count(&plan, moe_gguf_tensor_at(g, i)->name);
    run->types = malloc((size_t)(n > 0 ? n : 1) * sizeof *run->types);
    if (run->types == NULL)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", run->in_path);
    for (int64_t i = 0; i < n; i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        run->types[i] = moe_quant_plan_pick(&plan, t->name, t->ne);
    }

    moe_gguf_writer *w = run->writer;
    for (int64_t i = 0; i < moe_gguf_n_kv(g); i++) {
        if (strncmp(moe_gguf_key(g, i), "split.", 6) == 0)
            continue; /* the output is one file */
        moe_status st = moe_gguf_writer_copy_kv(w, g, i);
        if (st != MOE_OK)
            return moe_fail(err, st, "%s: cannot copy key '%s'", run->in_path, moe_gguf_key(g, i));
    }
    moe_status st = moe_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (st == MOE_OK)
        st = moe_gguf_writer_set_u32(w, "general.file_type", moe_quant_plan_ftype(&plan));
    for (int64_t i = 0; i < n && st == MOE_OK; i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        st = moe_gguf_writer_add_tensor(w, t->name, run->types[i], t->n_dims, t->ne, NULL);
        if (st != MOE_OK)
            return moe_fail(err, st, "%s: cannot declare tensor '%s'", run->in_path, t->name);
    }
    if (st != MOE_OK)
        return moe_fail(err, st, "%s: cannot set general.file_type", run->in_path);
    return MOE_OK;
}

/* Sizes the shared buffers: the largest converted tensor and the longest
 * row per thread. Also sums the progress total. */
static moe_status alloc_buffers(quant_run *run, moe_err *err)
{
    const moe_gguf *g = run->gguf;
    size_t max_out = 1;
    int64_t max_ne0 = 1;
    for (int64_t i = 0; i < moe_gguf_n_tensors(g); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(g, i);
        const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        run->total += t->ne[0] * rows;
        if (run->types[i] == t->type)
            continue; /* copied from the mapping */
        uint64_t bytes;
        if (!moe_mul_u64(moe_type_row_bytes(run->types[i], t->ne[0]), (uint64_t)rows, &bytes) ||
            bytes > SIZE_MAX)
            return moe_fail(err, MOE_ERR_RANGE, "%s: tensor '%s' is too large", run->in_path, t->name);
        max_out = bytes > max_out ? (size_t)bytes : max_out;
        max_ne0 = t->ne[0] > max_ne0 ? t->ne[0] : max_ne0;
    }
    run->out_buf = malloc(max_out);
    run->rows = malloc((size_t)run->n_threads * (size_t)max_ne0 * sizeof(float));
    if (run->out_buf == NULL || run->rows == NULL)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory for a %llu-byte tensor buffer",
                        run->in_path, (unsigned long long)max_out);
    run->rows_stride = max_ne0;
    return MOE_OK;
}

/* Converts tensor i into run->out_buf, chunk by chunk, reporting progress. */
static moe_status convert_tensor(quant_run *run, int64_t i, moe_err *err)
{
    const moe_gguf_tensor *t = moe_gguf_tensor_at(run->gguf, i);
    const int64_t ne0 = t->ne[0], n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    convert_job jobs[MAX_THREADS];
    worker_thread threads[MAX_THREADS];
    bool started[MAX_THREADS];
    /* ne0 >= 1: the reader rejects empty dimensions. */
    const int64_t rows_per_thread = ne0 > 0 && CHUNK_ELEMS_PER_THREAD / ne0 > 0
                                  ? CHUNK_ELEMS_PER_THREAD / ne0 : 1;

    for (int64_t r0 = 0; r0 < n_rows;) {
        int n_jobs = 0;
        for (; n_jobs < run->n_threads && r0 < n_rows; n_jobs++) {
            const int64_t r1 = n_rows - r0 > rows_per_thread ? r0 + rows_per_thread : n_rows;
            jobs[n_jobs] = (convert_job){
                .src = t->data, .src_type = t->type,
                .src_row_bytes = moe_type_row_bytes(t->type, ne0),
                .dst = run->out_buf, .dst_type = run->types[i],
                .dst_row_bytes = moe_type_row_bytes(run->types[i], ne0),
                .ne0 = ne0, .row_begin = r0, .row_end = r1,
                .row = run->rows + (size_t)n_jobs * (size_t)run->rows_stride,
                .status = MOE_OK,
            };
            r0 = r1;
        }
        /* Job 0 runs on this thread; a worker that cannot start runs here
         * too, after the others, so a thread shortage only costs speed. */
        for (int k = 1; k < n_jobs; k++)
            started[k] = worker_start(&threads[k], &jobs[k]);
        convert_rows(&jobs[0]);
        for (int k = 1; k < n_jobs; k++) {
            if (started[k])
                worker_join(threads[k]);
            else
                convert_rows(&jobs[k]);
        }
        for (int k = 0; k < n_jobs; k++) {
            if (jobs[k].status != MOE_OK)
                return moe_fail(err, jobs[k].status,
                                "%s: tensor '%s' row %" PRId64 ": cannot convert %s to %s: %s",
                                run->in_path, t->name, jobs[k].bad_row,
                                moe_type_name(t->type), moe_type_name(run->types[i]),
                                moe_status_str(jobs[k].status));
            run->done += (jobs[k].row_end - jobs[k].row_begin) * ne0;
        }
        if (run->params->progress)
            run->params->progress(run->params->progress_user, run->done, run->total);
    }
    return MOE_OK;
}

static moe_status write_tensors(quant_run *run, moe_err *err)
{
    for (int64_t i = 0; i < moe_gguf_n_tensors(run->gguf); i++) {
        const moe_gguf_tensor *t = moe_gguf_tensor_at(run->gguf, i);
        const void *data = t->data;
        if (run->types[i] != t->type) {
            moe_status st = convert_tensor(run, i, err);
            if (st != MOE_OK)
                return st;
            data = run->out_buf;
        } else {
            run->done += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
            if (run->params->progress)
                run->params->progress(run->params->progress_user, run->done, run->total);
        }
        moe_status st = moe_gguf_writer_write_tensor_data(run->writer, i, data, err);
        if (st != MOE_OK)
            return st;
    }
    return MOE_OK;
}

moe_status moe_model_quantize_ex(const char *in_path, const char *out_path,
                                 const moe_quantize_params *params, moe_err *err)
{
    if (in_path == NULL || out_path == NULL || params == NULL)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_model_quantize: NULL argument");
    quant_run run = { .params = params, .in_path = in_path };
    run.n_threads = params->n_threads < 1 ? 1 : params->n_threads;
    if (run.n_threads > MAX_THREADS)
        run.n_threads = MAX_THREADS;

    const size_t out_len = strlen(out_path);
    char *part_path = malloc(out_len + sizeof ".part");
    if (part_path == NULL)
        return moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", out_path);
    memcpy(part_path, out_path, out_len);
    memcpy(part_path + out_len, ".part", sizeof ".part");

    bool begun = false;
    moe_status st = moe_gguf_open(in_path, &run.gguf, err);
    if (st == MOE_OK) {
        run.writer = moe_gguf_writer_new();
        if (run.writer == NULL)
            st = moe_fail(err, MOE_ERR_NOMEM, "%s: out of memory", in_path);
    }
    if (st == MOE_OK)
        st = plan_types(&run, err);
    if (st == MOE_OK)
        st = alloc_buffers(&run, err);
    if (st == MOE_OK) {
        st = moe_gguf_writer_begin(run.writer, part_path, err);
        begun = st == MOE_OK;
    }
    if (st == MOE_OK)
        st = write_tensors(&run, err);
    if (st == MOE_OK)
        st = moe_gguf_writer_finish(run.writer, err);

    /* Close both files before renaming: Windows cannot replace a file that
     * is open or mapped (out_path may be in_path). */
    moe_gguf_writer_free(run.writer);
    moe_gguf_free(run.gguf);
    free(run.types);
    free(run.out_buf);
    free(run.rows);
    if (st == MOE_OK)
        st = moe_platform_rename_file(part_path, out_path, err);
    if (st != MOE_OK && begun)
        moe_platform_remove_file(part_path);
    free(part_path);
    return st;
}
