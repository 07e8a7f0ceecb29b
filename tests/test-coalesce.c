/*
 * test-coalesce.c - concurrent prefills of one prefix are computed once
 * (src/engine/coalesce.c).
 *
 * Sessions of one engine are stepped by hand, so every case is exact and
 * takes no timing: a session prepared while another is half-way through the
 * prefill of the same prefix waits (computes nothing) and attaches that
 * prefix's blocks as they are registered, then computes only its own
 * remainder; its logits are bit-identical to the same prompt computed alone
 * in an engine without a cache.  A wait ends, without losing a finished
 * block, when its producer is freed, truncated or not stepped; another salt
 * never waits; --no-coalesce (no_coalesce) turns it off.
 *
 * Model: models/gen/gemma3-q8_0.gguf (a real GGUF file that make check
 * generates), 4-token KV blocks and 8-token batches, so that a 50-token
 * prefix takes several steps.
 */
#include "test-common.h"

#include <math.h>

static infer_model *model;
static int nv;

enum { BT = 4, BATCH = 8, SHARED = 50, LEN = 61 };

static int group_setup(void **state)
{
    (void)state;
    const char *build = getenv("INFER_BUILDDIR") ? getenv("INFER_BUILDDIR") : ".";
    const char *path = test_path(build, "models/gen/gemma3-q8_0.gguf");
    if (infer_model_load(&model, path, NULL) != INFER_OK) {
        fprintf(stderr, "%s: %s\n", path, infer_last_error());
        return -1;
    }
    nv = infer_model_n_vocab(model);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    infer_model_free(model);
    return 0;
}

static infer_engine *engine(bool no_cache, bool no_coalesce)
{
    infer_engine_params p;
    infer_engine_params_default(&p);
    p.n_ctx = 128;
    p.n_batch = BATCH;
    p.n_threads = 1;
    p.kv_block = BT;
    p.n_seq = 4;
    p.no_prefix_cache = no_cache;
    p.no_coalesce = no_coalesce;
    p.mem_floor = UINT64_MAX;
    infer_engine *e;
    if (infer_engine_new(&e, model, &p) != INFER_OK)
        fail_msg("engine: %s", infer_last_error());
    return e;
}

/* Prompt `which`: SHARED tokens common to all, then its own suffix up to
 * LEN (which < 0: no suffix of its own, the shared part continued). */
static void prompt(int32_t *t, int which)
{
    uint32_t x = 12345;
    t[0] = 2;
    for (int i = 1; i < LEN; i++) {
        x = x * 1103515245u + 12345u;
        t[i] = 10 + (int32_t)((x >> 8) % 200);
    }
    if (which >= 0)
        for (int i = SHARED; i < LEN; i++)
            t[i] = 10 + (i * 13 + which * 31) % 200;
}

/* The first logits of tokens[0..n) computed alone, without any cache. */
static float *alone(const int32_t *t, int n)
{
    infer_engine *e = engine(true, false);
    infer_session *s = test_session(e, NULL);
    assert_int_equal(infer_session_set_tokens(s, t, n, NULL), INFER_OK);
    float *l = malloc((size_t)nv * sizeof(float));
    memcpy(l, infer_session_logits(s), (size_t)nv * sizeof(float));
    infer_session_free(s);
    infer_engine_free(e);
    return l;
}

/* Step ss[0..n) until none has a queue; returns the steps taken. */
static int run(infer_engine *e, infer_session **ss, int n)
{
    int steps = 0;
    for (;;) {
        infer_session *act[8];
        int na = 0;
        for (int i = 0; i < n; i++)
            if (ss[i] && infer_session_n_pending(ss[i]) > 0)
                act[na++] = ss[i];
        if (na == 0)
            return steps;
        infer_status st[8];
        int64_t nt;
        assert_int_equal(infer_engine_step(e, act, na, st, &nt), INFER_OK);
        assert_true(nt > 0); /* never a step that does nothing */
        assert_true(++steps < 1000);
    }
}

static void assert_logits(const infer_session *s, const float *want)
{
    const float *l = infer_session_logits(s);
    assert_non_null(l);
    assert_memory_equal(l, want, (size_t)nv * sizeof(float)); /* bit-identical */
}

/* A waits for nothing; B and C, prepared while A is half-way, wait and
 * compute only their own suffixes; C's whole prompt is A's prefix. */
