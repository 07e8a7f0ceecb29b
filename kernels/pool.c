/* kernels/pool.c - chunked parallel loops that never wait for a thread that
 * is not running; see pool.h for why and how.
 *
 * One loop at a time: the caller publishes fn/ctx/n/grain, then the claim
 * word (the loop's 32-bit tag << 32 | next item), then the loop tag in
 * `gen`, which workers wait on.  A thread claims a chunk by a CAS on the
 * claim word that also checks the tag, so a worker that wakes late for an
 * old loop can never take a chunk of a newer one; the fields it read before
 * the CAS belong to the loop it claimed from, because the caller rewrites
 * them only after every chunk of that loop is done.  `done` counts finished
 * items; the thread that finishes the last one wakes the caller if it sleeps.
 */
#include "pool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

#define CACHELINE 64

static struct {
    /* written by the caller per loop */
    _Alignas(CACHELINE) _Atomic(pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n, grain;
    /* claimed chunks */
    _Alignas(CACHELINE) _Atomic uint64_t claim;
    /* finished items of the current loop */
    _Alignas(CACHELINE) _Atomic int64_t done;
    _Atomic uint32_t done_tag;   /* futex word: the tag of the last finished loop */
    _Atomic int64_t last_ran;    /* chunks run by the thread that finished the loop (0: the caller) */
    _Atomic int64_t finish_ns;   /* when it finished (CLOCK_MONOTONIC) */
    _Atomic int64_t worker_out_ns; /* the latest time a worker that ran chunks found none left */
    _Atomic int worker_delay_ppm[POOL_MAX_THREADS]; /* each worker's runqueue wait share, -1: not known */
    _Atomic int caller_sleeping;
    /* the loop workers wait for */
    _Alignas(CACHELINE) _Atomic uint32_t gen; /* futex word */
    _Atomic int sleepers;
    _Atomic int active;      /* threads taking part, caller included */
    _Atomic uint64_t chunks_worker;
    _Alignas(CACHELINE) pthread_mutex_t lock; /* one loop at a time; guards the rest */
    int max;
    int n_workers;
    pthread_t tid[POOL_MAX_THREADS];
    long spin_ns;
    bool adaptive;
    struct pool_adapt adapt;
    struct pool_ab ab;
    struct pool_stats st;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .max = 0, .active = 1, .spin_ns = -1, .adaptive = true};

static _Atomic(void (*)(int, uint32_t)) test_hook;
static _Atomic int test_contended = -1;

/* INFER_POOL_DEBUG=1: the step trials' decisions on stderr. */
static int debug_level(void)
{
    static int level = -1;
    if (level < 0) {
        const char *e = getenv("INFER_POOL_DEBUG");
        level = e && *e && strcmp(e, "0") != 0;
    }
    return level;
}

/* Of the time this thread wanted a core since the last call (running or
 * runnable), the share it waited for one (held by another program): from
 * /proc/thread-self/schedstat (run ns, runqueue wait ns, slices), at most
 * every POOL_DELAY_PERIOD seconds; -1 when unknown (no schedstat, too soon). */
#define POOL_DELAY_PERIOD 0.05
struct delay_probe {
    double t;
    unsigned long long run_ns, wait_ns;
    double share;
};

static double delay_share(struct delay_probe *d, double now)
{
    if (d->t > 0 && now - d->t < POOL_DELAY_PERIOD)
        return d->share;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long run = 0, wait = 0;
    const int ok = f && fscanf(f, "%llu %llu", &run, &wait) == 2;
    if (f)
        fclose(f);
    if (!ok)
        return d->share = -1.0;
    const double dw = (double)(wait - d->wait_ns), dr = (double)(run - d->run_ns);
    d->share = d->t > 0 && dw + dr > 0 ? dw / (dw + dr) : -1.0;
    d->t = now;
    d->run_ns = run;
    d->wait_ns = wait;
    return d->share;
}
static _Thread_local int thread_index;   /* 0: caller or outside, 1..: worker */
static _Thread_local bool in_loop;       /* inside a pool loop's item function */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

static long spin_budget_ns(void)
{
    if (P.spin_ns < 0) {
        const char *e = getenv("INFER_POOL_SPIN_US");
        long us = e && *e ? strtol(e, NULL, 10) : POOL_SPIN_US_DEFAULT;
        P.spin_ns = us < 0 ? 0 : us > 1000000 ? 1000000000L : us * 1000L;
    }
    return P.spin_ns;
}

/* Claim and run chunks of loop `tag` until none is left; returns the number
 * of chunks this thread ran. */
static uint64_t run_chunks(uint32_t tag)
{
    const pool_fn fn = atomic_load_explicit(&P.fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&P.ctx, memory_order_relaxed);
    const int64_t n = atomic_load_explicit(&P.n, memory_order_relaxed);
    const int64_t grain = atomic_load_explicit(&P.grain, memory_order_relaxed);
    uint64_t ran = 0;
    uint64_t c = atomic_load_explicit(&P.claim, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(c >> 32) != tag)
            break;
        const int64_t i0 = (int64_t)(uint32_t)c;
        if (i0 >= n)
            break;
        const int64_t i1 = n - i0 < grain ? n : i0 + grain;
        if (!atomic_compare_exchange_weak_explicit(&P.claim, &c, ((uint64_t)tag << 32) | (uint64_t)i1,
                                                   memory_order_acq_rel, memory_order_acquire))
            continue; /* c holds the new value */
        in_loop = true;
        fn(ctx, i0, i1);
        in_loop = false;
        ran++;
        if (atomic_fetch_add_explicit(&P.done, i1 - i0, memory_order_acq_rel) + (i1 - i0) == n) {
            atomic_store_explicit(&P.last_ran, thread_index ? (int64_t)ran : 0, memory_order_relaxed);
            atomic_store_explicit(&P.finish_ns, (int64_t)(now_s() * 1e9), memory_order_relaxed);
            atomic_store(&P.done_tag, tag);
            if (atomic_load(&P.caller_sleeping))
                futex(&P.done_tag, FUTEX_WAKE, INT_MAX);
        }
        c = atomic_load_explicit(&P.claim, memory_order_acquire);
    }
    if (thread_index && ran && (uint32_t)(c >> 32) == tag) { /* out of chunks of this loop */
        const int64_t t = (int64_t)(now_s() * 1e9);
        int64_t prev = atomic_load_explicit(&P.worker_out_ns, memory_order_relaxed);
        while (prev < t && !atomic_compare_exchange_weak_explicit(&P.worker_out_ns, &prev, t, memory_order_relaxed,
                                                                  memory_order_relaxed))
            ;
    }
    return ran;
}

