/*
 * session.c - the public model and session API: load a model (map, bind,
 * tokenizer), and evaluate token sequences in an engine (engine.c): a
 * session's request attaches the longest reusable prefix -- its own tokens
 * or blocks of the prefix cache, from memory or the disk tier -- queues the
 * rest, and the engine's step evaluates queued tokens in batches; each block
 * a session completes is registered in the prefix cache.
 */
#include "text/chat.h"
#include "engine.h"
#include "text/tokenizer.h"
#include "text/grammar.h"

#include "../../kernels/dispatch.h"

#include <string.h>

/* ---- models ---- */

infer_status infer_model_load(infer_model **out, const char *path, const infer_model_params *params)
{
    *out = NULL;
    double t0 = infer_now();
    char err[256];
    if (kernels_init(err, sizeof(err)) != 0)
        return infer_error(INFER_ERR_INVALID, "%s", err);
    infer_gguf *g;
    infer_status st = infer_gguf_open(&g, path, params ? params->flags : 0);
    if (st)
        return st;
    infer_model *m = calloc(1, sizeof(*m));
    if (!m) {
        infer_gguf_close(g);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    if ((st = model_bind(m, g)) || (st = tokenizer_load(&m->tok, g))) {
        infer_error_prefix(st, "%s", path);
        infer_model_free(m);
        return st;
    }
    if (tokenizer_n_vocab(m->tok) > m->c.n_vocab) {
        st = infer_error(INFER_ERR_FORMAT, "%s: the tokenizer has %d tokens but the embedding only %d rows", path,
                         tokenizer_n_vocab(m->tok), m->c.n_vocab);
        infer_model_free(m);
        return st;
    }
    model_repack(m, params);
    m->load_seconds = infer_now() - t0;
    *out = m;
    return INFER_OK;
}

void infer_model_free(infer_model *m)
{
    if (!m)
        return;
    tokenizer_free(m->tok);
    gvocab_free(m->gvocab);
    model_repack_release(m);
    model_unbind(m);
    infer_gguf_close(m->gguf);
    free(m);
}

const infer_gguf *infer_model_gguf(const infer_model *m) { return m->gguf; }
int infer_model_n_vocab(const infer_model *m) { return m->c.n_vocab; }
int infer_model_n_ctx_train(const infer_model *m) { return m->c.n_ctx_train; }
int infer_model_n_layers(const infer_model *m) { return m->c.n_layer; }
int infer_model_n_experts(const infer_model *m) { return m->c.n_expert; }
int infer_model_n_experts_used(const infer_model *m) { return m->c.n_expert_used; }
double infer_model_load_seconds(const infer_model *m) { return m->load_seconds; }

const char *infer_model_arch(const infer_model *m)
{
    return infer_gguf_get_str(m->gguf, "general.architecture", "?");
}

/* ---- sessions ---- */

void infer_session_params_default(infer_session_params *p)
{
    memset(p, 0, sizeof(*p));
}

infer_status infer_session_new_in(infer_session **out, infer_engine *e, const infer_session_params *params)
{
    *out = NULL;
    int n_ctx = params && params->n_ctx ? params->n_ctx : e->n_ctx;
    if (n_ctx < 0 || n_ctx > (1 << 22))
        return infer_error(INFER_ERR_INVALID, "context of %d tokens is out of range", n_ctx);
    infer_session *s = calloc(1, sizeof(*s));
    if (!s)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    s->e = e;
    s->n_ctx = n_ctx;
    s->salt = 0;
    if (e->use_cache && (s->salt = prefix_salt_id(&e->pc, params ? params->cache_salt : NULL)) < 0) {
        free(s);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    const int bt = e->arena.s.block_tokens;
    s->tokens = malloc((size_t)n_ctx * sizeof(int32_t));
    s->pending = malloc((size_t)n_ctx * sizeof(int32_t));
    s->nodes = malloc(((size_t)n_ctx / bt + 1) * sizeof(int32_t));
    s->logits = malloc((size_t)e->m->c.n_vocab * sizeof(float));
    if (!s->tokens || !s->pending || !s->nodes || !s->logits) {
        free(s->tokens);
        free(s->pending);
        free(s->nodes);
        free(s->logits);
        free(s);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    engine_retain(e);
    s->next_in_engine = e->sessions;
    if (e->sessions)
        e->sessions->prev_in_engine = s;
    e->sessions = s;
    *out = s;
    return INFER_OK;
}

infer_status infer_session_new(infer_session **out, infer_model *m, const infer_session_params *params)
{
    *out = NULL;
    infer_session_params p;
    if (params)
        p = *params;
    else
        infer_session_params_default(&p);
    infer_engine_params ep;
    infer_engine_params_default(&ep);
    ep.n_ctx = p.n_ctx;
    ep.n_batch = p.n_batch;
    ep.n_threads = p.n_threads;
    ep.kv_block = p.kv_block;
    ep.cache_high = p.cache_high;
    ep.cache_low = p.cache_low;
    ep.cache_disk_max = p.cache_disk_max;
    ep.cache_dir = p.cache_dir;
    ep.no_prefix_cache = p.no_prefix_cache;
    ep.kv_type_k = p.kv_type_k;
    ep.kv_type_v = p.kv_type_v;
    infer_engine *e;
    infer_status st = infer_engine_new(&e, m, &ep);
    if (st)
        return st;
    p.n_ctx = 0; /* the engine's */
    st = infer_session_new_in(out, e, &p);
    infer_engine_free(e); /* the session holds it now; it goes with the session */
    return st;
}

void infer_session_free(infer_session *s)
{
    if (!s)
        return;
    infer_engine *e = s->e;
    coalesce_release_waiters(s); /* they take what it finished and compute the rest */
    if (s->prev_in_engine)
        s->prev_in_engine->next_in_engine = s->next_in_engine;
    else
        e->sessions = s->next_in_engine;
    if (s->next_in_engine)
        s->next_in_engine->prev_in_engine = s->prev_in_engine;
    kv_seq_free(&s->seq, &s->e->arena);
    free(s->tokens);
    free(s->pending);
    free(s->nodes);
    free(s->logits);
    engine_release(s->e);
    free(s);
}

infer_engine *infer_session_engine(const infer_session *s) { return s->e; }
int infer_session_n_ctx(const infer_session *s) { return s->n_ctx; }
const infer_model *s_model(const infer_session *s) { return s->e->m; }
int64_t infer_session_n_tokens(const infer_session *s) { return s->seq.n_tokens; }
const int32_t *infer_session_tokens(const infer_session *s) { return s->tokens; }
int64_t infer_session_n_pending(const infer_session *s) { return s->pend_n; }
void infer_session_get_stats(const infer_session *s, infer_session_stats *out) { *out = s->stats; }

const float *infer_session_logits(const infer_session *s)
{
    return s->have_logits && s->pend_n == 0 ? s->logits : NULL;
}

/* Drop positions >= n; registered blocks beyond stay in the cache. */
void session_seq_truncate(infer_session *s, int64_t n)
{
    const int bt = s->e->arena.s.block_tokens;
    kv_seq_truncate(&s->seq, &s->e->arena, n);
    if (s->n_reg > s->seq.n_tokens / bt)
        s->n_reg = (int32_t)(s->seq.n_tokens / bt);
}

void infer_session_truncate(infer_session *s, int64_t n)
{
    if (n < 0)
        n = 0;
    coalesce_release_waiters(s);
    s->wait_on = NULL;
    s->pend_head = s->pend_n = 0;
    if (n < s->seq.n_tokens) {
        session_seq_truncate(s, n);
        s->have_logits = false;
    }
}

infer_status infer_session_set_salt(infer_session *s, const char *salt)
{
    int32_t id = 0;
    if (s->e->use_cache && (id = prefix_salt_id(&s->e->pc, salt)) < 0)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    infer_session_truncate(s, 0);
    s->salt = id;
    return INFER_OK;
}

/* Register the full blocks completed since the last call.  A block whose
 * identity is already cached (computed by another session meanwhile) is
 * replaced by the cached one: same tokens, same K/V, one copy kept. */
static void session_register(infer_session *s)
{
    infer_engine *e = s->e;
    if (!e->use_cache)
        return;
    const int bt = e->arena.s.block_tokens;
    while (s->n_reg < s->seq.n_tokens / bt) {
        int32_t k = s->n_reg;
        int32_t parent = k > 0 ? s->nodes[k - 1] : -1;
        int32_t node = prefix_insert(&e->pc, parent, s->salt, s->tokens + (int64_t)k * bt, s->seq.blocks[k]);
        if (node < 0)
            return;
        int32_t cached = e->pc.nodes[node].block;
        if (cached != s->seq.blocks[k]) {
            kv_block_ref(&e->arena, cached);
            kv_block_unref(&e->arena, s->seq.blocks[k]);
            s->seq.blocks[k] = cached;
        }
        s->nodes[k] = node;
        s->n_reg++;
    }
}

void session_commit(infer_session *s, const int32_t *tokens, int64_t n)
{
    memcpy(s->tokens + s->seq.n_tokens, tokens, (size_t)n * sizeof(int32_t));
    s->seq.n_tokens += n;
    session_register(s);
}

/* Continue the session's registered chain from the disk tier: read blocks
 * k = n_reg, n_reg + 1, ... of tokens (up to max_blocks) into new arena
 * blocks, register and attach them.  The session must hold exactly its
 * registered blocks; h is the hash of the last one (or the root).  Returns
 * the number of blocks attached. */
static int32_t attach_from_disk(infer_session *s, const int32_t *tokens, int32_t max_blocks, struct prefix_hash h)
{
    infer_engine *e = s->e;
    struct kv_arena *a = &e->arena;
    const int bt = a->s.block_tokens;
    const char *salt = prefix_salt_name(&e->pc, s->salt);
    int32_t got = 0;
    while (s->n_reg < max_blocks) {
        int32_t k = s->n_reg;
        const int32_t *t = tokens + (int64_t)k * bt;
        struct prefix_hash hk = prefix_block_hash(&e->pc, h, s->salt, t);
        int32_t de = disk_find(e->disk, hk, k, salt);
        if (de < 0 || engine_make_room(e, 1) != INFER_OK)
            break;
        int32_t b = kv_block_alloc(a);
        if (disk_read(e->disk, de, tokens, (int64_t)(k + 1) * bt, salt, kv_block_data(a, b)) != INFER_OK) {
            kv_block_unref(a, b);
            break;
        }
        int32_t node = prefix_insert(&e->pc, k > 0 ? s->nodes[k - 1] : -1, s->salt, t, b);
        if (node < 0 || e->pc.nodes[node].block != b || kv_seq_attach(&s->seq, a, b) != INFER_OK) {
            kv_block_unref(a, b);
            break;
        }
        kv_block_unref(a, b); /* the allocation's reference: the node and the sequence hold it now */
        e->pc.nodes[node].on_disk = true;
        memcpy(s->tokens + (int64_t)k * bt, t, (size_t)bt * sizeof(int32_t));
        s->nodes[k] = node;
        s->n_reg++;
        h = hk;
        got++;
    }
    return got;
}

/* Blocks after the in-memory chain that the disk tier could supply; *h
 * advances to the hash of the last of them. */
static int32_t disk_count(infer_session *s, const int32_t *tokens, int32_t from, int32_t max_blocks,
                          struct prefix_hash *h)
{
    infer_engine *e = s->e;
    const int bt = e->arena.s.block_tokens;
    const char *salt = prefix_salt_name(&e->pc, s->salt);
    int32_t k = from;
    for (; k < max_blocks; k++) {
        struct prefix_hash hk = prefix_block_hash(&e->pc, *h, s->salt, tokens + (int64_t)k * bt);
        if (disk_find(e->disk, hk, k, salt) < 0)
            break;
        *h = hk;
    }
    return k - from;
}

/* Attach the first k rows of a block read from disk entry de (depth `depth`,
 * continuing the session's registered chain): registered under its own
 * tokens, shared, copied before the session writes into it.  Returns
 * whether it was attached. */
static bool attach_partial_from_disk(infer_session *s, const int32_t *tokens, int32_t depth, int32_t de, int32_t k)
{
    infer_engine *e = s->e;
    struct kv_arena *a = &e->arena;
    const int bt = a->s.block_tokens;
    const char *salt = prefix_salt_name(&e->pc, s->salt);
    if (s->n_reg != depth || engine_make_room(e, 1) != INFER_OK)
        return false;
    int32_t b = kv_block_alloc(a);
    int32_t *own = malloc((size_t)bt * sizeof(int32_t));
    bool ok = own && disk_read(e->disk, de, tokens, (int64_t)depth * bt + k, salt, kv_block_data(a, b)) == INFER_OK;
    int32_t node = -1;
    if (ok) {
        memcpy(own, disk_block_tokens(e->disk, de), (size_t)bt * sizeof(int32_t));
        node = prefix_insert(&e->pc, depth > 0 ? s->nodes[depth - 1] : -1, s->salt, own, b);
        ok = node >= 0 && kv_seq_attach(&s->seq, a, e->pc.nodes[node].block) == INFER_OK;
    }
    if (ok && e->pc.nodes[node].block == b)
        e->pc.nodes[node].on_disk = true;
    kv_block_unref(a, b); /* the allocation's reference */
    free(own);
    if (!ok)
        return false;
    memcpy(s->tokens + (int64_t)depth * bt, tokens + (int64_t)depth * bt, (size_t)k * sizeof(int32_t));
    session_seq_truncate(s, (int64_t)depth * bt + k);
    return true;
}

infer_status infer_session_prepare(infer_session *s, const int32_t *tokens, int64_t n, int64_t *n_reused)
{
    infer_engine *e = s->e;
    struct kv_arena *a = &e->arena;
    const int bt = a->s.block_tokens;
    const double t0 = infer_now(); /* time to first token counts disk reads too */
    if (n_reused)
        *n_reused = 0;
    if (n <= 0 || !tokens)
        return infer_error(INFER_ERR_INVALID, "empty prompt");
    if (n > s->n_ctx)
        return infer_error(INFER_ERR_FULL, "prompt of %lld tokens exceeds the context of %d", (long long)n,
                           s->n_ctx);
    coalesce_release_waiters(s); /* this session's queue changes: its waiters go on alone */
    s->wait_on = NULL;
    s->req_coalesced = 0;
    s->stats.last_coalesced_tokens = 0;
    s->pend_head = s->pend_n = 0;
    s->have_logits = false;

    /* the session's own history */
    int64_t own = 0;
    while (own < s->seq.n_tokens && own < n && s->tokens[own] == tokens[own])
        own++;
    if (own == n)
        own = n - 1; /* the last token is always evaluated so that its logits are fresh */

    /* the prefix cache: memory, then disk */
    int64_t from_cache = 0, hit_blocks = 0, hit_tokens = 0;
    infer_session *producer = NULL; /* coalescing: the session computing our next blocks */
    int32_t wait_end = 0;
    if (e->use_cache) {
        int32_t max_blocks = (int32_t)(n / bt);
        int32_t *chain = malloc(((size_t)max_blocks + 1) * sizeof(int32_t));
        if (!chain)
            return infer_error(INFER_ERR_NOMEM, "out of memory");
        struct prefix_hash h;
        int32_t m = prefix_match(&e->pc, s->salt, tokens, n, max_blocks, chain, &h);
        struct prefix_hash hd = h; /* the hash where the disk chain ends */
        int32_t dm = e->disk ? disk_count(s, tokens, m, max_blocks, &hd) : 0;
        /* the blocks after those that another session is computing right
         * now: wait for them (coalesce.c) rather than compute them again */
        wait_end = coalesce_find(s, tokens, n, m + dm, &producer);
        /* and the first rows of a cached block that continues the chain,
         * from memory (children of the last node) or disk (not when waiting:
         * the whole block is coming) */
        int32_t pk = 0, pnode = -1, dk = 0, dnode = -1;
        int64_t at = (int64_t)(m + dm) * bt, left = producer ? 0 : n - 1 - at;
        if (m > 0 && dm == 0 && left > 0)
            pnode = prefix_partial(&e->pc, chain[m - 1], tokens + at, left, &pk);
        if (e->disk && left > 0)
            dnode = disk_partial(e->disk, hd, m + dm, prefix_salt_name(&e->pc, s->salt), tokens + at, left, &dk);
        if (dk > pk)
            pk = dk;
        else
            dnode = -1;
        int64_t cache_tokens = (int64_t)(m + dm) * bt + pk;
        if (cache_tokens > n - 1)
            cache_tokens = n - 1;
        if (producer && (int64_t)wait_end * bt <= own)
            producer = NULL; /* the session's own history goes as far */
        if (cache_tokens > own || producer) {
            /* keep the blocks the session shares with the chain, attach the rest */
            int32_t j = 0;
            while (j < s->n_reg && j < m && s->nodes[j] == chain[j])
                j++;
            session_seq_truncate(s, (int64_t)j * bt);
            for (int32_t k = j; k < m; k++) {
                if (kv_seq_attach(&s->seq, a, e->pc.nodes[chain[k]].block) != INFER_OK)
                    break;
                memcpy(s->tokens + (int64_t)k * bt, tokens + (int64_t)k * bt, (size_t)bt * sizeof(int32_t));
                s->nodes[k] = chain[k];
                s->n_reg = k + 1;
            }
            if (s->n_reg == m && dm > 0)
                attach_from_disk(s, tokens, m + dm, h);
            hit_blocks = s->n_reg;
            /* a partial block is shared as is and copied before its first write */
            if (dnode >= 0) {
                hit_blocks += attach_partial_from_disk(s, tokens, m + dm, dnode, pk);
            } else if (pnode >= 0 && s->n_reg == m &&
                       kv_seq_attach(&s->seq, a, e->pc.nodes[pnode].block) == INFER_OK) {
                memcpy(s->tokens + (int64_t)m * bt, tokens + (int64_t)m * bt, (size_t)pk * sizeof(int32_t));
                session_seq_truncate(s, (int64_t)m * bt + pk);
                hit_blocks++;
            }
            hit_tokens = s->seq.n_tokens;
            from_cache = s->seq.n_tokens;
            session_seq_truncate(s, s->seq.n_tokens < n - 1 ? s->seq.n_tokens : n - 1);
            if (producer && (s->n_reg != m + dm || s->seq.n_tokens != (int64_t)s->n_reg * bt))
                producer = NULL; /* an attach fell short: compute from here */
        } else {
            hit_blocks = m;
            hit_tokens = (int64_t)m * bt + pk;
            session_seq_truncate(s, own);
        }
        free(chain);
    } else {
        session_seq_truncate(s, own);
    }
    int64_t reused = s->seq.n_tokens;

    /* queue the rest */
    memcpy(s->pending, tokens + reused, (size_t)(n - reused) * sizeof(int32_t));
    s->pend_n = n - reused;
    if (producer)
        coalesce_start(s, producer, wait_end);
    s->t_request = t0;
    s->ttft_pending = true;
    s->req_reused = reused > 0;
    s->stats.n_reused_tokens += reused;
    s->stats.n_cached_tokens += from_cache < reused ? from_cache : reused;
    s->stats.last_prompt_tokens = n;
    s->stats.last_reused_tokens = reused;
    struct engine_metrics *mt = &e->mt;
    mt->queries++;
    mt->query_tokens += n;
    mt->reused_tokens += reused;
    if (hit_blocks > 0) {
        mt->hits++;
        mt->hit_blocks += hit_blocks;
        mt->hit_tokens += hit_tokens < n ? hit_tokens : n;
    }
    if (n_reused)
        *n_reused = reused;
    return INFER_OK;
}

infer_status infer_session_push(infer_session *s, const int32_t *tokens, int64_t n)
{
    if (n <= 0 || !tokens)
        return infer_error(INFER_ERR_INVALID, "nothing to evaluate");
    if (s->seq.n_tokens + s->pend_n + n > s->n_ctx)
        return infer_error(INFER_ERR_FULL, "context full: %lld + %lld tokens exceed the context of %d",
                           (long long)(s->seq.n_tokens + s->pend_n), (long long)n, s->n_ctx);
    if (s->pend_head > 0) {
        memmove(s->pending, s->pending + s->pend_head, (size_t)s->pend_n * sizeof(int32_t));
        s->pend_head = 0;
    }
    memcpy(s->pending + s->pend_n, tokens, (size_t)n * sizeof(int32_t));
    s->pend_n += n;
    s->have_logits = false;
    return INFER_OK;
}

/* Step this session alone until its queue is empty.  On error the queue is
 * dropped (the tokens evaluated so far stay). */
static infer_status run_pending(infer_session *s)
{
    while (s->pend_n > 0) {
        infer_status one, st = infer_engine_step(s->e, &s, 1, &one, NULL);
        if (!st)
            st = one;
        if (st) {
            s->pend_head = s->pend_n = 0;
            s->have_logits = false;
            return st;
        }
    }
    return INFER_OK;
}

infer_status infer_session_set_tokens(infer_session *s, const int32_t *tokens, int64_t n, int64_t *n_reused)
{
    infer_status st = infer_session_prepare(s, tokens, n, n_reused);
    return st ? st : run_pending(s);
}

infer_status infer_session_append(infer_session *s, const int32_t *tokens, int64_t n)
{
    infer_status st = infer_session_push(s, tokens, n);
    return st ? st : run_pending(s);
}

infer_status infer_session_eval_all(infer_session *s, const int32_t *tokens, int64_t n, float *out)
{
    infer_engine *e = s->e;
    if (n <= 0 || !tokens || !out)
        return infer_error(INFER_ERR_INVALID, "nothing to evaluate");
    if (s->pend_n > 0)
        return infer_error(INFER_ERR_INVALID, "eval_all: tokens are still queued");
    if (s->seq.n_tokens + n > s->n_ctx)
        return infer_error(INFER_ERR_FULL, "context full: %lld + %lld tokens exceed the context of %d",
                           (long long)s->seq.n_tokens, (long long)n, s->n_ctx);
    const size_t n_vocab = (size_t)e->m->c.n_vocab;
    s->have_logits = false;
    double t0 = infer_now();
    for (int64_t i = 0; i < n;) {
        int64_t k = n - i < e->n_batch ? n - i : e->n_batch;
        infer_status st = engine_make_room(e, kv_seq_blocks_needed(&s->seq, &e->arena, s->seq.n_tokens + k));
        if (!st)
            st = kv_seq_reserve(&s->seq, &e->arena, s->seq.n_tokens + k);
        if (st)
            return st;
        for (int64_t t = 0; t < k; t++) {
            e->b_seq[t] = &s->seq;
            e->b_pos[t] = s->seq.n_tokens + t;
            e->b_want[t] = true;
        }
        struct batch b = {k, tokens + i, e->b_seq, e->b_pos, e->b_want};
        if ((st = forward_batch(e->m, &e->rs, &e->arena, &b, out + (size_t)i * n_vocab)))
            return st;
        session_commit(s, tokens + i, k);
        i += k;
    }
    memcpy(s->logits, out + (size_t)(n - 1) * n_vocab, n_vocab * sizeof(float));
    s->have_logits = true;
    double dt = infer_now() - t0;
    s->stats.n_prompt_tokens += n;
    s->stats.prompt_seconds += dt;
    e->mt.prefill_tokens += n;
    e->mt.prefill_seconds += dt;
    return INFER_OK;
}

/* ---- tokenizer access for the CLI and the server ---- */

int64_t infer_model_tokenize(const infer_model *m, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *out, int64_t cap)
{
    return tokenizer_encode(m->tok, text, len, add_special, parse_special, out, cap);
}

int64_t infer_model_tokenize_append(const infer_model *m, const char *text, int32_t **toks, int64_t n)
{
    const size_t len = strlen(text);
    int64_t cap = (int64_t)len + 16;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *p = realloc(*toks, (size_t)(n + cap) * sizeof(int32_t));
        if (!p)
            return infer_error(INFER_ERR_NOMEM, "tokenize: out of memory for %lld tokens", (long long)(n + cap));
        *toks = p;
        int64_t got = infer_model_tokenize(m, text, len, false, true, p + n, cap);
        if (got < 0 || got <= cap)
            return got < 0 ? got : n + got;
        cap = got;
    }
    return infer_error(INFER_ERR_INVALID, "tokenize: token count changed between passes");
}

int64_t infer_model_tokenize_chat(const infer_model *m, infer_chat_family f, const infer_chat_msg *msgs, size_t n,
                                  bool add_gen, int32_t **out)
{
    *out = NULL;
    infer_text_span *spans = NULL;
    size_t n_spans = 0;
    char *text = chat_format_public(f, msgs, n, add_gen, &spans, &n_spans);
    if (!text)
        return INFER_ERR_INVALID; /* message list rejected (infer_last_error() says why) */
    size_t len = strlen(text);
    int64_t cap = (int64_t)len + 16, got = INFER_ERR_NOMEM;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *p = realloc(*out, (size_t)cap * sizeof(int32_t));
        if (!p) {
            got = infer_error(INFER_ERR_NOMEM, "tokenize: out of memory for %lld tokens", (long long)cap);
            break;
        }
        *out = p;
        got = tokenizer_encode_literal(m->tok, text, len, true, true, spans, n_spans, *out, cap);
        if (got <= cap)
            break;
        cap = got;
    }
    free(text);
    free(spans);
    if (got < 0) {
        free(*out);
        *out = NULL;
    }
    return got;
}

int32_t infer_model_bos(const infer_model *m) { return tokenizer_bos(m->tok); }
bool infer_model_add_bos(const infer_model *m) { return tokenizer_add_bos(m->tok); }
int32_t infer_model_token_id(const infer_model *m, const char *piece) { return tokenizer_find(m->tok, piece); }

bool infer_model_is_eog(const infer_model *m, int32_t id)
{
    for (int i = 0; i < m->n_extra_eog; i++)
        if (m->extra_eog[i] == id)
            return true;
    return tokenizer_is_eog(m->tok, id);
}

bool infer_model_add_eog(infer_model *m, const char *piece)
{
    int32_t id = tokenizer_find(m->tok, piece);
    if (id < 0)
        return false;
    if (!infer_model_is_eog(m, id) && m->n_extra_eog < (int)(sizeof(m->extra_eog) / sizeof(m->extra_eog[0])))
        m->extra_eog[m->n_extra_eog++] = id;
    return true;
}

struct infer_detok {
    const struct tokenizer *t;
    struct detok_stream st;
};

infer_detok *infer_detok_new(const infer_model *m)
{
    infer_detok *d = calloc(1, sizeof(*d));
    if (d)
        d->t = m->tok;
    return d;
}

size_t infer_detok_push(infer_detok *d, int32_t id, char *out, size_t cap)
{
    return detok_stream_push(&d->st, d->t, id, out, cap);
}

size_t infer_detok_push_text(infer_detok *d, const char *text, size_t n, char *out, size_t cap)
{
    return detok_stream_push_text(&d->st, text, n, out, cap);
}

size_t infer_detok_flush(infer_detok *d, char *out, size_t cap)
{
    return detok_stream_flush(&d->st, out, cap);
}

void infer_detok_free(infer_detok *d)
{
    free(d);
}

double infer_now_seconds(void)
{
    return infer_now();
}
