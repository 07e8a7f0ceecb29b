/*
 * engine.c - an engine: one model, one KV block arena shared by its
 * sessions, the prefix cache over the arena (prefix.c, cache_disk.c), the
 * watermark budget, the batched step that advances several sessions in one
 * forward pass (continuous batching), and the metrics.
 *
 * Budget (DESIGN.md decision 6).  The arena holds max(high, n_seq full
 * contexts) blocks, reserved once and committed lazily.  Blocks in use are
 * those held by sessions or by the cache; when taking more would cross the
 * high mark, unpinned cached blocks are evicted (LRU leaves first) until the
 * use is back at the low mark.  When MemAvailable drops below the floor the
 * marks shrink for a while and evicted blocks are handed back to the kernel.
 */
#include "engine.h"

#include "../../kernels/pool.h"
#include "../../kernels/types.h"

#include <omp.h>
#include <string.h>
#include <strings.h>

static void log_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "warning: %s\n", msg);
}

void infer_engine_params_default(infer_engine_params *p)
{
    memset(p, 0, sizeof(*p));
}

/* Default high watermark: a quarter of the RAM (of the cgroup's limit when
 * the process has one), and no more than half of what is available once the
 * model file (to stay in the page cache) and 512 MiB for everything else are
 * set aside.  mem: the reading at engine creation, NULL if unreadable. */
static uint64_t default_high(const struct mem_info *mem, uint64_t model_bytes)
{
    if (!mem)
        return (uint64_t)1 << 30;
    uint64_t reserve = model_bytes + ((uint64_t)512 << 20);
    uint64_t room = mem->avail > reserve ? (mem->avail - reserve) / 2 : 0;
    return room < mem->total / 4 ? room : mem->total / 4;
}

static uint64_t default_floor(const struct mem_info *mem)
{
    if (!mem)
        return (uint64_t)256 << 20;
    uint64_t f = mem->total / 16;
    return f < ((uint64_t)512 << 20) ? f : (uint64_t)512 << 20;
}

static void engine_destroy(infer_engine *e)
{
    if (e->use_cache) {
        if (e->disk)
            prefix_save_all(&e->pc);
        prefix_free(&e->pc);
    }
    disk_close(e->disk);
    kv_arena_free(&e->arena);
    run_state_free(&e->rs);
    free(e->logits);
    free(e->b_tokens);
    free(e->b_seq);
    free(e->b_pos);
    free(e->b_want);
    free(e);
}

void engine_retain(infer_engine *e) { e->refs++; }

void engine_release(infer_engine *e)
{
    if (--e->refs == 0)
        engine_destroy(e);
}

bool infer_kv_type_from_name(const char *name, infer_kv_type *out)
{
    if (!name || !out)
        return false;
    if (!strcasecmp(name, "f16"))
        *out = INFER_KV_F16;
    else if (!strcasecmp(name, "q8_0"))
        *out = INFER_KV_Q8_0;
    else
        return false;
    return true;
}

const char *infer_kv_type_name(infer_kv_type t) { return t == INFER_KV_Q8_0 ? "q8_0" : "f16"; }

void infer_engine_free(infer_engine *e)
{
    if (!e || e->creator_released)
        return;
    e->creator_released = true;
    engine_release(e);
}