static void *worker_main(void *arg)
{
    const int me = (int)(intptr_t)arg;
    thread_index = me;
    struct delay_probe probe = {0};
    uint32_t seen = atomic_load(&P.gen);
    for (;;) {
        uint32_t g = atomic_load_explicit(&P.gen, memory_order_acquire);
        if (g == seen) {
            const long budget = spin_budget_ns();
            const double t0 = budget > 0 ? now_s() : 0.0;
            for (int i = 0; budget > 0; i++) {
                cpu_relax();
                if ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) != seen)
                    break;
                if ((i & 255) == 255 && (now_s() - t0) * 1e9 > (double)budget)
                    break;
            }
            if (g == seen) {
                atomic_fetch_add(&P.sleepers, 1);
                futex(&P.gen, FUTEX_WAIT, seen); /* returns at once if gen moved on */
                atomic_fetch_sub(&P.sleepers, 1);
                continue;
            }
        }
        seen = g;
        if (me >= atomic_load_explicit(&P.active, memory_order_relaxed))
            continue;
        void (*hook)(int, uint32_t) = atomic_load(&test_hook);
        if (hook)
            hook(me, g);
        const uint64_t ran = run_chunks(g);
        if (P.adaptive) {
            const double share = delay_share(&probe, now_s());
            atomic_store_explicit(&P.worker_delay_ppm[me], share < 0 ? -1 : (int)(share * 1e6), memory_order_relaxed);
        }
        if (ran)
            atomic_fetch_add_explicit(&P.chunks_worker, ran, memory_order_relaxed);
    }
    return NULL;
}