static void test_coalesce_basic(void **state)
{
    (void)state;
    int32_t ta[LEN], tb[LEN], tc[LEN];
    prompt(ta, 0);
    prompt(tb, 1);
    prompt(tc, 2);
    const int nc = 48; /* C: 12 whole blocks of the shared prefix, nothing else */
    float *wa = alone(ta, LEN), *wb = alone(tb, LEN), *wc = alone(tc, nc);
    infer_engine *e = engine(false, false);
    infer_session *a = test_session(e, "t"), *b = test_session(e, "t"), *c = test_session(e, "t");
    int64_t reused;
    assert_int_equal(infer_session_prepare(a, ta, LEN, &reused), INFER_OK);
    assert_false(infer_session_waiting(a));
    int64_t nt;
    assert_int_equal(infer_engine_step(e, &a, 1, NULL, &nt), INFER_OK);
    assert_int_equal(nt, BATCH); /* blocks 0 and 1 are registered */
    assert_int_equal(infer_session_prepare(b, tb, LEN, &reused), INFER_OK);
    assert_int_equal(reused, BATCH);
    assert_true(infer_session_waiting(b));
    assert_int_equal(infer_session_prepare(c, tc, nc, &reused), INFER_OK);
    assert_true(infer_session_waiting(c));
    /* while they wait, a step evaluates A's tokens only */
    infer_session *all[3] = {a, b, c};
    int64_t a_left = infer_session_n_pending(a);
    assert_int_equal(infer_engine_step(e, all, 3, NULL, &nt), INFER_OK);
    assert_int_equal(nt, BATCH);
    assert_int_equal(infer_session_n_pending(a), a_left - BATCH);
    run(e, all, 3);
    assert_logits(a, wa);
    assert_logits(b, wb);
    assert_logits(c, wc);
    infer_session_stats sa, sb, sc;
    infer_session_get_stats(a, &sa);
    infer_session_get_stats(b, &sb);
    infer_session_get_stats(c, &sc);
    assert_int_equal(sa.n_prompt_tokens, LEN);
    assert_int_equal(sa.last_coalesced_tokens, 0);
    /* B: 8 cached at prepare, blocks 2..11 (40 tokens) from A, computed 48.. */
    assert_int_equal(sb.last_coalesced_tokens, SHARED / BT * BT - BATCH);
    assert_int_equal(sb.n_prompt_tokens, LEN - SHARED / BT * BT);
    /* C: everything came from A but its last token, evaluated for logits */
    assert_int_equal(sc.last_coalesced_tokens, nc - 1 - BATCH);
    assert_int_equal(sc.n_prompt_tokens, 1);
    infer_cache_metrics m;
    infer_engine_get_metrics(e, &m);
    assert_int_equal(m.coalesced_requests, 2);
    assert_int_equal(m.coalesced_tokens, sb.last_coalesced_tokens + sc.last_coalesced_tokens);
    assert_int_equal(m.coalesce_fallbacks, 0);
    assert_int_equal(m.prefill_tokens, LEN + (LEN - 48) + 1);
    infer_session_free(a);
    infer_session_free(b);
    infer_session_free(c);
    infer_engine_free(e);
    free(wa);
    free(wb);
    free(wc);
}

/* The producer leaves half-way (freed: a cancelled request; or truncated):
 * the waiter keeps every block it finished and computes the rest. */
static void producer_leaves(bool free_it)
{
    int32_t ta[LEN], tb[LEN];
    prompt(ta, 0);
    prompt(tb, 1);
    float *wb = alone(tb, LEN);
    infer_engine *e = engine(false, false);
    infer_session *a = test_session(e, NULL), *b = test_session(e, NULL);
    assert_int_equal(infer_session_prepare(a, ta, LEN, NULL), INFER_OK);
    assert_int_equal(infer_engine_step(e, &a, 1, NULL, NULL), INFER_OK);
    assert_int_equal(infer_session_prepare(b, tb, LEN, NULL), INFER_OK);
    assert_true(infer_session_waiting(b));
    infer_session *both[2] = {a, b};
    assert_int_equal(infer_engine_step(e, both, 2, NULL, NULL), INFER_OK); /* A: blocks 2, 3 */
    if (free_it) {
        infer_session_free(a);
        a = NULL;
    } else {
        infer_session_truncate(a, 0);
    }
    assert_false(infer_session_waiting(b));
    infer_session_stats sb;
    infer_session_get_stats(b, &sb);
    assert_int_equal(sb.last_coalesced_tokens, BATCH); /* blocks 2 and 3, attached when A left */
    infer_session *only[1] = {b};
    run(e, only, 1);
    assert_logits(b, wb);
    infer_session_get_stats(b, &sb);
    assert_int_equal(sb.n_prompt_tokens, LEN - 2 * BATCH);
    infer_cache_metrics m;
    infer_engine_get_metrics(e, &m);
    assert_int_equal(m.coalesce_fallbacks, 1);
    infer_session_free(a);
    infer_session_free(b);
    infer_engine_free(e);
    free(wb);
}