infer_status infer_engine_new(infer_engine **out, infer_model *m, const infer_engine_params *params)
{
    *out = NULL;
    infer_engine_params p;
    if (params)
        p = *params;
    else
        infer_engine_params_default(&p);
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0 || p.kv_block < 0 || p.kv_block > 4096 || p.n_seq < 0 ||
        p.n_seq > 4096)
        return infer_error(INFER_ERR_INVALID, "negative or absurd engine parameters");
    if (p.n_ctx == 0)
        p.n_ctx = m->c.n_ctx_train < 4096 ? m->c.n_ctx_train : 4096;
    if (p.n_ctx > (1 << 22))
        return infer_error(INFER_ERR_INVALID, "context of %d tokens is too large", p.n_ctx);
    if (p.n_batch == 0)
        p.n_batch = 512;
    if (p.n_batch > p.n_ctx * (p.n_seq ? p.n_seq : 1))
        p.n_batch = p.n_ctx * (p.n_seq ? p.n_seq : 1);
    if (p.kv_block == 0)
        p.kv_block = 32;
    if (p.n_seq == 0)
        p.n_seq = 1;
    if (p.n_threads == 0)
        p.n_threads = infer_n_physical_cores();
    if (p.cache_high && p.cache_low > p.cache_high)
        return infer_error(INFER_ERR_INVALID, "the low watermark (%llu bytes) exceeds the high one (%llu bytes)",
                           (unsigned long long)p.cache_low, (unsigned long long)p.cache_high);
    omp_set_num_threads(p.n_threads); /* OpenBLAS path, perplexity */
    pool_set_threads(p.n_threads);    /* the forward pass */

    infer_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    e->m = m;
    e->refs = 1;
    e->n_ctx = p.n_ctx;
    e->n_batch = p.n_batch;
    e->n_threads = p.n_threads;
    e->use_cache = !p.no_prefix_cache;
    e->coalesce = e->use_cache && !p.no_coalesce;
    e->log = p.log ? p.log : log_stderr;
    e->log_ctx = p.log_ctx;

    /* budget in blocks */
    if ((unsigned)p.kv_type_k > INFER_KV_Q8_0 || (unsigned)p.kv_type_v > INFER_KV_Q8_0) {
        free(e);
        return infer_error(INFER_ERR_INVALID, "unknown KV cache type");
    }
    struct kv_shape shape = {m->c.n_layer, m->c.n_head_kv, m->c.head_dim, p.kv_block,
                             p.kv_type_k == INFER_KV_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16,
                             p.kv_type_v == INFER_KV_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16};
    const uint64_t block_bytes = kv_block_bytes(&shape);
    if (block_bytes == 0) {
        free(e);
        return infer_error(INFER_ERR_INVALID, "KV cache type %s/%s: q8_0 needs a head size divisible by 32 (this "
                                              "model's is %d)", infer_kv_type_name(p.kv_type_k),
                           infer_kv_type_name(p.kv_type_v), m->c.head_dim);
    }
    const struct mem_info *mem = mem_info_read(&e->mem) ? &e->mem : NULL; /* one reading for the defaults */
    uint64_t high = p.cache_high ? p.cache_high : default_high(mem, infer_gguf_file_size(m->gguf));
    uint64_t low = p.cache_low ? p.cache_low : high / 4 * 3;
    if (low > high)
        low = high;
    int64_t per_ctx = ((int64_t)p.n_ctx + p.kv_block - 1) / p.kv_block + 1; /* +1: copy-on-write */
    int64_t min_blocks = per_ctx * p.n_seq;
    int64_t high_blocks = (int64_t)(high / block_bytes), low_blocks = (int64_t)(low / block_bytes);
    if (high_blocks < min_blocks)
        high_blocks = min_blocks;
    if (high_blocks > INT32_MAX / 2) {
        free(e);
        return infer_error(INFER_ERR_INVALID, "cache budget of %llu bytes is too large",
                           (unsigned long long)high);
    }
    if (low_blocks > high_blocks)
        low_blocks = high_blocks;
    e->min_blocks = (int32_t)min_blocks;
    e->high_blocks = e->high_eff = (int32_t)high_blocks;
    e->low_blocks = e->low_eff = (int32_t)low_blocks;
    e->mem_floor = p.mem_floor ? p.mem_floor : default_floor(mem);
    if (mem && mem->cg_version && !p.cache_high) {
        char msg[200];
        snprintf(msg, sizeof(msg), "the cgroup memory limit (v%d, %.0f MiB) sizes the KV cache: high %.0f MiB, low %.0f MiB",
                 e->mem.cg_version, (double)e->mem.cg_limit / 1048576.0, (double)high_blocks * block_bytes / 1048576.0,
                 (double)low_blocks * block_bytes / 1048576.0);
        e->log(e->log_ctx, msg);
    }

    infer_status st;
    if ((st = kv_arena_init(&e->arena, &shape, (int32_t)high_blocks)) ||
        (st = run_state_init(&e->rs, m, p.n_batch, p.n_ctx))) {
        engine_destroy(e);
        return st;
    }
    /* a MoE model larger than the RAM: say what will happen rather than thrash silently */
    if (m->c.n_expert > 0 && mem && m->gguf->size > mem->total) {
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "the model (%.0f MiB) is larger than the RAM (%.0f MiB): experts not in the page cache are read "
                 "from storage whenever a token is routed to them (infer info shows which are resident; infer "
                 "warm --experts PROFILE keeps the hot ones in)",
                 (double)m->gguf->size / (1 << 20), (double)mem->total / (1 << 20));
        e->log(e->log_ctx, msg);
    }
    e->b_tokens = malloc((size_t)p.n_batch * sizeof(*e->b_tokens));
    e->b_seq = malloc((size_t)p.n_batch * sizeof(*e->b_seq));
    e->b_pos = malloc((size_t)p.n_batch * sizeof(*e->b_pos));
    e->b_want = malloc((size_t)p.n_batch * sizeof(*e->b_want));
    if (!e->b_tokens || !e->b_seq || !e->b_pos || !e->b_want) {
        engine_destroy(e);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    uint8_t fp[16];
    model_fingerprint(m->gguf, fp);
    /* blocks of another KV element type, or computed with LongRoPE's long
     * factors (a context beyond the original one), are another cache (F16
     * keys with the default factors stay those of earlier versions, so
     * existing disk tiers remain valid) */
    const bool rope_long = e->rs.rope_factors && e->rs.rope_factors == m->w.rope_long;
    if (p.kv_type_k != INFER_KV_F16 || p.kv_type_v != INFER_KV_F16 || rope_long) {
        sha256_ctx h;
        uint8_t d[32];
        const char tag[] = "infer-kv-type";
        const uint8_t types[2] = {(uint8_t)p.kv_type_k, (uint8_t)p.kv_type_v};
        sha256_init(&h);
        sha256_update(&h, tag, sizeof(tag));
        sha256_update(&h, fp, 16);
        sha256_update(&h, types, 2);
        if (rope_long)
            sha256_update(&h, "rope-long", 9);
        sha256_final(&h, d);
        memcpy(fp, d, 16);
    }
    for (int i = 0; i < 16; i++)
        snprintf(e->fp_hex + 2 * i, 3, "%02x", fp[i]);
    if (e->use_cache) {
        if ((st = prefix_init(&e->pc, &e->arena, fp))) {
            e->use_cache = false;
            engine_destroy(e);
            return st;
        }
        if (p.cache_dir && *p.cache_dir) {
            uint64_t disk_max = p.cache_disk_max ? p.cache_disk_max : 4 * (uint64_t)high_blocks * block_bytes;
            if ((st = disk_open(&e->disk, p.cache_dir, fp, &e->arena, disk_max, e->log, e->log_ctx))) {
                engine_destroy(e);
                return st;
            }
            e->pc.disk = e->disk;
        }
    }
    *out = e;
    return INFER_OK;
}

