/* kernels/pool.h - the threads that run the forward pass's parallel loops.
 *
 * A home server's cores are shared: Home Assistant, a media server, a backup
 * job.  With OpenMP every parallel region ends in a barrier that waits for
 * every thread of the team, so when another program holds one core, each of
 * the ~150 regions of a decode step waits for a descheduled thread's next
 * time slice (1.5 tok/s instead of 52 with -t 1 on this machine).  This pool
 * hands a loop out in chunks that the threads claim from a shared counter;
 * the caller takes part, and a call returns when every chunk is done, not
 * when every thread has arrived: a thread that is not running only delays
 * the chunk it already holds, and never one it did not claim.
 *
 * Waiting: a worker spins for a bounded time (INFER_POOL_SPIN_US, default
 * POOL_SPIN_US_DEFAULT) for the next loop, then sleeps on a futex; the
 * caller wakes sleepers only when there are any.
 *
 * Adaptive thread count: per loop the caller notes how long the loop took
 * (until its last chunk was done), which thread finished it last and how
 * many of the N chunks that thread ran (c), and when the others ran out of
 * chunks: without the last finisher the loop would have taken about that
 * time * N / (N - c).  When, summed over a window, the loops took longer
 * than that (with a margin), a thread holds the others back (one whose core
 * another program uses) and one thread is dropped; after a back-off it is
 * tried again and kept if the loops are not slower with it
 * (pool_adapt_observe, a pure function, tested on its own).  The loops do
 * not show a caller that another program slows between them (the serial
 * work of a step runs in it), so the same happens when the caller spends a
 * quarter of its time waiting for its core (/proc/thread-self/schedstat)
 * while a worker does not: without that worker the caller moves to its
 * core.  When every thread waits for its core a quarter of the time (all
 * cores busy) the threads are kept: each still adds work (the estimate
 * above then misleads: the caller alone would wait too).
 * INFER_THREADS_ADAPT=0 turns this off.
 *
 * Which thread runs which chunk varies from run to run; the loops given to
 * the pool must compute each item the same way whoever runs it (they do:
 * every output element is written by one chunk only).
 */
#ifndef INFER_KERNELS_POOL_H
#define INFER_KERNELS_POOL_H

#include <stdbool.h>
#include <stdint.h>

/* Run items [i0, i1) of a loop. */
typedef void (*pool_fn)(void *ctx, int64_t i0, int64_t i1);

#define POOL_MAX_THREADS 256
#define POOL_SPIN_US_DEFAULT 50

/* Use up to n threads (the caller included) from the next loop on; workers
 * are started the first time a loop needs them.  n < 1 is taken as 1.
 * Returns the new maximum. */
int pool_set_threads(int n);

/* The maximum set by pool_set_threads, and the number that currently take
 * part (the maximum unless the adaptive count dropped some). */
int pool_max_threads(void);
int pool_threads(void);

/* Run fn over items [0, n) in chunks of `grain` items (the last may be
 * shorter), spread over the pool's threads; returns when all are done.  A
 * call from inside a pool loop, or while another thread's loop runs, runs
 * the items in the calling thread. */
void pool_for(int64_t n, int64_t grain, pool_fn fn, void *ctx);

/* A grain that gives each taking-part thread about `per_thread` chunks of
 * n items, at least `min_grain`. */
int64_t pool_grain(int64_t n, int per_thread, int64_t min_grain);

/* Index of the calling thread in the pool: 0 for the caller of pool_for
 * (and any thread outside the pool), 1.. for workers. */
int pool_thread_index(void);

/* Counters since the start, for reports and tests. */
struct pool_stats {
    uint64_t loops;        /* pool_for calls spread over threads */
    uint64_t chunks_caller; /* chunks run by the calling thread */
    uint64_t chunks_worker; /* chunks run by workers */
    double loop_seconds;    /* wall time of those calls */
    double stall_seconds;   /* of which the caller waited for others' chunks */
    uint64_t drops, raises; /* adaptive thread-count changes */
    int workers;            /* worker threads started */
    int sleeping;           /* workers asleep on the futex now */
};
void pool_get_stats(struct pool_stats *st);

/* The adaptive thread count as a pure state machine: feed it each loop's
 * time as it ran and as estimated without its last finisher, the share of
 * recent time the caller and the least delayed worker spent waiting for a
 * core (-1: unknown), at time `now` (seconds, monotonic); it returns the
 * number of threads to use from the next loop on. */
