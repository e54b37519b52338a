/*
 * threadpool.h — the CPU backend's persistent worker threads.
 *
 * A forward pass issues a few hundred small parallel operations per token,
 * so starting threads per operation (or even waking them through the
 * kernel each time) would cost more than the work. The pool keeps
 * n_threads - 1 workers alive for the life of a context. Workers spin
 * briefly on an atomic generation counter before sleeping on a condition
 * variable, so back-to-back operations cost a cache-line transfer, not a
 * system call. POSIX threads or Win32 threads.
 *
 * Participation is not guaranteed: moe_threadpool_run runs the task on the
 * caller and on every worker that joins before the caller has finished its
 * own call; a worker that is descheduled (another process has the core)
 * simply misses the task. So a task must share its work out through
 * counters (any subset of threads, the caller alone included, completes
 * it) and never wait for a particular thread. This keeps a busy machine
 * from turning every synchronisation point into a wait for the scheduler.
 */
#ifndef MOE_THREADPOOL_H
#define MOE_THREADPOOL_H

#include "moe.h"

/* A task: called on the calling thread (ith 0) and on each worker that
 * joins (ith 1..nth-1, each at most once per run). */
typedef void (*moe_task_fn)(void *arg, int ith, int nth);

typedef struct moe_threadpool moe_threadpool;

/* n_threads >= 1 (1 = no workers, tasks run on the caller). */
moe_status moe_threadpool_new(int n_threads, moe_threadpool **out, moe_err *err);
void       moe_threadpool_free(moe_threadpool *pool);
int        moe_threadpool_size(const moe_threadpool *pool);

/* Runs fn(arg, ith, nth) on the caller and the workers that join in time;
 * returns when the caller's call has returned and every worker that joined
 * has left, so no worker touches `arg` afterwards. Not reentrant: call
 * from one thread at a time, never from inside a task. */
void moe_threadpool_run(moe_threadpool *pool, moe_task_fn fn, void *arg);

/* One poll of a spin-wait inside a task: a pause, and every 32nd call a
 * yield of the core (so a waiting thread does not starve the one it waits
 * for when the machine is oversubscribed). */
void moe_threadpool_relax(unsigned i);

/* Number of logical processors this process may use (at least 1). */
int moe_cpu_count(void);

#endif /* MOE_THREADPOOL_H */