infer_status infer_engine_save(infer_engine *e)
{
    if (!e->use_cache || !e->disk)
        return infer_error(INFER_ERR_INVALID, "the engine has no cache directory");
    prefix_save_all(&e->pc);
    return INFER_OK;
}

static void note_evictions(infer_engine *e, int32_t n)
{
    if (n <= 0)
        return;
    int64_t sec = (int64_t)infer_now();
    int slot = (int)(sec % 60);
    if (e->mt.ev_sec[slot] != sec) {
        e->mt.ev_sec[slot] = sec;
        e->mt.ev_count[slot] = 0;
    }
    e->mt.ev_count[slot] += n;
}

void infer_engine_clear_cache(infer_engine *e)
{
    if (e->use_cache)
        note_evictions(e, prefix_evict(&e->pc, e->arena.n_blocks));
}

const char *infer_engine_fingerprint(const infer_engine *e) { return e->fp_hex; }

size_t infer_engine_expert_counts(const infer_engine *e, uint64_t *counts, size_t n)
{
    const size_t total = (size_t)e->m->c.n_layer * (size_t)e->m->c.n_expert;
    if (!e->rs.expert_counts)
        return 0;
    if (counts && n > 0)
        memcpy(counts, e->rs.expert_counts, (n < total ? n : total) * sizeof(*counts));
    return total;
}

/* Shrink the marks while MemAvailable is below the floor (checked at most
 * once a second). */