static void test_coalesce_producer_freed(void **state)
{
    (void)state;
    producer_leaves(true);
}

static void test_coalesce_producer_truncated(void **state)
{
    (void)state;
    producer_leaves(false);
}

/* A waiter stepped without its producer (nobody advances it) does not wait:
 * stepped alone, and through set_tokens, which steps only its session. */
static void test_coalesce_producer_not_stepped(void **state)
{
    (void)state;
    int32_t ta[LEN], tb[LEN];
    prompt(ta, 0);
    prompt(tb, 1);
    float *wa = alone(ta, LEN), *wb = alone(tb, LEN);
    infer_engine *e = engine(false, false);
    infer_session *a = test_session(e, NULL), *b = test_session(e, NULL), *c = test_session(e, NULL);
    assert_int_equal(infer_session_prepare(a, ta, LEN, NULL), INFER_OK);
    assert_int_equal(infer_session_prepare(b, tb, LEN, NULL), INFER_OK);
    assert_true(infer_session_waiting(b));
    int64_t nt;
    assert_int_equal(infer_engine_step(e, &b, 1, NULL, &nt), INFER_OK);
    assert_false(infer_session_waiting(b));
    assert_int_equal(nt, BATCH);
    infer_session *only[1] = {b};
    run(e, only, 1);
    assert_logits(b, wb);
    /* set_tokens of A's prompt while A still has it all queued: C's blocks
     * past the 12 B registered would come from A, which nobody steps */
    int64_t reused;
    assert_int_equal(infer_session_set_tokens(c, ta, LEN, &reused), INFER_OK);
    assert_int_equal(reused, SHARED / BT * BT);
    assert_false(infer_session_waiting(c));
    assert_logits(c, wa);
    infer_cache_metrics m;
    infer_engine_get_metrics(e, &m);
    assert_int_equal(m.coalesced_requests, 2);
    assert_int_equal(m.coalesce_fallbacks, 2);
    infer_session_free(a);
    infer_session_free(b);
    infer_session_free(c);
    infer_engine_free(e);
    free(wa);
    free(wb);
}

/* Another tenant never waits for (nor attaches) another tenant's blocks;
 * no_coalesce turns waiting off. */
static void test_coalesce_salt_and_off(void **state)
{
    (void)state;
    int32_t ta[LEN];
    prompt(ta, 0);
    for (int off = 0; off < 2; off++) {
        infer_engine *e = engine(false, off == 1);
        infer_session *a = test_session(e, "alice"), *b = test_session(e, off ? "alice" : "bob");
        assert_int_equal(infer_session_prepare(a, ta, LEN, NULL), INFER_OK);
        assert_int_equal(infer_engine_step(e, &a, 1, NULL, NULL), INFER_OK);
        int64_t reused;
        assert_int_equal(infer_session_prepare(b, ta, LEN, &reused), INFER_OK);
        assert_false(infer_session_waiting(b));
        assert_int_equal(reused, off ? BATCH : 0); /* the same tenant still hits the cache */
        infer_session *both[2] = {a, b};
        run(e, both, 2);
        infer_cache_metrics m;
        infer_engine_get_metrics(e, &m);
        assert_int_equal(m.coalesced_requests, 0);
        assert_int_equal(m.prefill_tokens, 2 * LEN - reused);
        infer_session_free(a);
        infer_session_free(b);
        infer_engine_free(e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coalesce_basic),
        cmocka_unit_test(test_coalesce_producer_freed),
        cmocka_unit_test(test_coalesce_producer_truncated),
        cmocka_unit_test(test_coalesce_producer_not_stepped),
        cmocka_unit_test(test_coalesce_salt_and_off),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
