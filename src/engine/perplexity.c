/*
 * perplexity.c - perplexity over a token sequence and KL divergence against a
 * reference run, by llama-perplexity's methods and file format (so the
 * figures, and the base files, can be exchanged with llama.cpp's directly).
 *
 * Both walk the same chunks: consecutive runs of n_ctx tokens, each from an
 * empty context with its first token replaced by BOS (when the model adds
 * one), scoring positions n_ctx/2 .. n_ctx-2 against the next token.
 */
#include "model/model.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* One chunk's tokens (BOS in place) and its logits, n_ctx x n_vocab. */
struct chunk_run {
    infer_session *s;
    int n_ctx, n_vocab;
    int32_t *tokens;
    float *logits;
};

static infer_status chunk_init(struct chunk_run *c, infer_session *s, int n_ctx)
{
    memset(c, 0, sizeof(*c));
    c->s = s;
    c->n_ctx = n_ctx;
    c->n_vocab = s_model(s)->c.n_vocab;
    if (n_ctx < 8)
        return infer_error(INFER_ERR_INVALID, "perplexity needs a context of at least 8 tokens");
    if (n_ctx > infer_session_n_ctx(s))
        return infer_error(INFER_ERR_INVALID, "chunks of %d tokens do not fit the session's context of %d", n_ctx,
                           infer_session_n_ctx(s));
    c->logits = malloc((size_t)n_ctx * c->n_vocab * sizeof(float));
    c->tokens = malloc((size_t)n_ctx * sizeof(int32_t));
    if (!c->logits || !c->tokens)
        return infer_error(INFER_ERR_NOMEM, "out of memory for %d x %d logits", n_ctx, c->n_vocab);
    return INFER_OK;
}

static void chunk_free(struct chunk_run *c)
{
    if (c->s)
        infer_session_truncate(c->s, 0);
    free(c->logits);
    free(c->tokens);
}

/* c->tokens = src[0..n_ctx) with BOS in place of the first (when the model adds one). */
static void chunk_tokens(struct chunk_run *c, const int32_t *src)
{
    const infer_model *m = s_model(c->s);
    memcpy(c->tokens, src, (size_t)c->n_ctx * sizeof(int32_t));
    const int32_t bos = infer_model_bos(m);
    if (bos >= 0 && infer_model_add_bos(m))
        c->tokens[0] = bos;
}

/* Evaluate src[0..n_ctx) from an empty context, BOS first. */
static infer_status chunk_eval(struct chunk_run *c, const int32_t *src)
{
    chunk_tokens(c, src);
    infer_session_truncate(c->s, 0);
    return infer_session_eval_all(c->s, c->tokens, c->n_ctx, c->logits);
}

/* -log p(tok) under logits l, in double. */
static double token_nll(const float *l, int n_vocab, int32_t tok)
{
    float max = l[0];
    for (int v = 1; v < n_vocab; v++)
        if (l[v] > max)
            max = l[v];
    double sum = 0.0;
    for (int v = 0; v < n_vocab; v++)
        sum += exp((double)(l[v] - max));
    return log(sum) - (double)(l[tok] - max);
}

static void mean_err(double sum, double sum2, int64_t n, double *mean, double *err)
{
    *mean = n > 0 ? sum / (double)n : 0.0;
    const double var = n > 0 ? sum2 / (double)n - *mean * *mean : 0.0;
    *err = var > 0 && n > 10 ? sqrt(var / (double)(n - 1)) : 0.0;
}

static int64_t n_chunks_of(int64_t n, int n_ctx, int max_chunks)
{
    int64_t k = n / n_ctx;
    return max_chunks >= 0 && k > max_chunks ? max_chunks : k;
}

/* Words of one scored position in the base file: 2 floats + n_vocab, even. */
static size_t base_words(int n_vocab) { return (size_t)(2 * ((n_vocab + 1) / 2) + 4); }

/* llama-perplexity's log_softmax with base output: the position's
 * log-probabilities as uint16 steps of (max - min) / 65535 above min
 * (min clamped to max - 16), behind the float scale and minimum. */
