/*
 * perplexity.c - perplexity over a token sequence, by llama-perplexity's
 * method (so the figures can be compared with llama.cpp's directly).
 */
#include "model/model.h"
#include "text/tokenizer.h"

#include <math.h>
#include <string.h>

infer_status infer_session_perplexity(infer_session *s, const int32_t *tokens, int64_t n, int max_chunks,
                                      double *ppl, double *err,
                                      void (*progress)(void *ctx, int chunk, int n_chunks, double ppl), void *ctx)
{
    const int n_ctx = infer_session_n_ctx(s);
    const infer_model *m = s_model(s);
    const int n_vocab = m->c.n_vocab;
    int64_t n_chunks = n / n_ctx;
    if (max_chunks >= 0 && n_chunks > max_chunks)
        n_chunks = max_chunks;
    if (n_ctx < 8)
        return infer_error(INFER_ERR_INVALID, "perplexity needs a context of at least 8 tokens");
    if (n_chunks < 1)
        return infer_error(INFER_ERR_INVALID, "%lld tokens are fewer than one chunk of %d", (long long)n, n_ctx);
    float *logits = malloc((size_t)n_ctx * n_vocab * sizeof(float));
    int32_t *chunk = malloc((size_t)n_ctx * sizeof(int32_t));
    if (!logits || !chunk) {
        free(logits);
        free(chunk);
        return infer_error(INFER_ERR_NOMEM, "out of memory for %d x %d logits", n_ctx, n_vocab);
    }
    const int first = n_ctx / 2;
    const int32_t bos = infer_model_bos(m);
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    infer_status st = INFER_OK;
    for (int64_t i = 0; i < n_chunks && !st; i++) {
        memcpy(chunk, tokens + i * n_ctx, (size_t)n_ctx * sizeof(int32_t));
        if (bos >= 0 && infer_model_add_bos(m))
            chunk[0] = bos;
        infer_session_truncate(s, 0);
        if ((st = infer_session_eval_all(s, chunk, n_ctx, logits)))
            break;
        for (int j = first; j < n_ctx - 1; j++) {
            const float *l = logits + (size_t)j * n_vocab;
            float max = l[0];
            for (int v = 1; v < n_vocab; v++)
                if (l[v] > max)
                    max = l[v];
            double sum = 0.0;
            for (int v = 0; v < n_vocab; v++)
                sum += exp((double)(l[v] - max));
            double lp = (double)(l[chunk[j + 1]] - max) - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        if (progress)
            progress(ctx, (int)i + 1, (int)n_chunks, exp(nll / (double)count));
    }
    infer_session_truncate(s, 0);
    free(logits);
    free(chunk);
    if (st)
        return st;
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    *ppl = exp(mean);
    *err = count > 1 && var > 0 ? *ppl * sqrt(var / (double)(count - 1)) : 0.0;
    return INFER_OK;
}
