/*
 * test-pool.c - the thread pool that runs the forward pass's loops
 * (kernels/pool.h): every item runs exactly once whatever the thread count
 * and grain, a thread that is not running is never waited for unless it
 * holds a chunk, idle workers go to sleep and wake for the next loop, and
 * the adaptive thread count drops a thread that holds the others back and
 * tries it again after its back-off.  Nothing here asserts a speed: the
 * forced slow thread is a test hook that blocks, or an item function that
 * sleeps only on workers.
 */
#include "test-common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/pool.h"

#define MAX_ITEMS 5000
static _Atomic int hits[MAX_ITEMS];

static void count_items(void *ctx, int64_t i0, int64_t i1)
{
    (void)ctx;
    for (int64_t i = i0; i < i1; i++)
        atomic_fetch_add(&hits[i], 1);
}

static void check_each_once(int64_t n, int64_t grain)
{
    for (int64_t i = 0; i < MAX_ITEMS; i++)
        atomic_store(&hits[i], 0);
    pool_for(n, grain, count_items, NULL);
    for (int64_t i = 0; i < n; i++)
        if (atomic_load(&hits[i]) != 1)
            fail_msg("n %lld grain %lld: item %lld ran %d times", (long long)n, (long long)grain, (long long)i,
                     atomic_load(&hits[i]));
    for (int64_t i = n; i < MAX_ITEMS; i++)
        assert_int_equal(atomic_load(&hits[i]), 0);
}

static void each_item_once(void **state)
{
    (void)state;
    pool_set_adaptive(false);
    const int threads[] = {1, 2, 3, 4, 8};
    const int64_t ns[] = {1, 2, 7, 100, 1000, MAX_ITEMS};
    const int64_t grains[] = {1, 3, 64, 10000};
    for (size_t a = 0; a < sizeof(threads) / sizeof(*threads); a++) {
        assert_int_equal(pool_set_threads(threads[a]), threads[a]);
        assert_int_equal(pool_threads(), threads[a]);
        for (size_t b = 0; b < sizeof(ns) / sizeof(*ns); b++)
            for (size_t c = 0; c < sizeof(grains) / sizeof(*grains); c++)
                for (int rep = 0; rep < 20; rep++)
                    check_each_once(ns[b], grains[c]);
    }
    pool_for(0, 1, count_items, NULL); /* nothing to do: returns */
    pool_for(-5, 1, count_items, NULL);
}

/* A loop started from inside a loop runs in the calling thread. */
static _Atomic int nested_outer;
static void nested_inner(void *ctx, int64_t i0, int64_t i1)
{
    int *who = ctx;
    for (int64_t i = i0; i < i1; i++)
        who[i] = pool_thread_index();
}

static void nested_items(void *ctx, int64_t i0, int64_t i1)
{
    (void)ctx;
    for (int64_t i = i0; i < i1; i++) {
        int who[16];
        pool_for(16, 1, nested_inner, who);
        for (int k = 0; k < 16; k++)
            assert_int_equal(who[k], pool_thread_index());
        atomic_fetch_add(&nested_outer, 1);
    }
}

static void nested_loops_run_inline(void **state)
{
    (void)state;
    pool_set_threads(2);
    atomic_store(&nested_outer, 0);
    pool_for(64, 1, nested_items, NULL);
    assert_int_equal(atomic_load(&nested_outer), 64);
}

/* The forced late thread: worker 1 blocks when it picks up the armed loop,
 * before it claims anything, until the test releases it (or 20 s pass,
 * which only a pool that waits for it would need). */
static pthread_mutex_t late_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t late_cv = PTHREAD_COND_INITIALIZER;
static bool late_armed, late_blocked, late_released, late_timed_out;

