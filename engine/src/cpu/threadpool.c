/*
 * threadpool.c — persistent worker threads for the CPU backend (see
 * threadpool.h for why). One generation counter announces a new task;
 * workers spin on it for a bounded number of polls, then sleep on a
 * condition variable. The main thread, after doing its own share, spins
 * (yielding) until the done-counter reaches nth - 1. The barrier inside
 * tasks is a sense-reversing counter barrier on atomics.
 *
 * Lost-wakeup argument: a worker re-checks the generation under the mutex
 * before it waits, and the main thread bumps the generation before taking
 * the same mutex to broadcast; so either the worker sees the new value or
 * it is already waiting when the broadcast comes.
 */
#include "threadpool.h"
#include "util.h"

#include <stdatomic.h>
#include <stdlib.h>

#ifdef _WIN32
#include <windows.h>
typedef HANDLE             tp_thread;
typedef SRWLOCK            tp_mutex;
typedef CONDITION_VARIABLE tp_cond;
#else
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
typedef pthread_t       tp_thread;
typedef pthread_mutex_t tp_mutex;
typedef pthread_cond_t  tp_cond;
#endif

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <immintrin.h>
#define tp_pause() _mm_pause()
#elif defined(__aarch64__)
#define tp_pause() __asm__ __volatile__("yield")
#else
#define tp_pause() ((void)0)
#endif

/* Polls before a worker goes to sleep: long enough to bridge the gap
 * between two operations of one forward pass (microseconds), short
 * enough that an idle context stops burning a core within about a
 * millisecond. */
#define TP_SPIN_POLLS 40000

typedef struct tp_worker {
    struct moe_threadpool *pool;
    int                    ith;
    tp_thread              thread;
} tp_worker;

struct moe_threadpool {
    int         n_threads;
    tp_worker  *workers; /* [n_threads - 1] */

    moe_task_fn task_fn;
    void       *task_arg;
    atomic_int  generation; /* bumped once per run           */
    atomic_int  n_done;     /* workers finished this run     */
    atomic_bool stop;

    tp_mutex    mutex;
    tp_cond     cond;
    int         n_sleeping; /* guarded by mutex              */

    atomic_int  barrier_count;
    atomic_int  barrier_phase;
};

static void tp_lock(tp_mutex *m)
{
#ifdef _WIN32
    AcquireSRWLockExclusive(m);
#else
    pthread_mutex_lock(m);
#endif
}

static void tp_unlock(tp_mutex *m)
{
#ifdef _WIN32
    ReleaseSRWLockExclusive(m);
#else
    pthread_mutex_unlock(m);
#endif
}

static void tp_wait(tp_cond *c, tp_mutex *m)
{
#ifdef _WIN32
    SleepConditionVariableSRW(c, m, INFINITE, 0);
#else
    pthread_cond_wait(c, m);
#endif
}

static void tp_broadcast(tp_cond *c)
{
#ifdef _WIN32
    WakeAllConditionVariable(c);
#else
    pthread_cond_broadcast(c);
#endif
}

static void tp_yield(void)
{
#ifdef _WIN32
    SwitchToThread();
#else
    sched_yield();
#endif
}

/* One poll of a spin loop: mostly a pause, but every 32nd poll gives the
 * core away, so that when there are more threads than free cores (the
 * machine is busy, or the caller asked for too many) the thread being
 * waited for gets to run instead of the spinner burning its time slice. */
static void tp_relax(unsigned i)
{
    if ((i & 31) == 31)
        tp_yield();
    else
        tp_pause();
}

int moe_cpu_count(void)
{
#ifdef _WIN32
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

/* Waits until the generation differs from `seen` or the pool stops;
 * returns the new generation. */
static int tp_wait_generation(moe_threadpool *pool, int seen)
{
    for (unsigned i = 0; i < TP_SPIN_POLLS; i++) {
        int g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&pool->stop, memory_order_relaxed))
            return g;
        tp_relax(i);
    }
    tp_lock(&pool->mutex);
    int g;
    while ((g = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&pool->stop, memory_order_relaxed)) {
        pool->n_sleeping++;
        tp_wait(&pool->cond, &pool->mutex);
        pool->n_sleeping--;
    }
    tp_unlock(&pool->mutex);
    return g;
}