/* Start workers up to P.max - 1 (under the lock).  Returns the number running.
 * Workers start with every signal blocked, whatever the caller's mask: a
 * process-directed SIGINT/SIGTERM must reach the thread that waits for it
 * (infer serve's sigtimedwait), never a worker, where its default action
 * would end the process without the shutdown. */
static int start_workers(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (P.n_workers < P.max - 1) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        const int rc = pthread_create(&P.tid[P.n_workers], &at, worker_main, (void *)(intptr_t)(P.n_workers + 1));
        pthread_attr_destroy(&at);
        if (rc != 0)
            break;
        P.n_workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return P.n_workers;
}

int pool_set_threads(int n)
{
    n = n < 1 ? 1 : n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n;
    pthread_mutex_lock(&P.lock);
    P.max = n;
    const char *e = getenv("INFER_THREADS_ADAPT");
    if (e && strcmp(e, "0") == 0)
        P.adaptive = false;
    pool_adapt_init(&P.adapt, n, now_s());
    pool_ab_init(&P.ab, n, now_s());
    atomic_store(&P.active, n);
    pthread_mutex_unlock(&P.lock);
    return n;
}

/* Before any pool_set_threads: OpenMP's count (OMP_NUM_THREADS, else the
 * CPUs), so that kernels called without an engine still use the machine. */
static void ensure_max(void)
{
    if (P.max > 0)
        return;
#ifdef _OPENMP
    pool_set_threads(omp_get_max_threads());
#else
    pool_set_threads(1);
#endif
}

int pool_max_threads(void)
{
    ensure_max();
    return P.max;
}

int pool_threads(void)
{
    ensure_max();
    return atomic_load_explicit(&P.active, memory_order_relaxed);
}

int pool_thread_index(void) { return thread_index; }

int64_t pool_grain(int64_t n, int per_thread, int64_t min_grain)
{
    const int64_t chunks = (int64_t)pool_threads() * (per_thread > 0 ? per_thread : 1);
    int64_t g = (n + chunks - 1) / chunks;
    return g < min_grain ? min_grain : g < 1 ? 1 : g;
}

bool pool_set_adaptive(bool on)
{
    pthread_mutex_lock(&P.lock);
    const bool was = P.adaptive;
    P.adaptive = on;
    pool_adapt_init(&P.adapt, P.max, now_s());
    pool_ab_init(&P.ab, P.max, now_s());
    atomic_store(&P.active, P.max);
    pthread_mutex_unlock(&P.lock);
    return was;
}

void pool_set_test_hook(void (*hook)(int worker, uint32_t loop)) { atomic_store(&test_hook, hook); }

void pool_set_test_contended(int contended) { atomic_store(&test_contended, contended < 0 ? -1 : contended > 0); }

void pool_get_stats(struct pool_stats *st)
{
    pthread_mutex_lock(&P.lock);
    *st = P.st;
    st->chunks_worker = atomic_load_explicit(&P.chunks_worker, memory_order_relaxed);
    st->workers = P.n_workers;
    st->sleeping = atomic_load(&P.sleepers);
    pthread_mutex_unlock(&P.lock);
}

/* Feed one loop to the adaptive count and apply its answer (under the lock). */
static _Thread_local struct delay_probe caller_probe; /* of the thread that runs the loops */

