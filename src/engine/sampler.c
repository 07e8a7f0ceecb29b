/*
 * sampler.c - next-token selection with llama.cpp's chain and defaults:
 * repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
 * temp <= 0 is greedy (argmax, first index on ties).
 *
 * With a grammar (infer_sampler_set_grammar) the chain runs on the allowed
 * tokens only, as if every other logit were -inf, without computing the
 * whole mask when it need not: greedy checks the argmax first (inside a
 * JSON string it almost always fits); top-k takes the k best allowed tokens
 * from a window of the 4k best logits; only when too few of them fit (or
 * top-k is off) the vocabulary trie gives the full set.
 */
#include "util/common.h"
#include "model/model.h"
#include "text/grammar.h"
#include "text/tokenizer.h"
#include "../../kernels/ops.h"

#include <pthread.h>

#include <math.h>
#include <string.h>
#include <time.h>

struct cand {
    int32_t id;
    float logit;
    float p;
};

struct infer_sampler {
    infer_sampler_params p;
    uint64_t rng[2];
    int32_t *history; /* ring of the last repeat_last_n tokens */
    int n_hist, hist_pos;
    struct cand *cands;
    int n_cands_cap;
    /* grammar (NULL: none) */
    const struct gvocab *gv;
    struct gmatcher gm;
    uint64_t *mask;     /* (n_vocab / 64 + 1) scratch of the full mask */
};

