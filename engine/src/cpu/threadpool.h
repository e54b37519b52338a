/*
 * threadpool.h — the CPU backend's persistent worker threads.
 *
 * A forward pass issues a few hundred small parallel operations per token,
 * so starting threads per operation (or even waking them through the
 * kernel each time) would cost more than the work. The pool keeps
 * n_threads - 1 workers alive for the life of a context; moe_threadpool_run
 * hands every thread the same task and returns when all have finished.
 * Workers spin briefly on an atomic generation counter before sleeping on
 * a condition variable, so back-to-back operations cost a cache-line
 * transfer, not a system call. POSIX threads or Win32 threads.
 */
#ifndef MOE_THREADPOOL_H
#define MOE_THREADPOOL_H

#include "moe.h"

/* A task: called once on every thread with ith in [0, nth). The calling
 * thread of moe_threadpool_run is thread 0. */
typedef void (*moe_task_fn)(void *arg, int ith, int nth);

typedef struct moe_threadpool moe_threadpool;

/* n_threads >= 1 (1 = no workers, tasks run on the caller). */
moe_status moe_threadpool_new(int n_threads, moe_threadpool **out, moe_err *err);
void       moe_threadpool_free(moe_threadpool *pool);
int        moe_threadpool_size(const moe_threadpool *pool);

/* Runs fn(arg, ith, nth) on all threads; returns after all returned. Not
 * reentrant: call from one thread at a time, never from inside a task. */
void moe_threadpool_run(moe_threadpool *pool, moe_task_fn fn, void *arg);

/* Inside a task only: waits until every thread of the pool has reached
 * the barrier. All threads must call it the same number of times. */
void moe_threadpool_barrier(moe_threadpool *pool);

/* Number of logical processors this process may use (at least 1). */
int moe_cpu_count(void);

#endif /* MOE_THREADPOOL_H */