struct pool_adapt {
    int max, active;
    double win_with;    /* the window's loops: their time as they ran */
    double win_without; /* ... and as estimated without their last finisher */
    double next_probe;          /* when a dropped thread is tried again */
    double backoff;             /* seconds until the next try */
    bool probing;               /* the last raise is on trial */
    double hold_until;          /* no drop before this (the step trials measured the count) */
};
#define POOL_ADAPT_WINDOW 0.020     /* seconds of loop time per decision */
#define POOL_ADAPT_MARGIN 1.25      /* how much slower than without the thread counts as slower */
#define POOL_ADAPT_DELAY_HIGH 0.25  /* caller waiting for its core this share of the time ... */
#define POOL_ADAPT_DELAY_LOW 0.10   /* ... while a worker waits less than this: drop a worker */
#define POOL_ADAPT_BACKOFF_MIN 1.0  /* seconds before a dropped thread is tried again */
#define POOL_ADAPT_BACKOFF_MAX 16.0 /* ... doubling after each failed try, up to this */
void pool_adapt_init(struct pool_adapt *a, int max, double now);
int pool_adapt_observe(struct pool_adapt *a, double with_s, double without_s, double caller_delay,
                       double worker_delay, double now);

/* The step-level check on top of it.  The loop estimate above cannot see
 * every case: with one core busy, multi-sequence decode of a large file can
 * run faster on one thread (the caller alone on the free core) than on two,
 * while no loop looks slower than without its last finisher.  So the engine
 * reports each forward step (its tokens and time, pool_step) and the pool
 * tries the neighbouring thread count directly: a baseline window of steps
 * at the current count, then a trial window of steps of the same size at
 * one thread fewer (or more); the trial count is kept when its steps are
 * POOL_AB_GAIN faster, else the old count returns and the next trial waits
 * twice as long (POOL_AB_BACKOFF_MIN .. _MAX; a baseline POOL_AB_SLOWDOWN
 * times slower or faster than the one before, a change of the machine's
 * load, brings the next trial forward).  A trial of fewer threads is made
 * only while some thread waits for its core (contended: a runqueue wait
 * share above POOL_AB_CONTENDED, or unknown), so a quiet machine pays
 * nothing for it; a trial of more threads is always allowed.  Its answer
 * caps the loop rule's count (pool_adapt.max), so the loop rule's retries
 * do not undo it; a change the loop rule makes is itself put on trial
 * against the last baseline (`active`: the count the step ran with), and
 * after a trial the loop rule drops no thread until the next one
 * (pool_adapt.hold_until).  A change of step size ends an open trial at the
 * measured count.  A pure state machine like pool_adapt_observe: feed it
 * each step's token count, seconds and whether the machine is contended,
 * at time `now`; it returns the cap. */
struct pool_ab {
    int max, cap;
    bool trial;          /* the current window runs `cap` threads on trial */
    int base_cap;        /* the count the trial is measured against */
    int dir;             /* direction of the next trial: -1 or +1 */
    int64_t tokens;      /* step size of the current window */
    int steps;           /* the current window: steps and seconds */
    double secs;
    double base_per_step; /* seconds per step of the last baseline window */
    double prev_base;     /* ... and of the one before (0: none) */
    double next_trial, backoff, trial_start;
};
#define POOL_AB_STEPS 3           /* steps (layers) per window, at least ... */
#define POOL_AB_WINDOW 0.10       /* ... and seconds per window, at least */
#define POOL_AB_GAIN 0.05         /* a trial count must be this much faster to be kept */
#define POOL_AB_SLOWDOWN 1.30     /* a baseline this much slower or faster than the one before: try again now */
#define POOL_AB_FIRST 0.25        /* seconds before the first trial */
#define POOL_AB_BACKOFF_MIN 1.0
#define POOL_AB_BACKOFF_MAX 16.0
#define POOL_AB_CONTENDED 0.25    /* a thread waits this share of the time for its core */
void pool_ab_init(struct pool_ab *a, int max, double now);
int pool_ab_observe(struct pool_ab *a, int64_t tokens, double seconds, int active, bool contended, double now);

/* A forward step of `tokens` tokens took `seconds` (called by the engine
 * after each step; feeds pool_ab_observe when the count is adaptive). */
void pool_step(int64_t tokens, double seconds);

/* Turn the adaptive count on or off (on by default unless
 * INFER_THREADS_ADAPT=0); off restores the maximum.  Returns the old state. */
bool pool_set_adaptive(bool on);

/* Tests only: the step trials see the machine as contended (1) or quiet
 * (0) instead of measuring it (-1, the default). */
void pool_set_test_contended(int contended);

/* Tests only: called by a worker when it picks up a loop, before it claims
 * a chunk (NULL: none). */
void pool_set_test_hook(void (*hook)(int worker, uint32_t loop));

#endif