void infer_sampler_params_default(infer_sampler_params *p)
{
    memset(p, 0, sizeof(*p));
    p->temp = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = INFER_SEED_RANDOM;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* xoroshiro128+ : uniform double in [0, 1) */
static double rng_next(uint64_t s[2])
{
    uint64_t s0 = s[0], s1 = s[1], r = s0 + s1;
    s1 ^= s0;
    s[0] = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
    s[1] = (s1 << 37) | (s1 >> 27);
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

infer_status infer_sampler_new(infer_sampler **out, const infer_sampler_params *params)
{
    *out = NULL;
    infer_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    if (params)
        s->p = *params;
    else
        infer_sampler_params_default(&s->p);
    if (s->p.repeat_last_n < 0 || s->p.repeat_last_n > 1 << 20 || !(s->p.top_p >= 0.0f) || !(s->p.min_p >= 0.0f)) {
        free(s);
        return infer_error(INFER_ERR_INVALID, "bad sampler parameters");
    }
    if (s->p.repeat_last_n > 0 && !(s->history = calloc((size_t)s->p.repeat_last_n, sizeof(int32_t)))) {
        free(s);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    uint64_t seed = s->p.seed;
    if (seed == INFER_SEED_RANDOM) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)s;
    }
    s->rng[0] = splitmix64(&seed);
    s->rng[1] = splitmix64(&seed);
    *out = s;
    return INFER_OK;
}

void infer_sampler_free(infer_sampler *s)
{
    if (!s)
        return;
    free(s->history);
    free(s->cands);
    if (s->gv)
        gmatcher_free(&s->gm);
    free(s->mask);
    free(s);
}

void infer_sampler_reset(infer_sampler *s)
{
    s->n_hist = s->hist_pos = 0;
    if (s->gv)
        gmatcher_reset(&s->gm);
}

/* ------------------------------------------------------------ grammar */

static pthread_mutex_t gvocab_mu = PTHREAD_MUTEX_INITIALIZER;

/* The model's vocabulary trie, built on first use (texts as the streaming
 * detokenizer writes them: control tokens are empty, so never allowed). */
static const struct gvocab *model_gvocab(const infer_model *cm)
{
    struct infer_model *m = (struct infer_model *)cm;
    pthread_mutex_lock(&gvocab_mu);
    if (!m->gvocab) {
        int32_t n = m->c.n_vocab, nt = tokenizer_n_vocab(m->tok);
        const char **texts = calloc((size_t)n, sizeof(*texts));
        uint32_t *lens = calloc((size_t)n, sizeof(*lens));
        bool *eog = calloc((size_t)n, sizeof(*eog));
        size_t cap = tokenizer_max_token_text(m->tok) + 1, total = 0;
        char *buf = NULL;
        uint64_t *off = calloc((size_t)n, sizeof(*off));
        if (texts && lens && eog && off) {
            for (int32_t i = 0; i < nt; i++) {
                int64_t k = tokenizer_token_to_text(m->tok, i, false, NULL, 0);
                lens[i] = k > 0 ? (uint32_t)k : 0;
                off[i] = total;
                total += lens[i];
                eog[i] = infer_model_is_eog(m, i);
            }
            buf = malloc(total + 1);
        }
        if (buf) {
            for (int32_t i = 0; i < nt; i++) {
                if (lens[i])
                    tokenizer_token_to_text(m->tok, i, false, buf + off[i], cap);
                texts[i] = buf + off[i];
            }
            for (int32_t i = nt; i < n; i++)
                texts[i] = buf;
            m->gvocab = gvocab_new(texts, lens, eog, n);
        }
        free(buf);
        free(texts);
        free(lens);
        free(eog);
        free(off);
    }
    pthread_mutex_unlock(&gvocab_mu);
    return m->gvocab;
}

infer_status infer_sampler_set_grammar(infer_sampler *s, const infer_model *m, const infer_grammar *g)
{
    if (s->gv) {
        gmatcher_free(&s->gm);
        s->gv = NULL;
    }
    if (!g)
        return INFER_OK;
    const struct gvocab *v = model_gvocab(m);
    if (!v)
        return infer_error(INFER_ERR_NOMEM, "out of memory building the vocabulary trie");
    free(s->mask);
    s->mask = malloc(((size_t)gvocab_n(v) / 64 + 1) * sizeof(uint64_t));
    if (!s->mask || !gmatcher_init(&s->gm, (const struct grammar *)g)) {
        gmatcher_free(&s->gm);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    s->gv = v;
    return INFER_OK;
}

infer_grammar_state infer_sampler_grammar_state(const infer_sampler *s)
{
    if (!s->gv)
        return INFER_GRAMMAR_NONE;
    if (!gmatcher_complete(&s->gm))
        return INFER_GRAMMAR_OPEN;
    uint64_t next[4];
    gmatcher_next_bytes(&s->gm, next);
    return next[0] | next[1] | next[2] | next[3] ? INFER_GRAMMAR_COMPLETE : INFER_GRAMMAR_DONE;
}

size_t infer_sampler_grammar_close(const infer_sampler *s, char *out, size_t cap)
{
    return s->gv ? gmatcher_shortest_completion(&s->gm, out, cap) : 0;
}

void infer_sampler_accept(infer_sampler *s, int32_t token)
{
    if (s->gv)
        gvocab_accept(s->gv, &s->gm, token);
    if (s->p.repeat_last_n <= 0)
        return;
    s->history[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n)
        s->n_hist++;
}

static int cmp_cand_desc(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Move the k largest logits to the front of c[0..n) (quickselect), k < n. */
static void select_top_k(struct cand *c, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        struct cand pivot = c[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (cmp_cand_desc(&c[i], &pivot) < 0)
                i++;
            while (cmp_cand_desc(&c[j], &pivot) > 0)
                j--;
            if (i <= j) {
                struct cand t = c[i];
                c[i] = c[j];
                c[j] = t;
                i++;
                j--;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* softmax of c[0..n).logit into .p (c sorted descending, so c[0] is the max) */
static void softmax_cands(struct cand *c, int n, float temp)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        c[i].p = expf((c[i].logit - c[0].logit) / temp);
        sum += c[i].p;
    }
    for (int i = 0; i < n; i++)
        c[i].p = (float)(c[i].p / sum);
}

int32_t infer_argmax(const float *x, int n) { return n > 0 && x ? (int32_t)argmax(x, n) : 0; }

/* top-p -> min-p -> temperature -> draw over c[0..n), sorted descending. */
static int32_t draw(infer_sampler *s, struct cand *c, int n)
{
    if (s->p.top_p < 1.0f) {
        softmax_cands(c, n, 1.0f);
        double cum = 0.0;
        for (int i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0.0f) {
        /* keep logits >= max + log(min_p), i.e. p >= min_p * p_max */
        const float floor_logit = c[0].logit + logf(s->p.min_p);
        int keep = 1;
        while (keep < n && c[keep].logit >= floor_logit)
            keep++;
        n = keep;
    }
    softmax_cands(c, n, s->p.temp);
    double r = rng_next(s->rng), cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += c[i].p;
        if (r < cum)
            return c[i].id;
    }
    return c[n - 1].id;
}

/* Move the allowed candidates of c[0..w) to the front, keeping their order;
 * returns how many. */
static int keep_allowed(infer_sampler *s, struct cand *c, int w)
{
    int j = 0;
    uint64_t next[4];
    gmatcher_next_bytes(&s->gm, next);
    for (int i = 0; i < w; i++) {
        int b = gvocab_first_byte(s->gv, c[i].id); /* most fail on their first byte: no walk */
        if (b >= 0 && !(next[b >> 6] >> (b & 63) & 1))
            continue;
        if (gvocab_token_ok(s->gv, &s->gm, c[i].id)) {
            struct cand t = c[j];
            c[j++] = c[i];
            c[i] = t;
        }
    }
    return j;
}

/* Reorder c[0..n) so that c[0..r) are allowed by the grammar: with k > 0,
 * the r = min(k, allowed) best in descending order; with k <= 0, all of
 * them, unordered.  Returns r (0: nothing is allowed). */
static int grammar_filter(infer_sampler *s, struct cand *c, int n, int k)
{
    /* one window of the best logits; when too few of them fit, the state
     * is a structural one (a key, a bracket) where the trie walk is cheap */
    int w = k * 4 < 64 ? 64 : k * 4;
    if (k > 0 && w < n) {
        select_top_k(c, n, w);
        qsort(c, (size_t)w, sizeof(*c), cmp_cand_desc);
        if (keep_allowed(s, c, w) >= k)
            return k;
    }
    gvocab_mask(s->gv, &s->gm, s->mask);
    int j = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = c[i].id;
        if (s->mask[id >> 6] >> (id & 63) & 1) {
            struct cand t = c[j];
            c[j++] = c[i];
            c[i] = t;
        }
    }
    if (k > 0) {
        if (j > k) {
            select_top_k(c, j, k);
            j = k;
        }
        qsort(c, (size_t)j, sizeof(*c), cmp_cand_desc);
    }
    return j;
}

int32_t infer_sampler_sample(infer_sampler *s, const float *logits, int n_vocab)
{
    if (n_vocab <= 0)
        return -1;
    const bool penalise = s->p.repeat_penalty != 1.0f && s->p.repeat_penalty > 0.0f && s->n_hist > 0;
    if (s->gv) {
        if (n_vocab > gvocab_n(s->gv))
            n_vocab = gvocab_n(s->gv);
        if (infer_sampler_grammar_state(s) == INFER_GRAMMAR_DONE)
            return gvocab_eog(s->gv);
        if (s->p.temp <= 0.0f && !penalise) {
            int32_t id = (int32_t)argmax(logits, n_vocab);
            if (gvocab_token_ok(s->gv, &s->gm, id))
                return id;
        }
    } else if (s->p.temp <= 0.0f && !penalise) { /* greedy: no candidate list needed */
        return (int32_t)argmax(logits, n_vocab);
    }
    if (s->n_cands_cap < n_vocab) {
        struct cand *nc = realloc(s->cands, (size_t)n_vocab * sizeof(*nc));
        if (!nc)
            return -1;
        s->cands = nc;
        s->n_cands_cap = n_vocab;
    }
    struct cand *c = s->cands;
    for (int i = 0; i < n_vocab; i++)
        c[i] = (struct cand){i, logits[i], 0.0f};

    /* repetition penalty over the recent history (each distinct token once) */
    if (s->p.repeat_penalty != 1.0f && s->p.repeat_penalty > 0.0f) {
        for (int i = 0; i < s->n_hist; i++) {
            int32_t t = s->history[i];
            bool seen = false;
            for (int j = 0; j < i; j++)
                seen |= s->history[j] == t;
            if (seen || t < 0 || t >= n_vocab)
                continue;
            if (c[t].logit > 0.0f)
                c[t].logit /= s->p.repeat_penalty;
            else
                c[t].logit *= s->p.repeat_penalty;
        }
    }

    if (s->gv) {
        const bool greedy = s->p.temp <= 0.0f;
        const int k = greedy ? 1 : s->p.top_k > 0 && s->p.top_k < n_vocab ? s->p.top_k : 0;
        int n = grammar_filter(s, c, n_vocab, k);
        if (n == 0) /* a dead end (nesting past the matcher's limits): stop */
            return gvocab_eog(s->gv);
        if (greedy)
            return c[0].id;
        if (k == 0)
            qsort(c, (size_t)n, sizeof(*c), cmp_cand_desc);
        return draw(s, c, n);
    }

    if (s->p.temp <= 0.0f) { /* greedy */
        int best = 0;
        for (int i = 1; i < n_vocab; i++)
            if (c[i].logit > c[best].logit)
                best = i;
        return c[best].id;
    }

    int n = n_vocab;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top_k(c, n, s->p.top_k);
        n = s->p.top_k;
    }
    qsort(c, (size_t)n, sizeof(*c), cmp_cand_desc);
    return draw(s, c, n);
}