static void adapt_update(double with_s, double without_s, double now)
{
    const double caller = delay_share(&caller_probe, now);
    double least = -1.0; /* the least delayed worker taking part */
    for (int w = 1; w < P.adapt.active && w <= P.n_workers; w++) {
        const int ppm = atomic_load_explicit(&P.worker_delay_ppm[w], memory_order_relaxed);
        if (ppm >= 0 && (least < 0 || ppm * 1e-6 < least))
            least = ppm * 1e-6;
    }
    const int before = P.adapt.active;
    const int after = pool_adapt_observe(&P.adapt, with_s, without_s, caller, least, now);
    if (after == before)
        return;
    atomic_store(&P.active, after);
    if (after < before)
        P.st.drops++;
    else
        P.st.raises++;
}

void pool_for(int64_t n, int64_t grain, pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    ensure_max();
    if ((uint64_t)n > UINT32_MAX - (uint64_t)grain || in_loop || thread_index != 0 || P.max < 2 ||
        pthread_mutex_trylock(&P.lock) != 0) {
        fn(ctx, 0, n);
        return;
    }
    if (P.adapt.active < 2 || n <= grain || start_workers() == 0) { /* one thread: in the caller */
        fn(ctx, 0, n);
        if (P.adaptive && P.adapt.active < P.max) /* time to try a dropped thread again? */
            adapt_update(0.0, 0.0, now_s());
        pthread_mutex_unlock(&P.lock);
        return;
    }
    const double t0 = now_s();
    const uint32_t tag = atomic_load_explicit(&P.gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&P.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&P.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&P.n, n, memory_order_relaxed);
    atomic_store_explicit(&P.grain, grain, memory_order_relaxed);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.worker_out_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&P.claim, (uint64_t)tag << 32, memory_order_release);
    atomic_store(&P.gen, tag); /* seq_cst: pairs with the sleepers' increment */
    if (atomic_load(&P.sleepers) > 0)
        futex(&P.gen, FUTEX_WAKE, INT_MAX);

    const uint64_t caller_ran = run_chunks(tag);
    P.st.chunks_caller += caller_ran;

    /* Wait for the chunks other threads hold: spin, then sleep. */
    const double t_out = now_s();
    if (atomic_load(&P.done_tag) != tag) { /* done_tag is stored last by the finisher, after last_ran */
        const long budget = spin_budget_ns();
        for (int i = 0; atomic_load(&P.done_tag) != tag; i++) {
            cpu_relax();
            if ((i & 255) == 255 && (now_s() - t_out) * 1e9 > (double)budget) {
                atomic_store(&P.caller_sleeping, 1);
                for (uint32_t cur; (cur = atomic_load(&P.done_tag)) != tag;)
                    futex(&P.done_tag, FUTEX_WAIT, cur); /* returns at once if it moved on */
                atomic_store(&P.caller_sleeping, 0);
            }
        }
    }
    const double t1 = now_s();
    /* the stall ends when the last chunk was done, not when this thread ran again */
    double t_done = (double)atomic_load_explicit(&P.finish_ns, memory_order_relaxed) * 1e-9;
    t_done = t_done < t_out ? t_out : t_done > t1 ? t1 : t_done;
    P.st.loops++;
    P.st.loop_seconds += t1 - t0;
    P.st.stall_seconds += t_done - t_out;
    if (P.adaptive) {
        /* The loop as it ran, and estimated without the thread that finished
         * it last (L, which ran c of the N chunks): the others' N - c chunks
         * took them until they ran out, so all N would have taken
         * N / (N - c) times that.  When L is the caller, a worker is what
         * gets dropped: the caller then moves to the core that worker
         * leaves, which is what -t 1 does on a board with a busy core. */
        const int64_t n_chunks = (n + grain - 1) / grain;
        const int64_t lag = atomic_load_explicit(&P.last_ran, memory_order_relaxed);
        const double w_out = (double)atomic_load_explicit(&P.worker_out_ns, memory_order_relaxed) * 1e-9;
        const double others_out = lag > 0 ? t_out : w_out;
        const int64_t c = lag > 0 ? lag : (int64_t)caller_ran;
        const double with = t_done - t0;
        const double without = others_out > t0 && c < n_chunks ? (others_out - t0) * (double)n_chunks /
                                                                    (double)(n_chunks - c)
                                                              : with;
        adapt_update(with, without, t1);
    }
    pthread_mutex_unlock(&P.lock);
}

