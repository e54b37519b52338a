/*
 * test-threadpool.c — the CPU backend's persistent pool: every thread runs
 * each task exactly once, runs are separated (no thread still in run k
 * when run k+1 starts), barriers inside a task order phases, and pools of
 * several sizes start and stop cleanly (also after sleeping idle).
 */
#include "cpu/threadpool.h"
#include "test.h"

#include <stdatomic.h>

#ifdef _WIN32
#include <windows.h>
static void sleep_ms(int ms) { Sleep((DWORD)ms); }
#else
#include <time.h>
static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
#endif

typedef struct task {
    moe_threadpool *pool;
    atomic_int      calls;
    int             seen[64];
    int             run;
    int             phase_a[64], phase_b[64];
    int             bad;
} task;

static void count_task(void *arg, int ith, int nth)
{
    task *t = arg;
    atomic_fetch_add(&t->calls, 1);
    if (ith < 0 || ith >= nth || ith >= 64)
        t->bad = 1;
    else
        t->seen[ith] = t->run;
}

/* Phase A writes, barrier, phase B reads every other thread's phase A. */
static void barrier_task(void *arg, int ith, int nth)
{
    task *t = arg;
    for (int round = 1; round <= 50; round++) {
        t->phase_a[ith] = round;
        moe_threadpool_barrier(t->pool);
        for (int j = 0; j < nth; j++)
            if (t->phase_a[j] != round)
                t->bad = 1;
        moe_threadpool_barrier(t->pool);
    }
}

int main(void)
{
    moe_err err = {{0}};
    moe_threadpool *pool = NULL;
    CHECK(moe_threadpool_new(0, &pool, &err) == MOE_ERR_INVALID_ARG);
    CHECK(pool == NULL);
    moe_threadpool_free(NULL);
    CHECK(moe_cpu_count() >= 1);

    int sizes[] = {1, 2, 3, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        CHECK(moe_threadpool_new(n, &pool, &err) == MOE_OK);
        CHECK_EQ_INT(moe_threadpool_size(pool), n);
        static task t;
        memset(&t, 0, sizeof t);
        t.pool = pool;
        for (int run = 1; run <= 2000; run++) {
            t.run = run;
            moe_threadpool_run(pool, count_task, &t);
            for (int i = 0; i < n; i++)
                if (t.seen[i] != run)
                    t.bad = 1;
            if (run == 1000)
                sleep_ms(30); /* let the workers fall asleep */
        }
        CHECK_EQ_INT(atomic_load(&t.calls), 2000 * n);
        moe_threadpool_run(pool, barrier_task, &t);
        CHECK(!t.bad);
        moe_threadpool_free(pool);
    }
    TEST_DONE();
}