static void late_hook(int worker, uint32_t loop)
{
    (void)loop;
    pthread_mutex_lock(&late_mu);
    if (worker == 1 && late_armed) {
        late_armed = false;
        late_blocked = true;
        pthread_cond_broadcast(&late_cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 20;
        while (!late_released)
            if (pthread_cond_timedwait(&late_cv, &late_mu, &until) != 0) {
                late_timed_out = true;
                break;
            }
        late_blocked = false;
    }
    pthread_mutex_unlock(&late_mu);
}

static void late_thread_is_not_waited_for(void **state)
{
    (void)state;
    pool_set_adaptive(false);
    pool_set_threads(2);
    check_each_once(100, 1); /* the worker exists and has run */
    pthread_mutex_lock(&late_mu);
    late_armed = true;
    late_released = late_timed_out = false;
    pthread_mutex_unlock(&late_mu);
    pool_set_test_hook(late_hook);

    struct pool_stats before, after;
    pool_get_stats(&before);
    check_each_once(1000, 1); /* returns with the worker held in the hook (or not yet woken) */
    pool_get_stats(&after);
    pthread_mutex_lock(&late_mu);
    assert_false(late_released);
    assert_false(late_timed_out);
    /* every chunk of that loop ran in the caller */
    assert_int_equal(after.chunks_caller - before.chunks_caller, 1000);
    /* wait until the worker is in the hook, then run more loops while it is held */
    while (!late_blocked && !late_timed_out) {
        pthread_mutex_unlock(&late_mu);
        check_each_once(10, 1);
        usleep(1000);
        pthread_mutex_lock(&late_mu);
    }
    pthread_mutex_unlock(&late_mu);
    for (int rep = 0; rep < 50; rep++)
        check_each_once(MAX_ITEMS, 7);

    /* released, it wakes into an old loop: it must not run or corrupt a new one */
    pthread_mutex_lock(&late_mu);
    late_released = true;
    pthread_cond_broadcast(&late_cv);
    pthread_mutex_unlock(&late_mu);
    for (int rep = 0; rep < 200; rep++)
        check_each_once(MAX_ITEMS, 5);
    pool_set_test_hook(NULL);
    assert_false(late_timed_out);
}

/* Idle workers sleep after the spin budget, and a loop wakes them. */
static void idle_workers_sleep_and_wake(void **state)
{
    (void)state;
    pool_set_adaptive(false);
    pool_set_threads(4);
    check_each_once(1000, 1); /* all three workers started */
    struct pool_stats st;
    for (int i = 0; i < 5000; i++) { /* up to 5 s; the budget is 200 us */
        pool_get_stats(&st);
        if (st.sleeping == st.workers)
            break;
        usleep(1000);
    }
    assert_true(st.workers >= 3);
    assert_int_equal(st.sleeping, st.workers);
    struct pool_stats before;
    pool_get_stats(&before);
    for (int rep = 0; rep < 100; rep++) {
        check_each_once(MAX_ITEMS, 1);
        usleep(rep % 10 == 0 ? 2000 : 0); /* some loops find the workers asleep */
    }
    pool_get_stats(&st);
    assert_true(st.loops >= before.loops + 100);
}

/* Items of 10 us that take a worker 2 ms more (it is "descheduled"): the
 * worker joins each loop of 64 items (640 us) and then holds the caller
 * back, so the adaptive count must drop it. */
static void busy_us(double us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) * 1e-3 < us);
}

static void slow_on_workers(void *ctx, int64_t i0, int64_t i1)
{
    (void)ctx;
    busy_us(10.0 * (double)(i1 - i0));
    if (pool_thread_index() != 0)
        usleep(2000);
    count_items(NULL, i0, i1);
}

static void adaptive_drops_a_slow_thread(void **state)
{
    (void)state;
    pool_set_threads(2);
    pool_set_adaptive(true);
    assert_int_equal(pool_threads(), 2);
    struct pool_stats before, st;
    pool_get_stats(&before);
    int loops = 0;
    for (; loops < 2000 && pool_threads() == 2; loops++)
        pool_for(64, 1, slow_on_workers, NULL);
    pool_get_stats(&st);
    if (pool_threads() != 1)
        fail_msg("after %d loops: %llu drops, %llu raises, stall %.3f of %.3f s, worker chunks %llu", loops,
                 (unsigned long long)(st.drops - before.drops), (unsigned long long)(st.raises - before.raises),
                 st.stall_seconds - before.stall_seconds, st.loop_seconds - before.loop_seconds,
                 (unsigned long long)(st.chunks_worker - before.chunks_worker));
    assert_int_equal(st.drops, before.drops + 1);
    /* with one thread taking part everything runs in the caller */
    pool_get_stats(&before);
    check_each_once(1000, 1);
    pool_get_stats(&st);
    assert_int_equal(st.chunks_worker, before.chunks_worker);
    pool_set_adaptive(false); /* back to the maximum */
    assert_int_equal(pool_threads(), 2);
}

/* The decision logic alone, on made-up loops (time as run, time estimated
 * without the last finisher).  Quiet: 1.1 ms, where one thread fewer would
 * have needed 2 ms. */
static int quiet(struct pool_adapt *a, double t) { return pool_adapt_observe(a, 0.0011, 0.002, 0.02, 0.03, t); }
/* a thread that ran 4 of 16 chunks and kept the others waiting: 3 ms, where
 * the others would have needed 1 ms * 16 / 12 */