static void base_encode(const float *l, int n_vocab, uint16_t *out)
{
    float max = l[0], min = l[0];
    for (int i = 1; i < n_vocab; i++) {
        max = fmaxf(max, l[i]);
        min = fminf(min, l[i]);
    }
    min = fmaxf(min, max - 16.0f);
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum += expf(l[i] - max);
    const float lse = (float)log(sum);
    const float hdr[2] = {(max - min) / 65535.0f, min - max - lse};
    memcpy(out, hdr, sizeof(hdr));
    uint16_t *q = out + 4;
    memset(q, 0, base_words(n_vocab) * 2 - 8);
    if (hdr[0] != 0.0f) {
        const float inv = 1.0f / hdr[0];
        for (int i = 0; i < n_vocab; i++)
            q[i] = l[i] > min ? (uint16_t)lrintf(inv * (l[i] - min)) : 0;
    }
}

static infer_status ppl_run(infer_session *s, const int32_t *tokens, int64_t n, int max_chunks, FILE *base,
                            double *ppl, double *err,
                            void (*progress)(void *ctx, int chunk, int n_chunks, double ppl), void *ctx)
{
    const int n_ctx = infer_session_n_ctx(s);
    const int64_t n_chunks = n_chunks_of(n, n_ctx, max_chunks);
    struct chunk_run c;
    infer_status st = chunk_init(&c, s, n_ctx);
    if (!st && n_chunks < 1)
        st = infer_error(INFER_ERR_INVALID, "%lld tokens are fewer than one chunk of %d", (long long)n, n_ctx);
    const int first = n_ctx / 2;
    uint16_t *enc = NULL;
    if (!st && base) {
        const int32_t hdr[4] = {n_ctx, c.n_vocab, (int32_t)n_chunks, 0};
        enc = malloc(base_words(c.n_vocab) * sizeof(uint16_t));
        if (!enc || fwrite("_logits_", 1, 8, base) != 8 || fwrite(hdr, 4, 3, base) != 3)
            st = infer_error(enc ? INFER_ERR_IO : INFER_ERR_NOMEM, "writing the base file failed");
        /* the tokens as evaluated (BOS in place) */
        for (int64_t i = 0; i < n_chunks && !st; i++) {
            chunk_tokens(&c, tokens + i * n_ctx);
            if (fwrite(c.tokens, 4, (size_t)n_ctx, base) != (size_t)n_ctx)
                st = infer_error(INFER_ERR_IO, "writing the base file failed");
        }
    }
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < n_chunks && !st; i++) {
        if ((st = chunk_eval(&c, tokens + i * n_ctx)))
            break;
        for (int j = first; j < n_ctx - 1 && !st; j++) {
            const float *l = c.logits + (size_t)j * c.n_vocab;
            const double v = token_nll(l, c.n_vocab, c.tokens[j + 1]);
            nll += v;
            nll2 += v * v;
            count++;
            if (enc) {
                base_encode(l, c.n_vocab, enc);
                if (fwrite(enc, 2, base_words(c.n_vocab), base) != base_words(c.n_vocab))
                    st = infer_error(INFER_ERR_IO, "writing the base file failed");
            }
        }
        if (!st && progress)
            progress(ctx, (int)i + 1, (int)n_chunks, exp(nll / (double)count));
    }
    free(enc);
    chunk_free(&c);
    if (st)
        return st;
    double mean, e;
    mean_err(nll, nll2, count, &mean, &e);
    *ppl = exp(mean);
    *err = *ppl * e;
    return INFER_OK;
}

infer_status infer_session_perplexity(infer_session *s, const int32_t *tokens, int64_t n, int max_chunks,
                                      double *ppl, double *err,
                                      void (*progress)(void *ctx, int chunk, int n_chunks, double ppl), void *ctx)
{
    return ppl_run(s, tokens, n, max_chunks, NULL, ppl, err, progress, ctx);
}

infer_status infer_session_kld_base_save(infer_session *s, const int32_t *tokens, int64_t n, int max_chunks,
                                         const char *path, double *ppl, double *err,
                                         void (*progress)(void *ctx, int chunk, int n_chunks, double ppl),
                                         void *ctx)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return infer_error(INFER_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    infer_status st = ppl_run(s, tokens, n, max_chunks, f, ppl, err, progress, ctx);
    if (fclose(f) != 0 && !st)
        st = infer_error(INFER_ERR_IO, "writing %s: %s", path, strerror(errno));
    if (st)
        remove(path);
    return st;
}

/* ---- comparison against a base file ---- */

struct kld_acc {
    double nll, nll2, nll_b, nll_b2, nll_nll_b, kld, kld2, dp2, dp4, dp_max;
    int64_t same_top, count;
};

/* One position against the base, as llama-perplexity's log_softmax with a
 * base: the NLL of both, KLD(base || l), same argmax, p - p_base. */
