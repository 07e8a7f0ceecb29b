/*
 * coalesce.c - concurrent cold prefills of one prefix are computed once.
 *
 * When a request's next prefix blocks are not cached yet but another session
 * of the engine is computing them right now -- the same cache salt and the
 * same tokens from position 0, which in one engine (one model fingerprint)
 * is exactly the identity the trie's chained block hash stands for
 * (prefix.h) -- infer_session_prepare() makes the new session a waiter
 * (coalesce_start) instead of queuing those blocks for computation.  The
 * producer is found by comparing the two token sequences directly (both are
 * in memory), so no hash collision can make a session wait for the wrong
 * blocks.
 *
 * A waiter takes no part in steps (infer_engine_step gives it no tokens).
 * The producer registers every block in the trie as soon as it is full
 * (session_commit after each step), and before every step the waiter
 * attaches the blocks registered since (coalesce_resolve).  Block by block,
 * not at the end: a producer stopped half-way still leaves every block it
 * finished, and the waiter pins each block as soon as it exists (a block
 * the producer no longer holds could otherwise be evicted before a wait
 * that only attached at the end).  Blocks are attached through the trie
 * (prefix_find with the waiter's own tokens), like a cache hit: the same
 * K/V bytes, so the same logits as computing alone.
 *
 * A wait never outlives its reason: it ends (coalesce_stop) when the
 * promised blocks are attached, when the producer is freed, prepared for
 * another request or truncated (coalesce_release_waiters), when the producer
 * is not listed in a step (nobody advances it: a session run alone), when
 * it has completed a promised block the trie does not hold, or has nothing
 * queued.  Then the waiter computes what is left of its request like any
 * other session.  Waits form no cycle: a session waits only on one prepared
 * before it, and preparing a session again ends the waits on it.
 */
#include "engine.h"

#include <string.h>

/* Length of the common prefix of tokens[0..n) and everything p holds or has
 * queued: its evaluated positions, then its queue. */
static int64_t common_prefix(const infer_session *p, const int32_t *tokens, int64_t n)
{
    int64_t i = 0;
    const int64_t have = p->seq.n_tokens;
    while (i < n && i < have && p->tokens[i] == tokens[i])
        i++;
    if (i < have)
        return i;
    const int32_t *q = p->pending + p->pend_head;
    for (int64_t j = 0; i < n && j < p->pend_n && q[j] == tokens[i]; j++)
        i++;
    return i;
}

int32_t coalesce_find(infer_session *s, const int32_t *tokens, int64_t n, int32_t k0, infer_session **producer)
{
    infer_engine *e = s->e;
    const int bt = e->arena.s.block_tokens;
    *producer = NULL;
    int32_t best = k0;
    if (!e->coalesce || !e->use_cache)
        return k0;
    for (infer_session *p = e->sessions; p; p = p->next_in_engine) {
        /* block k0 must still be ahead of p: had p completed it with these
         * tokens, the trie would have given it to us */
        if (p == s || p->salt != s->salt || p->pend_n == 0 || p->seq.n_tokens >= (int64_t)(k0 + 1) * bt)
            continue;
        int32_t end = (int32_t)(common_prefix(p, tokens, n) / bt);
        if (end > best) {
            best = end;
            *producer = p;
        }
    }
    return best;
}

void coalesce_start(infer_session *s, infer_session *producer, int32_t end)
{
    s->wait_on = producer;
    s->wait_end = end;
    s->e->mt.coal_requests++;
}

/* Attach the promised blocks the trie holds now, in order.  The waiter's
 * queue starts at its chain's end, so its next block's tokens are the
 * queue's first bt. */
static void catch_up(infer_session *s)
{
    infer_engine *e = s->e;
    struct prefix_cache *pc = &e->pc;
    const int bt = e->arena.s.block_tokens;
    int64_t got = 0;
    while (s->n_reg < s->wait_end && s->pend_n >= bt && s->seq.n_tokens == (int64_t)s->n_reg * bt) {
        const int32_t k = s->n_reg, parent = k > 0 ? s->nodes[k - 1] : -1;
        const int32_t *t = s->pending + s->pend_head;
        struct prefix_hash ph = parent >= 0 ? pc->nodes[parent].h : prefix_root_hash(pc, s->salt);
        int32_t node = prefix_find(pc, prefix_block_hash(pc, ph, s->salt, t), parent, s->salt, t);
        if (node < 0 || kv_seq_attach(&s->seq, &e->arena, pc->nodes[node].block) != INFER_OK)
            break;
        pc->nodes[node].tick = ++pc->tick;
        memcpy(s->tokens + (int64_t)k * bt, t, (size_t)bt * sizeof(int32_t));
        s->nodes[k] = node;
        s->n_reg = k + 1;
        s->pend_head += bt;
        s->pend_n -= bt;
        got += bt;
    }
    if (got > 0 && s->pend_n == 0) {
        /* the whole request came that way: its last token is evaluated
         * again so that its logits are fresh (the shared block is copied
         * before that write) */
        session_seq_truncate(s, s->seq.n_tokens - 1);
        s->pend_head--;
        s->pend_n = 1;
        got--;
    }
    if (got == 0)
        return;
    s->req_coalesced += got;
    s->req_reused = true;
    s->stats.last_coalesced_tokens = s->req_coalesced;
    s->stats.last_reused_tokens += got;
    s->stats.n_reused_tokens += got;
    s->stats.n_cached_tokens += got;
    e->mt.coal_tokens += got;
    e->mt.reused_tokens += got;
}

/* The promised blocks are all attached (or the request has no whole block
 * left to take). */
static bool wait_complete(const infer_session *s)
{
    return s->n_reg >= s->wait_end || s->pend_n < s->e->arena.s.block_tokens;
}

void coalesce_stop(infer_session *s)
{
    if (!s->wait_on)
        return;
    catch_up(s);
    if (!wait_complete(s))
        s->e->mt.coal_fallbacks++;
    s->wait_on = NULL;
}

void coalesce_release_waiters(infer_session *p)
{
    for (infer_session *w = p->e->sessions; w; w = w->next_in_engine)
        if (w->wait_on == p)
            coalesce_stop(w);
}

void coalesce_resolve(infer_engine *e, infer_session *const *ss, int n)
{
    const int bt = e->arena.s.block_tokens;
    for (int i = 0; i < n; i++) {
        infer_session *s = ss[i];
        if (!s->wait_on)
            continue;
        catch_up(s);
        const infer_session *p = s->wait_on;
        bool stuck = !p->in_step || p->pend_n == 0 || p->seq.n_tokens >= (int64_t)(s->n_reg + 1) * bt;
        if (wait_complete(s) || stuck)
            coalesce_stop(s);
    }
}

bool infer_session_waiting(const infer_session *s)
{
    return s->wait_on != NULL;
}
