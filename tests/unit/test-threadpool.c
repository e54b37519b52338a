/*
 * test-threadpool.c — the CPU backend's persistent pool under its actual
 * contract (threadpool.h): the caller always runs the task, workers join
 * when they are in time, each thread at most once per run, and no worker
 * is inside a task (or enters one) after moe_threadpool_run returned.
 * Work shared through an atomic counter is done exactly once whoever
 * joins. Pools of several sizes, runs back to back and after the workers
 * fell asleep.
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

#define N_ITEMS 97

typedef struct task {
    atomic_int  alive;      /* 1 while moe_threadpool_run is running it */
    atomic_int  inside;     /* threads inside the task                  */
    atomic_int  seen_mask;  /* bit ith: that thread ran this run        */
    atomic_int  bad;
    atomic_long next;
    atomic_int  hits[N_ITEMS];
    atomic_int  caller_ran;
} task;

static void work_task(void *arg, int ith, int nth)
{
    task *t = arg;
    atomic_fetch_add(&t->inside, 1);
    if (!atomic_load(&t->alive) || ith < 0 || ith >= nth || ith >= 31)
        atomic_store(&t->bad, 1);
    else if (atomic_fetch_or(&t->seen_mask, 1 << ith) & (1 << ith))
        atomic_store(&t->bad, 2); /* same thread twice in one run */
    if (ith == 0)
        atomic_store(&t->caller_ran, 1);
    long i;
    while ((i = atomic_fetch_add(&t->next, 1)) < N_ITEMS) {
        /* a little work per item, so workers have time to join */
        volatile unsigned x = (unsigned)i;
        for (int k = 0; k < 2000; k++)
            x = x * 1664525u + 1013904223u;
        atomic_fetch_add(&t->hits[i], 1);
    }
    atomic_fetch_sub(&t->inside, 1);
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
        int joined_max = 0, bad = 0, lost = 0, after = 0;
        for (int run = 1; run <= 3000; run++) {
            memset(&t, 0, sizeof t);
            atomic_store(&t.alive, 1);
            moe_threadpool_run(pool, work_task, &t);
            atomic_store(&t.alive, 0);
            if (atomic_load(&t.inside) != 0)
                after++;
            if (atomic_load(&t.bad) || !atomic_load(&t.caller_ran))
                bad++;
            for (int i = 0; i < N_ITEMS; i++)
                if (atomic_load(&t.hits[i]) != 1)
                    lost++;
            int m = atomic_load(&t.seen_mask), c = 0;
            for (; m; m &= m - 1)
                c++;
            joined_max = c > joined_max ? c : joined_max;
            if (run == 1500)
                sleep_ms(30); /* let the workers fall asleep */
        }
        CHECK_MSG(bad == 0, "pool of %d: %d runs saw a bad thread index or a second entry", n, bad);
        CHECK_MSG(lost == 0, "pool of %d: %d items not done exactly once", n, lost);
        CHECK_MSG(after == 0, "pool of %d: a worker was inside after run returned (%d)", n, after);
        CHECK_MSG(joined_max <= n, "pool of %d: %d threads in one run", n, joined_max);
        CHECK_MSG(n == 1 || joined_max >= 2, "pool of %d: no worker ever joined", n);
        if (n > 1)
            fprintf(stderr, "pool of %d: at most %d threads joined a run\n", n, joined_max);
        moe_threadpool_free(pool);
    }
    TEST_DONE();
}