struct kld_pos {
    float nll, nll_b, kld, dp;
    bool same_top;
};

static void kld_position(const float *l, int n_vocab, const uint16_t *b, int32_t tok, struct kld_pos *r)
{
    float max = l[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; i++)
        if (l[i] > max) {
            max = l[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++)
        sum_exp += expf(l[i] - max);
    const float lse = (float)log(sum_exp);
    float hdr[2];
    memcpy(hdr, b, sizeof(hdr));
    const uint16_t *q = b + 4;
    r->nll = max + lse - l[tok];
    r->nll_b = -(hdr[0] * q[tok] + hdr[1]);
    max += lse;
    double sum = 0.0;
    int imax_b = 0;
    float lp_max = 0.0f;
    for (int i = 0; i < n_vocab; i++) {
        const float lp = hdr[0] * q[i] + hdr[1];
        if (i == 0 || lp > lp_max) {
            lp_max = lp;
            imax_b = i;
        }
        if (lp > -16.0f)
            sum += expf(lp) * (lp - l[i] + max);
    }
    r->kld = (float)sum;
    r->same_top = imax == imax_b;
    r->dp = expf(-r->nll) - expf(-r->nll_b);
}

/* Accumulated in position order (the sums do not depend on the threads). */
static void kld_add(struct kld_acc *a, const struct kld_pos *r)
{
    a->nll += r->nll;
    a->nll2 += (double)r->nll * r->nll;
    a->nll_b += r->nll_b;
    a->nll_b2 += (double)r->nll_b * r->nll_b;
    a->nll_nll_b += (double)r->nll * r->nll_b;
    a->kld += r->kld;
    a->kld2 += (double)r->kld * r->kld;
    a->count++;
    a->same_top += r->same_top;
    const double d2 = (double)r->dp * r->dp;
    a->dp2 += d2;
    a->dp4 += d2 * d2;
    a->dp_max = fmax(a->dp_max, fabs(r->dp));
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const float *v, int64_t n, double f)
{
    const double p = f * (double)(n - 1);
    const int64_t i = (int64_t)p;
    const double r = p - (double)i;
    return (1 - r) * v[i] + r * v[i + 1 < n ? i + 1 : n - 1];
}

infer_status infer_session_kld(infer_session *s, const char *path, int max_chunks, infer_kld_result *out,
                               void (*progress)(void *ctx, int chunk, int n_chunks, double kld), void *ctx)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "rb");
    if (!f)
        return infer_error(INFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char magic[8];
    int32_t hdr[3];
    infer_status st = INFER_OK;
    struct chunk_run c = {0};
    int32_t *toks = NULL;
    uint16_t *base = NULL;
    float *kv = NULL;
    struct kld_pos *pos = NULL;
    const int n_vocab = s_model(s)->c.n_vocab;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "_logits_", 8) || fread(hdr, 4, 3, f) != 3) {
        st = infer_error(INFER_ERR_FORMAT, "%s is not a llama-perplexity log-probability file", path);
        goto done;
    }
    const int n_ctx = hdr[0];
    int64_t n_chunks = hdr[2];
    if (hdr[1] != n_vocab) {
        st = infer_error(INFER_ERR_INVALID, "%s was written for a vocabulary of %d tokens, the model has %d", path,
                         hdr[1], n_vocab);
        goto done;
    }
    if (n_ctx < 8 || n_ctx > (1 << 22) || n_chunks < 1 || n_chunks > (1 << 24)) {
        st = infer_error(INFER_ERR_FORMAT, "%s: bad header (n_ctx %d, %lld chunks)", path, n_ctx,
                         (long long)n_chunks);
        goto done;
    }
    const int first = n_ctx / 2, per_chunk = n_ctx - 1 - first;
    const size_t words = base_words(n_vocab);
    /* the file must have exactly the size its header announces */
    if (fseek(f, 0, SEEK_END) != 0) {
        st = infer_error(INFER_ERR_IO, "%s: %s", path, strerror(errno));
        goto done;
    }
    const long long size = ftell(f), want = 20 + (long long)n_chunks * n_ctx * 4 +
                                               (long long)n_chunks * per_chunk * (long long)words * 2;
    if (size != want) {
        st = infer_error(INFER_ERR_FORMAT, "%s has %lld bytes, its header announces %lld (truncated or not a base file)",
                         path, size, want);
        goto done;
    }
    fseek(f, 20, SEEK_SET);
    const int64_t n_file = n_chunks;
    if (max_chunks >= 0 && n_chunks > max_chunks)
        n_chunks = max_chunks;
    toks = malloc((size_t)n_file * n_ctx * sizeof(int32_t));
    base = malloc((size_t)per_chunk * words * sizeof(uint16_t));
    kv = malloc((size_t)n_chunks * per_chunk * sizeof(float));
    pos = malloc((size_t)per_chunk * sizeof(*pos));
    if (!toks || !base || !kv || !pos) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory for %lld chunks of %d", (long long)n_chunks, n_ctx);
        goto done;
    }
    if (fread(toks, 4, (size_t)n_file * n_ctx, f) != (size_t)n_file * n_ctx) {
        st = infer_error(INFER_ERR_IO, "%s: short read", path);
        goto done;
    }
    for (int64_t i = 0; i < n_file * n_ctx; i++)
        if (toks[i] < 0 || toks[i] >= n_vocab) {
            st = infer_error(INFER_ERR_FORMAT, "%s: token %lld is %d, outside the vocabulary", path, (long long)i,
                             toks[i]);
            goto done;
        }
    if ((st = chunk_init(&c, s, n_ctx)))
        goto done;
    struct kld_acc a = {0};
    float *kld_v = kv;
    for (int64_t i = 0; i < n_chunks && !st; i++) {
        if (fread(base, 2, (size_t)per_chunk * words, f) != (size_t)per_chunk * words) {
            st = infer_error(INFER_ERR_IO, "%s: short read", path);
            break;
        }
        for (int j = 0; j < per_chunk; j++) {
            float h[2];
            memcpy(h, base + (size_t)j * words, sizeof(h));
            if (!isfinite(h[0]) || !isfinite(h[1]) || h[0] < 0.0f) {
                st = infer_error(INFER_ERR_FORMAT, "%s: chunk %lld position %d has a bad scale", path,
                                 (long long)i, first + j);
                break;
            }
        }
        if (st || (st = chunk_eval(&c, toks + i * n_ctx)))
            break;
#pragma omp parallel for schedule(static)
        for (int j = 0; j < per_chunk; j++)
            kld_position(c.logits + (size_t)(first + j) * n_vocab, n_vocab, base + (size_t)j * words,
                         c.tokens[first + j + 1], &pos[j]);
        for (int j = 0; j < per_chunk; j++) {
            kld_v[a.count] = pos[j].kld;
            kld_add(&a, &pos[j]);
        }
        if (progress)
            progress(ctx, (int)i + 1, (int)n_chunks, a.kld / (double)a.count);
    }
    if (st)
        goto done;
    out->n_ctx = n_ctx;
    out->n_chunks = (int)n_chunks;
    out->count = a.count;
    double lp, lp_e, lb, lb_e;
    mean_err(a.nll, a.nll2, a.count, &lp, &lp_e);
    mean_err(a.nll_b, a.nll_b2, a.count, &lb, &lb_e);
    out->ppl = exp(lp);
    out->ppl_err = out->ppl * lp_e;
    out->ppl_base = exp(lb);
    out->ppl_base_err = out->ppl_base * lb_e;
    double cov = 0.0;
    if (a.count >= 10)
        cov = (a.nll_nll_b / (double)a.count - lp * lb) / (double)(a.count - 1);
    out->ln_ppl_ratio = lp - lb;
    const double v = lp_e * lp_e + lb_e * lb_e - 2.0 * cov;
    out->ln_ppl_ratio_err = v > 0 ? sqrt(v) : 0.0;
    mean_err(a.kld, a.kld2, a.count, &out->kld_mean, &out->kld_err);
    qsort(kld_v, (size_t)a.count, sizeof(float), cmp_float);
    out->kld_max = kld_v[a.count - 1];
    out->kld_p999 = percentile(kld_v, a.count, 0.999);
    out->kld_p99 = percentile(kld_v, a.count, 0.99);
    out->kld_p95 = percentile(kld_v, a.count, 0.95);
    out->kld_p90 = percentile(kld_v, a.count, 0.90);
    out->kld_median = percentile(kld_v, a.count, 0.5);
    out->same_top = (double)a.same_top / (double)a.count;
    out->same_top_err = a.count > 1 ? sqrt(out->same_top * (1 - out->same_top) / (double)(a.count - 1)) : 0.0;
    out->dp_rms = sqrt(a.dp2 / (double)a.count);
    out->dp_max = a.dp_max;
done:
    fclose(f);
    chunk_free(&c);
    free(toks);
    free(base);
    free(kv);
    free(pos);
    return st;
}
