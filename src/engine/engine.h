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
};

struct infer_engine {
    infer_model *m;
    int refs;               /* the creator's hold + one per session */
    bool creator_released;
    int n_ctx, n_batch, n_threads;
    struct kv_arena arena;
    bool use_cache;
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
};

/* Ensure `need` free blocks: evict down to the low mark when using them
 * would cross the high mark.  INFER_ERR_FULL (with a message saying how
 * many blocks running sessions pin) when they cannot be had. */
infer_status engine_make_room(infer_engine *e, int32_t need);
/* Most tokens (<= want) that can be appended to seq with the arena's free blocks. */
int64_t engine_tokens_fitting(const infer_engine *e, const struct kv_seq *seq, int64_t want);
void engine_retain(infer_engine *e);
void engine_release(infer_engine *e);

/* Append tokens[0..n) whose K/V has just been stored to the session, and
 * register the blocks they complete in the prefix cache (session.c). */
void session_commit(infer_session *s, const int32_t *tokens, int64_t n);

#endif