/* ------------------------- adaptive thread count ------------------------- */

void pool_adapt_init(struct pool_adapt *a, int max, double now)
{
    memset(a, 0, sizeof(*a));
    a->max = a->active = max < 1 ? 1 : max;
    a->backoff = POOL_ADAPT_BACKOFF_MIN;
    a->next_probe = now;
}

int pool_adapt_observe(struct pool_adapt *a, double with_s, double without_s, double caller_delay,
                       double worker_delay, double now)
{
    if (a->active < a->max && !a->probing && now >= a->next_probe) {
        a->active++; /* try the dropped thread again */
        a->probing = true;
        a->win_with = a->win_without = 0.0;
        return a->active;
    }
    if (a->active < 2 || now < a->hold_until)
        return a->active;
    a->win_with += with_s;
    a->win_without += without_s;
    if (a->win_with < POOL_ADAPT_WINDOW)
        return a->active;
    /* slower than without the last finisher, or the caller waits for its
     * core while a worker does not: dropping that worker lets the caller
     * move to its core.  When every thread waits for its core (all cores
     * busy) the estimate is wrong (the caller would wait alone too) and each
     * thread still adds work: keep them. */
    const bool all_waiting = caller_delay > POOL_ADAPT_DELAY_HIGH && worker_delay > POOL_ADAPT_DELAY_HIGH;
    const bool slower = !all_waiting && (a->win_with > POOL_ADAPT_MARGIN * a->win_without ||
                                         (caller_delay > POOL_ADAPT_DELAY_HIGH && worker_delay >= 0 &&
                                          worker_delay < POOL_ADAPT_DELAY_LOW));
    a->win_with = a->win_without = 0.0;
    if (slower) {
        a->active--;
        if (a->probing) /* the try failed: wait longer before the next */
            a->backoff = a->backoff * 2 > POOL_ADAPT_BACKOFF_MAX ? POOL_ADAPT_BACKOFF_MAX : a->backoff * 2;
        else
            a->backoff = POOL_ADAPT_BACKOFF_MIN;
        a->probing = false;
        a->next_probe = now + a->backoff;
    } else if (a->probing) {
        a->probing = false; /* kept */
        a->backoff = POOL_ADAPT_BACKOFF_MIN;
        a->next_probe = now;
    }
    return a->active;
}

/* ------------------------- step-level trials ------------------------- */

void pool_ab_init(struct pool_ab *a, int max, double now)
{
    memset(a, 0, sizeof(*a));
    a->max = a->cap = max < 1 ? 1 : max;
    a->dir = -1;
    a->backoff = POOL_AB_BACKOFF_MIN;
    a->next_trial = now + POOL_AB_FIRST;
}