static void check_memory(infer_engine *e)
{
    if (!e->use_cache || e->mem_floor == UINT64_MAX)
        return;
    double now = infer_now();
    if (now - e->mem_checked_at < 1.0)
        return;
    e->mem_checked_at = now;
    if (!mem_info_read(&e->mem))
        return;
    uint64_t avail = e->mem.avail;
    if (avail >= e->mem_floor) {
        e->high_eff = e->high_blocks;
        e->low_eff = e->low_blocks;
        e->pc.discard_on_evict = false;
        return;
    }
    int64_t deficit = (int64_t)((e->mem_floor - avail) / e->arena.block_bytes) + 1;
    int64_t high = (int64_t)kv_arena_n_used(&e->arena) - deficit;
    if (high < e->min_blocks)
        high = e->min_blocks;
    if (high > e->high_blocks)
        high = e->high_blocks;
    e->high_eff = (int32_t)high;
    e->low_eff = (int32_t)((int64_t)e->low_blocks * high / e->high_blocks);
    e->pc.discard_on_evict = true;
    e->mem_shrinks++;
}

infer_status engine_make_room(infer_engine *e, int32_t need)
{
    struct kv_arena *a = &e->arena;
    if (need <= 0)
        return INFER_OK;
    check_memory(e);
    if (e->use_cache && kv_arena_n_used(a) + need > e->high_eff) {
        int64_t target = (int64_t)e->low_eff - need; /* blocks in use left after evicting */
        int64_t want_free = a->n_blocks - (target > 0 ? target : 0);
        if (want_free < need)
            want_free = need;
        if (want_free > a->n_blocks)
            want_free = a->n_blocks;
        note_evictions(e, prefix_evict(&e->pc, (int32_t)want_free));
    }
    if (a->n_free >= need)
        return INFER_OK;
    int32_t cached = e->use_cache ? prefix_n_unpinned(&e->pc) : 0;
    return infer_error(INFER_ERR_FULL,
                       "KV cache full: %d more blocks of %d tokens needed, %d free of %d; %d are pinned by running "
                       "sessions (%d cached blocks cannot be evicted yet)",
                       need, a->s.block_tokens, a->n_free, a->n_blocks, kv_arena_n_used(a) - cached, cached);
}