static int stalled(struct pool_adapt *a, double t) { return pool_adapt_observe(a, 0.003, 0.00133, 0.02, 0.5, t); }
/* every core busy: threads equally slow, each doing its half */
static int evenly_slow(struct pool_adapt *a, double t) { return pool_adapt_observe(a, 0.0028, 0.004, 0.5, 0.5, t); }
/* the caller shares its core with another program, the worker has one to itself */
static int caller_delayed(struct pool_adapt *a, double t) { return pool_adapt_observe(a, 0.0011, 0.002, 0.5, 0.02, t); }
static int idle(struct pool_adapt *a, double t) { return pool_adapt_observe(a, 0.0, 0.0, -1.0, -1.0, t); }

static void adaptive_state_machine(void **state)
{
    (void)state;
    struct pool_adapt a;
    double t = 100.0;
    int n;
    pool_adapt_init(&a, 2, t);
    /* quiet, and all cores evenly busy: both threads stay */
    for (int i = 0; i < 1000; i++, t += 0.001)
        assert_int_equal(quiet(&a, t), 2);
    for (int i = 0; i < 1000; i++, t += 0.001)
        assert_int_equal(evenly_slow(&a, t), 2);
    /* every thread waiting for its core: kept even when the loops look held back */
    for (int i = 0; i < 1000; i++, t += 0.001)
        assert_int_equal(pool_adapt_observe(&a, 0.003, 0.00133, 0.5, 0.45, t), 2);
    /* unknown delays never drop a thread */
    for (int i = 0; i < 1000; i++, t += 0.001)
        assert_int_equal(pool_adapt_observe(&a, 0.0011, 0.002, -1.0, -1.0, t), 2);
    /* a caller waiting for its core while the worker runs freely drops the worker */
    n = 2;
    for (int i = 0; i < 100 && n == 2; i++, t += 0.001)
        n = caller_delayed(&a, t);
    assert_int_equal(n, 1);
    t += POOL_ADAPT_BACKOFF_MIN + 0.001;
    assert_int_equal(idle(&a, t), 2); /* tried again, kept once it is quiet */
    for (int i = 0; i < 100; i++, t += 0.001)
        assert_int_equal(quiet(&a, t), 2);
    /* a window of a thread holding the caller back drops it */
    n = 2;
    for (int i = 0; i < 100 && n == 2; i++, t += 0.001)
        n = stalled(&a, t);
    assert_int_equal(n, 1);
    assert_false(a.probing);
    /* before the back-off it stays at one, whatever it sees */
    const double dropped = t;
    for (; t < dropped + POOL_ADAPT_BACKOFF_MIN - 0.01; t += 0.01)
        assert_int_equal(idle(&a, t), 1);
    /* then the thread is tried again ... */
    t = dropped + POOL_ADAPT_BACKOFF_MIN + 0.001;
    assert_int_equal(idle(&a, t), 2);
    assert_true(a.probing);
    /* ... still holding back: dropped, and the next try waits twice as long */
    n = 2;
    for (int i = 0; i < 100 && n == 2; i++, t += 0.001)
        n = stalled(&a, t);
    assert_int_equal(n, 1);
    assert_true(a.backoff == 2 * POOL_ADAPT_BACKOFF_MIN);
    assert_int_equal(idle(&a, t + POOL_ADAPT_BACKOFF_MIN + 0.01), 1);
    t += 2 * POOL_ADAPT_BACKOFF_MIN + 0.01;
    assert_int_equal(idle(&a, t), 2);
    /* the machine is quiet again: the try succeeds and the back-off resets */
    for (int i = 0; i < 100; i++, t += 0.001)
        assert_int_equal(quiet(&a, t), 2);
    assert_false(a.probing);
    assert_true(a.backoff == POOL_ADAPT_BACKOFF_MIN);
    /* repeated failures never wait more than the maximum */
    for (int k = 0; k < 10; k++) {
        n = 2;
        for (int i = 0; i < 100 && n == 2; i++, t += 0.001)
            n = stalled(&a, t);
        assert_int_equal(n, 1);
        assert_true(a.backoff <= POOL_ADAPT_BACKOFF_MAX);
        t += a.backoff + 0.001;
        assert_int_equal(idle(&a, t), 2);
    }
    assert_true(a.backoff == POOL_ADAPT_BACKOFF_MAX);
    /* with four threads it goes down one at a time, never below one */
    pool_adapt_init(&a, 4, t);
    for (int expect = 3; expect >= 1; expect--) {
        n = expect + 1;
        for (int i = 0; i < 100 && n == expect + 1; i++, t += 0.001)
            n = stalled(&a, t);
        assert_int_equal(n, expect);
        t += a.backoff + 0.001;
        n = idle(&a, t); /* the try */
        assert_int_equal(n, expect + 1);
        for (int i = 0; i < 100 && n == expect + 1; i++, t += 0.001)
            n = stalled(&a, t);
        assert_int_equal(n, expect);
    }
    for (int i = 0; i < 100; i++, t += 0.001)
        assert_true(stalled(&a, t) >= 1);
}