#ifdef _WIN32
static DWORD WINAPI tp_worker_main(LPVOID p)
#else
static void *tp_worker_main(void *p)
#endif
{
    tp_worker *w = p;
    moe_threadpool *pool = w->pool;
    int seen = 0;
    for (;;) {
        seen = tp_wait_generation(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        pool->task_fn(pool->task_arg, w->ith, pool->n_threads);
        atomic_fetch_add_explicit(&pool->n_done, 1, memory_order_acq_rel);
    }
#ifdef _WIN32
    return 0;
#else
    return NULL;
#endif
}

static void tp_wake_all(moe_threadpool *pool)
{
    tp_lock(&pool->mutex);
    if (pool->n_sleeping > 0)
        tp_broadcast(&pool->cond);
    tp_unlock(&pool->mutex);
}

moe_status moe_threadpool_new(int n_threads, moe_threadpool **out, moe_err *err)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "thread count %d out of range 1..1024", n_threads);
    moe_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return moe_fail(err, MOE_ERR_NOMEM, "thread pool: out of memory");
    pool->n_threads = n_threads;
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->n_done, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->barrier_count, 0);
    atomic_init(&pool->barrier_phase, 0);
#ifdef _WIN32
    InitializeSRWLock(&pool->mutex);
    InitializeConditionVariable(&pool->cond);
#else
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->cond, NULL);
#endif
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            moe_threadpool_free(pool);
            return moe_fail(err, MOE_ERR_NOMEM, "thread pool: out of memory");
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        tp_worker *w = &pool->workers[i];
        w->pool = pool;
        w->ith = i + 1;
#ifdef _WIN32
        w->thread = CreateThread(NULL, 0, tp_worker_main, w, 0, NULL);
        bool ok = w->thread != NULL;
#else
        bool ok = pthread_create(&w->thread, NULL, tp_worker_main, w) == 0;
#endif
        if (!ok) {
            /* Only the first i workers exist; free() joins exactly those. */
            pool->n_threads = i + 1;
            moe_threadpool_free(pool);
            return moe_fail(err, MOE_ERR_NOMEM, "thread pool: cannot start thread %d of %d", i + 1, n_threads);
        }
    }
    *out = pool;
    return MOE_OK;
}

void moe_threadpool_free(moe_threadpool *pool)
{
    if (!pool)
        return;
    atomic_store_explicit(&pool->stop, true, memory_order_release);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_acq_rel);
    tp_lock(&pool->mutex);
    tp_broadcast(&pool->cond);
    tp_unlock(&pool->mutex);
    for (int i = 0; pool->workers && i < pool->n_threads - 1; i++) {
#ifdef _WIN32
        WaitForSingleObject(pool->workers[i].thread, INFINITE);
        CloseHandle(pool->workers[i].thread);
#else
        pthread_join(pool->workers[i].thread, NULL);
#endif
    }
#ifndef _WIN32
    pthread_mutex_destroy(&pool->mutex);
    pthread_cond_destroy(&pool->cond);
#endif
    free(pool->workers);
    free(pool);
}

int moe_threadpool_size(const moe_threadpool *pool)
{
    return pool ? pool->n_threads : 1;
}

void moe_threadpool_run(moe_threadpool *pool, moe_task_fn fn, void *arg)
{
    if (pool->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->task_fn = fn;
    pool->task_arg = arg;
    atomic_store_explicit(&pool->n_done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_acq_rel);
    tp_wake_all(pool);

    fn(arg, 0, pool->n_threads);

    int need = pool->n_threads - 1;
    for (unsigned spins = 0;
         atomic_load_explicit(&pool->n_done, memory_order_acquire) < need; spins++)
        tp_relax(spins);
}

void moe_threadpool_barrier(moe_threadpool *pool)
{
    int nth = pool->n_threads;
    if (nth == 1)
        return;
    int phase = atomic_load_explicit(&pool->barrier_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&pool->barrier_count, 1, memory_order_acq_rel) == nth - 1) {
        atomic_store_explicit(&pool->barrier_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool->barrier_phase, 1, memory_order_acq_rel);
        return;
    }
    for (unsigned spins = 0;
         atomic_load_explicit(&pool->barrier_phase, memory_order_acquire) == phase; spins++)
        tp_relax(spins);
}