int64_t engine_tokens_fitting(const infer_engine *e, const struct kv_seq *seq, int64_t want)
{
    int64_t lo = 0, hi = want;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (kv_seq_blocks_needed(seq, &e->arena, seq->n_tokens + mid) <= e->arena.n_free)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Room for k tokens after the sequence: evict if needed; when the whole
 * chunk does not fit, take what does (at least one token, else FULL). */
static infer_status reserve_tokens(infer_engine *e, struct kv_seq *seq, int64_t *k)
{
    int32_t need = kv_seq_blocks_needed(seq, &e->arena, seq->n_tokens + *k);
    infer_status st = engine_make_room(e, need);
    if (st) {
        int64_t fit = engine_tokens_fitting(e, seq, *k);
        if (fit <= 0)
            return st;
        *k = fit;
    }
    return kv_seq_reserve(seq, &e->arena, seq->n_tokens + *k);
}

static void record_ttft(infer_engine *e, infer_session *s)
{
    double t = infer_now() - s->t_request;
    s->stats.last_ttft = t;
    s->ttft_pending = false;
    if (s->req_reused) {
        e->mt.ttft_hit_n++;
        e->mt.ttft_hit_sum += t;
        e->mt.ttft_hit_last = t;
    } else {
        e->mt.ttft_cold_n++;
        e->mt.ttft_cold_sum += t;
        e->mt.ttft_cold_last = t;
    }
}

infer_status infer_engine_step(infer_engine *e, infer_session *const *ss, int n, infer_status *status,
                               int64_t *n_tokens)
{
    if (n_tokens)
        *n_tokens = 0;
    if (n < 0 || (n > 0 && !ss))
        return infer_error(INFER_ERR_INVALID, "step: bad session list");
    infer_status st = INFER_OK;
    int i;
    for (i = 0; i < n; i++) {
        if (!ss[i] || ss[i]->e != e) {
            st = infer_error(INFER_ERR_INVALID, "step: session %d is NULL or belongs to another engine", i);
            break;
        }
        if (ss[i]->in_step) {
            st = infer_error(INFER_ERR_INVALID, "step: session %d is listed twice", i);
            break;
        }
        ss[i]->in_step = true;
    }
    if (!st) /* waiters attach what their producers registered; stuck waits end */
        coalesce_resolve(e, ss, n);
    for (int j = 0; j < i; j++)
        ss[j]->in_step = false;
    if (st)
        return st;
    int64_t *take = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (!take)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++)
        if (status)
            status[i] = INFER_OK;

    /* one token for every queue first, then prefill chunks in order; a
     * waiter (coalesce.c) gets nothing.  Should nobody else get anything
     * (the budget went to no one), the waits end rather than stall. */
    for (int pass = 0; pass < 2; pass++) {
        int64_t budget = e->n_batch, waiting = 0;
        for (i = 0; i < n && budget > 0; i++)
            if (ss[i]->pend_n > 0 && !ss[i]->wait_on) {
                take[i] = 1;
                budget--;
            }
        for (i = 0; i < n && budget > 0; i++)
            if (ss[i]->pend_n > take[i] && !ss[i]->wait_on) {
                int64_t more = ss[i]->pend_n - take[i];
                if (more > budget)
                    more = budget;
                take[i] += more;
                budget -= more;
            }
        for (i = 0; i < n; i++)
            waiting += ss[i]->wait_on != NULL;
        if (budget < e->n_batch || waiting == 0)
            break;
        for (i = 0; i < n; i++)
            coalesce_stop(ss[i]);
    }

    /* blocks; build the batch */
    int64_t nb = 0;
    int n_want = 0;
    for (i = 0; i < n; i++) {
        if (!take[i])
            continue;
        infer_session *s = ss[i];
        infer_status rs = reserve_tokens(e, &s->seq, &take[i]);
        if (rs) {
            take[i] = 0;
            if (status)
                status[i] = rs;
            continue;
        }
        for (int64_t t = 0; t < take[i]; t++) {
            e->b_tokens[nb] = s->pending[s->pend_head + t];
            e->b_seq[nb] = &s->seq;
            e->b_pos[nb] = s->seq.n_tokens + t;
            e->b_want[nb] = t == take[i] - 1 && take[i] == s->pend_n;
            n_want += e->b_want[nb];
            nb++;
        }
    }
    if (nb == 0) {
        free(take);
        return INFER_OK;
    }
    if (n_want > e->logits_rows) {
        float *nl = realloc(e->logits, (size_t)n_want * (size_t)e->m->c.n_vocab * sizeof(float));
        if (!nl) {
            free(take);
            return infer_error(INFER_ERR_NOMEM, "out of memory for logits");
        }
        e->logits = nl;
        e->logits_rows = n_want;
    }
    struct batch b = {nb, e->b_tokens, e->b_seq, e->b_pos, e->b_want};
    double t0 = infer_now();
    st = forward_batch(e->m, &e->rs, &e->arena, &b, e->logits);
    double dt = infer_now() - t0;
    if (st) {
        for (i = 0; i < n; i++)
            if (take[i] && status)
                status[i] = st;
        free(take);
        return st;
    }

    /* commit: advance the sequences, register blocks, hand out logits */
    const size_t n_vocab = (size_t)e->m->c.n_vocab;
    int row = 0;
    int64_t n_prefill = 0;
    for (i = 0; i < n; i++) {
        if (!take[i])
            continue;
        infer_session *s = ss[i];
        bool prefill = s->ttft_pending || take[i] > 1;
        bool want = take[i] == s->pend_n;
        session_commit(s, s->pending + s->pend_head, take[i]);
        s->pend_head += take[i];
        s->pend_n -= take[i];
        if (s->pend_n == 0)
            s->pend_head = 0;
        if (want) {
            memcpy(s->logits, e->logits + (size_t)row++ * n_vocab, n_vocab * sizeof(float));
            s->have_logits = true;
        }
        if (prefill) {
            s->stats.n_prompt_tokens += take[i];
            s->stats.prompt_seconds += dt;
            n_prefill += take[i];
        } else {
            s->stats.n_decode_tokens += take[i];
            s->stats.decode_seconds += dt;
        }
        if (want && s->ttft_pending)
            record_ttft(e, s);
    }
    e->mt.prefill_tokens += n_prefill;
    e->mt.decode_tokens += nb - n_prefill;
    e->mt.prefill_seconds += dt * (double)n_prefill / (double)nb;
    e->mt.decode_seconds += dt * (double)(nb - n_prefill) / (double)nb;
    if (n_tokens)
        *n_tokens = nb;
    free(take);
    return INFER_OK;
}