/* The step-level trials alone, on made-up steps of `tok` tokens that take
 * per_at1 seconds on one thread and per_at2 on two, fed until `until`
 * (made-up seconds).  The count the trials settle on is `cap`, or the
 * trial's baseline while a trial runs. */
static double feed(struct pool_ab *a, double t, double until, int64_t tok, double per_at1, double per_at2,
                   bool contended)
{
    for (; t < until; t += a->cap == 1 ? per_at1 : per_at2)
        pool_ab_observe(a, tok, a->cap == 1 ? per_at1 : per_at2, a->cap, contended, t);
    return t;
}

static int settled(const struct pool_ab *a) { return a->trial ? a->base_cap : a->cap; }

static void step_trials_state_machine(void **state)
{
    (void)state;
    struct pool_ab a;
    double t = 50.0;
    /* one thread: never a trial */
    pool_ab_init(&a, 1, t);
    t = feed(&a, t, t + 10, 4, 0.01, 0.01, true);
    assert_int_equal(a.cap, 1);
    assert_false(a.trial);

    /* quiet (nobody waits for a core): no trial of fewer threads, ever */
    pool_ab_init(&a, 2, t);
    for (double end = t + 60; t < end; t += 0.016) {
        pool_ab_observe(&a, 4, 0.016, a.cap, false, t);
        assert_int_equal(a.cap, 2);
        assert_false(a.trial);
    }

    /* contended, but two threads are still faster: every trial of one fails
     * and the trials get rarer (the backoff doubles up to its maximum) */
    pool_ab_init(&a, 2, t);
    int trials = 0;
    double backoff = a.backoff;
    for (double end = t + 120; t < end;) {
        const bool was = a.trial;
        const double per = a.cap == 1 ? 0.030 : 0.016;
        pool_ab_observe(&a, 4, per, a.cap, true, t);
        t += per;
        if (!was && a.trial) {
            trials++;
            assert_int_equal(a.cap, 1);
        }
        if (!a.trial)
            assert_int_equal(a.cap, 2);
        assert_true(a.backoff >= backoff);
        backoff = a.backoff;
    }
    if (trials < 5 || trials > 12) /* 0.25, then 2, 4, 8, 16, 16, ... seconds apart */
        fail_msg("%d trials in 120 s", trials);
    assert_true(a.backoff == POOL_AB_BACKOFF_MAX);

    /* the load changes: one thread is now faster; the slower baseline brings
     * a trial forward at once (not after the 16 s backoff), one is kept */
    const double t_change = t;
    while (settled(&a) == 2 && t < t_change + 10)
        t = feed(&a, t, t + 0.01, 4, 0.020, 0.040, true);
    assert_int_equal(settled(&a), 1);
    assert_true(t - t_change < 1.0);
    /* it stays at one while that is faster: trials of two fail */
    t = feed(&a, t, t + 20, 4, 0.020, 0.040, true);
    assert_int_equal(settled(&a), 1);
    /* quiet again (one thread as fast as before, two faster): a trial of two
     * comes within the backoff, even with nobody waiting, and is kept */
    const double t_quiet = t;
    while (settled(&a) == 1 && t < t_quiet + 60)
        t = feed(&a, t, t + 0.01, 4, 0.020, 0.011, false);
    assert_int_equal(settled(&a), 2);
    assert_true(t - t_quiet <= POOL_AB_BACKOFF_MAX + 1.0);

    /* a 4% gain is noise: the count stays */
    pool_ab_init(&a, 2, t);
    t = feed(&a, t, t + 30, 4, 0.0192, 0.020, true);
    assert_int_equal(settled(&a), 2);

    /* steps of changing sizes never fill a window: no trial decides, and an
     * open trial ends at once at the measured count */
    pool_ab_init(&a, 2, t);
    for (const double t_start = t; !a.trial && t < t_start + 5; t += 0.010) /* baseline, then the trial starts */
        pool_ab_observe(&a, 4, 0.010, a.cap, true, t);
    assert_true(a.trial);
    assert_int_equal(a.cap, 1);
    for (int i = 0; i < 400; i++, t += 0.01)
        pool_ab_observe(&a, 1 + i % 3, 0.001, a.cap, true, t);
    assert_false(a.trial);
    assert_int_equal(a.cap, 2);

    /* a drop by the loop rule is put on trial against the last baseline:
     * undone when one thread is not faster ... */
    for (int kept = 0; kept < 2; kept++) {
        pool_ab_init(&a, 2, t);
        a.next_trial = t + 1000; /* no trial of its own */
        for (int i = 0; i < 20; i++, t += 0.016)
            pool_ab_observe(&a, 4, 0.016, 2, true, t);
        assert_true(a.base_per_step > 0);
        assert_int_equal(pool_ab_observe(&a, 4, 0.016, 1, true, t), 1); /* the loop rule dropped one */
        assert_true(a.trial);
        const double per1 = kept ? 0.010 : 0.030;
        for (int i = 0; i < 20 && a.trial; i++, t += per1)
            pool_ab_observe(&a, 4, per1, a.cap, true, t);
        assert_false(a.trial);
        /* ... and kept when it is */
        assert_int_equal(a.cap, kept ? 1 : 2);
    }
}

