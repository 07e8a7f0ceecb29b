/*
 * engine.h - internals shared by engine.c (the engine: arena, prefix cache,
 * budget, batched steps, metrics) and session.c (the session API).
 */
#ifndef INFER_ENGINE_H
#define INFER_ENGINE_H

#include "model/forward.h"
#include "cache/prefix.h"

struct engine_metrics {
    int64_t queries, hits, query_tokens, hit_tokens, hit_blocks, reused_tokens;
    int64_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
    int64_t ttft_cold_n, ttft_hit_n;
    double ttft_cold_sum, ttft_hit_sum, ttft_cold_last, ttft_hit_last;
    int64_t ev_count[60]; /* evictions per second of the last minute (ring) */
    int64_t ev_sec[60];   /* which second each slot counts */
    /* coalescing (coalesce.c): requests that waited for another session's
     * prefill, tokens they attached that way, waits that ended before all
     * the promised blocks came (the producer stopped) */
    int64_t coal_requests, coal_tokens, coal_fallbacks;
};

struct infer_engine {
    infer_model *m;
    int refs;               /* the creator's hold + one per session */
    bool creator_released;
    int n_ctx, n_batch, n_threads;
    struct kv_arena arena;
    bool use_cache;
    bool coalesce;          /* sessions wait for a concurrent prefill of their prefix (coalesce.c) */
    infer_session *sessions; /* every live session of this engine (list through next_in_engine) */
    struct prefix_cache pc;
    struct disk_tier *disk;
    struct run_state rs;
    float *logits;          /* (logits_rows, n_vocab) step output */
    int logits_rows;
    int32_t *b_tokens;      /* (n_batch) batch scratch */
    struct kv_seq **b_seq;
    int64_t *b_pos;
    bool *b_want;
    int32_t high_blocks, low_blocks, min_blocks; /* budget in blocks */
    int32_t high_eff, low_eff;                  /* after memory-pressure shrinking */
    uint64_t mem_floor;
    double mem_checked_at;
    struct mem_info mem;   /* the last reading (check_memory, at most once a second) */
    int64_t mem_shrinks;   /* checks that found MemAvailable below the floor */
    char fp_hex[33];
    infer_log_fn log;
    void *log_ctx;
    struct engine_metrics mt;
};

struct infer_session {
    infer_engine *e;
    int n_ctx;
    int32_t salt;
    struct kv_seq seq;
    int32_t *tokens;        /* (n_ctx) tokens whose K/V seq holds */
    int32_t *nodes;         /* (n_ctx / bt + 1) trie node of each registered full block */
    int32_t n_reg;          /* leading full blocks registered: nodes[k] holds blocks[k] */
    int32_t *pending;       /* (n_ctx) queue: pending[pend_head .. pend_head + pend_n) */
    int64_t pend_head, pend_n;
    float *logits;          /* (n_vocab) after the last evaluated token */
    bool have_logits;
    bool ttft_pending;      /* the current request has not produced logits yet */
    bool req_reused;        /* the current request reused tokens (a hit) */
    bool in_step;           /* scratch: listed in the current step */
    double t_request;
    infer_session_stats stats;
    infer_session *prev_in_engine, *next_in_engine; /* e->sessions */
    /* Coalescing (coalesce.c).  While wait_on is set the session is a
     * waiter: its registered chain ends at a block boundary (seq.n_tokens ==
     * n_reg * bt), its queue holds the rest of its request, and wait_on (a
     * live session of the same engine, same salt, whose tokens agree with
     * this request up to wait_end blocks) is computing blocks [n_reg,
     * wait_end).  A waiter takes no part in steps; it attaches those blocks
     * from the trie as they are registered. */
    infer_session *wait_on;
    int32_t wait_end;
    int64_t req_coalesced;  /* tokens of the current request attached from a concurrent prefill */
};

/* Ensure `need` free blocks: evict down to the low mark when using them
 * would cross the high mark.  INFER_ERR_FULL (with a message saying how
 * many blocks running sessions pin) when they cannot be had. */
infer_status engine_make_room(infer_engine *e, int32_t need);
/* Most tokens (<= want) that can be appended to seq with the arena's free blocks. */
int64_t engine_tokens_fitting(const infer_engine *e, const struct kv_seq *seq, int64_t want);
void engine_retain(infer_engine *e);
void engine_release(infer_engine *e);

/* ---- coalescing (coalesce.c) ---- */

/* Blocks past block k0 of tokens[0..n) that another running session of the
 * engine will compute (same salt, same tokens from position 0): the end of
 * that run of blocks, or k0 when none.  *producer gets the session. */
int32_t coalesce_find(infer_session *s, const int32_t *tokens, int64_t n, int32_t k0, infer_session **producer);
/* Make s wait for producer's blocks [s->n_reg, end). */
void coalesce_start(infer_session *s, infer_session *producer, int32_t end);
/* End s's wait: attach what the trie holds of the promised blocks, then let
 * it compute the rest itself.  No-op when s is not waiting. */
void coalesce_stop(infer_session *s);
/* End the waits of every session waiting on p (p is freed, re-prepared or
 * truncated). */
void coalesce_release_waiters(infer_session *p);
/* Before a step over ss[0..n) (each marked in_step): waiters attach blocks
 * registered since the last step; a wait ends when its blocks are all there
 * or its producer is not in this step or cannot supply them any more. */
void coalesce_resolve(infer_engine *e, infer_session *const *ss, int n);
/* Drop positions >= n of a session (session.c). */
void session_seq_truncate(infer_session *s, int64_t n);

/* Append tokens[0..n) whose K/V has just been stored to the session, and
 * register the blocks they complete in the prefix cache (session.c). */
void session_commit(infer_session *s, const int32_t *tokens, int64_t n);

#endif