int pool_ab_observe(struct pool_ab *a, int64_t tokens, double seconds, int active, bool contended, double now)
{
    if (a->max < 2)
        return a->cap;
    if (tokens != a->tokens) { /* windows compare steps of one size only */
        a->tokens = tokens;
        a->steps = 0;
        a->secs = 0.0;
        a->prev_base = a->base_per_step = 0.0;
        if (a->trial) { /* nothing left to compare it with: back to the measured count, try again soon */
            a->trial = false;
            a->cap = a->base_cap;
            a->next_trial = now;
        }
        return a->cap;
    }
    if (!a->trial && active != a->cap && active >= 1 && active <= a->max) {
        /* the loop rule changed the count: on trial against the last baseline */
        if (a->base_per_step > 0) {
            a->base_cap = a->cap;
            a->trial = true;
            a->trial_start = now;
            a->steps = 0;
            a->secs = 0.0;
        }
        a->cap = active;
        return a->cap; /* this step ran partly at the old count */
    }
    a->steps++;
    a->secs += seconds;
    if (a->steps < POOL_AB_STEPS || a->secs < POOL_AB_WINDOW)
        return a->cap;
    const double per_step = a->secs / a->steps;
    a->steps = 0;
    a->secs = 0.0;
    if (!a->trial) { /* a baseline window */
        if (a->prev_base > 0 &&
            (per_step > POOL_AB_SLOWDOWN * a->prev_base || per_step * POOL_AB_SLOWDOWN < a->prev_base)) {
            a->backoff = POOL_AB_BACKOFF_MIN; /* the machine's load changed: look again now */
            a->next_trial = now;
        }
        a->prev_base = a->base_per_step = per_step;
        if (now >= a->next_trial) {
            if (a->cap + a->dir < 1 || a->cap + a->dir > a->max || (a->dir < 0 && !contended))
                a->dir = a->cap < a->max ? 1 : -1;
            if (a->dir < 0 && !contended)
                return a->cap; /* nobody waits for a core: fewer threads cannot be faster */
            a->base_cap = a->cap;
            a->cap += a->dir;
            a->trial = true;
            a->trial_start = now;
        }
        return a->cap;
    }
    a->trial = false;
    if (per_step < (1.0 - POOL_AB_GAIN) * a->base_per_step) { /* faster: keep it, go on that way */
        a->dir = a->cap < a->base_cap ? -1 : 1;
        a->prev_base = a->base_per_step = per_step;
        a->backoff = POOL_AB_BACKOFF_MIN;
    } else { /* not faster: back, try the other way next, later */
        a->dir = a->cap < a->base_cap ? 1 : -1;
        a->cap = a->base_cap;
        a->prev_base = 0.0;
        a->backoff = a->backoff * 2 > POOL_AB_BACKOFF_MAX ? POOL_AB_BACKOFF_MAX : a->backoff * 2;
    }
    a->next_trial = now + a->backoff;
    return a->cap;
}

void pool_step(int64_t tokens, double seconds)
{
    if (tokens <= 0)
        return;
    pthread_mutex_lock(&P.lock);
    if (P.adaptive && P.max > 1) {
        const int before = P.adapt.active, old_cap = P.ab.cap;
        const bool was_trial = P.ab.trial;
        const double now = now_s();
        double most = delay_share(&caller_probe, now); /* the most delayed thread taking part */
        for (int w = 1; w < before && w <= P.n_workers; w++) {
            const int ppm = atomic_load_explicit(&P.worker_delay_ppm[w], memory_order_relaxed);
            if (ppm >= 0 && ppm * 1e-6 > most)
                most = ppm * 1e-6;
        }
        const int forced = atomic_load(&test_contended);
        const bool contended = forced >= 0 ? forced > 0 : most < 0 || most > POOL_AB_CONTENDED; /* unknown: could be */
        const int cap = pool_ab_observe(&P.ab, tokens, seconds, before, contended, now);
        if (debug_level() > 0 && (was_trial != P.ab.trial || cap != old_cap))
            fprintf(stderr, "pool: %.3f %s %d -> %d threads (baseline %.2f ms/step, most delayed %.2f)\n", now,
                    P.ab.trial ? "trial" : "decided", was_trial ? P.ab.base_cap : old_cap, cap,
                    P.ab.base_per_step * 1e3, most);
        /* The loop rule works below the cap, and does not drop a thread
         * during a trial, nor while the last trial's answer stands. */
        P.adapt.max = cap;
        P.adapt.hold_until = P.ab.trial ? INFINITY : cap == old_cap && !was_trial ? P.adapt.hold_until
                                                                                 : P.ab.next_trial;
        if (cap != before) {
            P.adapt.active = cap;
            P.adapt.probing = false;
            P.adapt.win_with = P.adapt.win_without = 0.0;
            atomic_store(&P.active, cap);
            if (cap < before)
                P.st.drops++;
            else
                P.st.raises++;
        }
    }
    pthread_mutex_unlock(&P.lock);
}