/* Through the pool: steps reported with pool_step, one thread made faster
 * (the seconds are the test's, not measured), the pool drops to one thread
 * and its loops then run in the caller only. */
static void step_trials_drive_the_pool(void **state)
{
    (void)state;
    pool_set_threads(2);
    pool_set_adaptive(true);
    struct pool_stats before, st;
    pool_get_stats(&before);
    const double t0 = (double)time(NULL);
    /* made-up steps: two threads 40 ms, one thread 20 ms, for at most 30 s
     * of wall time (the first trial waits POOL_AB_FIRST of it) */
    pool_set_test_contended(1); /* as if a thread waited for its core */
    while (pool_threads() == 2 && (double)time(NULL) - t0 < 30) {
        pool_step(4, 0.040);
        usleep(2000);
    }
    assert_int_equal(pool_threads(), 1); /* the trial of one thread began */
    for (int i = 0; i < POOL_AB_STEPS; i++) /* its window: faster, so it is kept */
        pool_step(4, 0.020);
    assert_int_equal(pool_threads(), 1); /* (a trial of two needs another full window first) */
    pool_set_test_contended(-1);
    pool_get_stats(&st);
    assert_true(st.drops > before.drops);
    pool_get_stats(&before);
    check_each_once(1000, 1);
    pool_get_stats(&st);
    assert_int_equal(st.chunks_worker, before.chunks_worker);
    /* off: back to the maximum, and steps change nothing */
    pool_set_adaptive(false);
    assert_int_equal(pool_threads(), 2);
    for (int i = 0; i < 200; i++)
        pool_step(4, i % 2 ? 0.020 : 0.040);
    assert_int_equal(pool_threads(), 2);
}

/* Workers run with every signal blocked, though the thread that started
 * them had none blocked: a process-directed SIGINT must go to the thread
 * that waits for it (infer serve), never a worker (default action: exit). */
static _Atomic int workers_seen, workers_unblocked;
static void record_mask(void *ctx, int64_t i0, int64_t i1)
{
    (void)ctx;
    (void)i0;
    (void)i1;
    if (pool_thread_index() == 0)
        return;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    atomic_fetch_add(&workers_seen, 1);
    if (!sigismember(&cur, SIGINT) || !sigismember(&cur, SIGTERM))
        atomic_fetch_add(&workers_unblocked, 1);
    struct timespec ts = {0, 200000}; /* long enough that the workers take items */
    nanosleep(&ts, NULL);
}

static void workers_block_signals(void **state)
{
    (void)state;
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    pool_set_adaptive(false);
    assert_int_equal(pool_set_threads(4), 4);
    /* on a loaded machine the workers may not get a core for a while: try
     * for up to 30 s (a passing run stops at the first item a worker takes) */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        pool_for(64, 1, record_mask, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (atomic_load(&workers_seen) == 0 && t.tv_sec - t0.tv_sec < 30);
    assert_true(atomic_load(&workers_seen) > 0);
    assert_int_equal(atomic_load(&workers_unblocked), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adaptive_state_machine),
        cmocka_unit_test(each_item_once),
        cmocka_unit_test(nested_loops_run_inline),
        cmocka_unit_test(late_thread_is_not_waited_for),
        cmocka_unit_test(idle_workers_sleep_and_wake),
        cmocka_unit_test(adaptive_drops_a_slow_thread),
        cmocka_unit_test(step_trials_state_machine),
        cmocka_unit_test(step_trials_drive_the_pool),
        cmocka_unit_test(workers_block_signals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