void infer_get_thread_stats(infer_thread_stats *out)
{
    struct pool_stats st;
    pool_get_stats(&st);
    *out = (infer_thread_stats){.max_threads = pool_max_threads(), .threads = pool_threads(), .drops = st.drops,
                                .raises = st.raises, .loops = st.loops, .loop_seconds = st.loop_seconds,
                                .stall_seconds = st.stall_seconds};
}

void infer_engine_get_metrics(const infer_engine *e, infer_cache_metrics *out)
{
    memset(out, 0, sizeof(*out));
    const struct engine_metrics *mt = &e->mt;
    const struct kv_arena *a = &e->arena;
    out->enabled = e->use_cache;
    out->page_mode = kv_page_mode_name(a->pages);
    out->block_tokens = a->s.block_tokens;
    out->block_bytes = a->block_bytes;
    out->queries = mt->queries;
    out->hits = mt->hits;
    out->query_tokens = mt->query_tokens;
    out->hit_tokens = mt->hit_tokens;
    out->hit_blocks = mt->hit_blocks;
    out->hit_rate = mt->query_tokens ? (double)mt->hit_tokens / (double)mt->query_tokens : 0.0;
    out->reused_tokens = mt->reused_tokens;
    out->prefill_tokens = mt->prefill_tokens;
    out->prefill_seconds = mt->prefill_seconds;
    out->prefill_tok_s = mt->prefill_seconds > 0 ? (double)mt->prefill_tokens / mt->prefill_seconds : 0.0;
    out->decode_tokens = mt->decode_tokens;
    out->decode_seconds = mt->decode_seconds;
    out->ttft_cold_n = mt->ttft_cold_n;
    out->ttft_hit_n = mt->ttft_hit_n;
    out->ttft_cold_last = mt->ttft_cold_last;
    out->ttft_hit_last = mt->ttft_hit_last;
    out->ttft_cold_avg = mt->ttft_cold_n ? mt->ttft_cold_sum / (double)mt->ttft_cold_n : 0.0;
    out->ttft_hit_avg = mt->ttft_hit_n ? mt->ttft_hit_sum / (double)mt->ttft_hit_n : 0.0;
    out->kv_bytes_in_use = (uint64_t)kv_arena_n_used(a) * a->block_bytes;
    out->kv_bytes_capacity = (uint64_t)a->n_blocks * a->block_bytes;
    out->cache_high = (uint64_t)e->high_eff * a->block_bytes;
    out->cache_low = (uint64_t)e->low_eff * a->block_bytes;
    out->mem_total = e->mem.total;
    out->mem_available = e->mem.avail;
    out->mem_cgroup_limit = e->mem.cg_limit;
    out->mem_floor = e->mem_floor == UINT64_MAX ? 0 : e->mem_floor;
    out->mem_shrinks = e->mem_shrinks;
    if (e->use_cache) {
        out->kv_bytes_cached = (uint64_t)prefix_n_unpinned(&e->pc) * a->block_bytes;
        out->cached_blocks = e->pc.n_live;
        out->evictions = e->pc.n_evicted;
    }
    int64_t now = (int64_t)infer_now();
    for (int k = 0; k < 60; k++)
        if (mt->ev_sec[k] > now - 60 && mt->ev_count[k] > 0)
            out->evictions_per_minute += (double)mt->ev_count[k];
    if (e->disk) {
        struct disk_stats ds;
        disk_get_stats(e->disk, &ds);
        out->disk_enabled = true;
        out->disk_dir = disk_path(e->disk);
        out->disk_reads = ds.reads;
        out->disk_writes = ds.writes;
        out->disk_read_bytes = ds.read_bytes;
        out->disk_write_bytes = ds.write_bytes;
        out->disk_bytes = ds.bytes;
        out->disk_files = ds.n_files;
        out->disk_errors = ds.errors;
        out->disk_write_errors = ds.write_errors;
    }
    out->coalesced_requests = mt->coal_requests;
    out->coalesced_tokens = mt->coal_tokens;
    out->coalesce_fallbacks = mt->coal_fallbacks;
}
