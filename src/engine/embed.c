/*
 * embed.c - sentence embeddings: infer_embedder (include/infer.h) over the
 * BERT encoder (model/encoder.c) and the WordPiece tokenizer.
 *
 * An input is tokenized with [CLS] ... [SEP]; one longer than n_ctx tokens
 * keeps its first n_ctx - 1 tokens and gets [SEP] last (what
 * sentence-transformers does at max_seq_length), and the caller is told.
 * Inputs are packed into encoder batches of up to BATCH_TOKENS tokens, so a
 * request of many short texts reads the weights once per batch, not once per
 * text.  Nothing is shared between calls but the read-only model, so calls
 * may run concurrently.
 */
#include "infer.h"

#include "../../kernels/dispatch.h"
#include "../../kernels/pool.h"
#include "model/encoder.h"
#include "text/tokenizer.h"
#include "util/common.h"

#include <omp.h>
#include <string.h>

#define BATCH_TOKENS 2048 /* tokens per encoder pass: ~14 KB of activations each for MiniLM */

struct infer_embedder {
    infer_gguf *g;
    struct encoder enc;
    struct tokenizer *tok;
    int n_ctx;
    int n_threads;
    double load_seconds;
    char name[128];
};

infer_status infer_embedder_open(infer_embedder **out, const char *path, const infer_embedder_params *params)
{
    *out = NULL;
    double t0 = infer_now();
    char err[256];
    if (kernels_init(err, sizeof(err)) != 0)
        return infer_error(INFER_ERR_INVALID, "%s", err);
    infer_embedder *e = calloc(1, sizeof(*e));
    if (!e)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    infer_status st = infer_gguf_open(&e->g, path, params ? params->flags : 0);
    if (st) {
        free(e);
        return st;
    }
    if ((st = encoder_bind(&e->enc, e->g)) || (st = tokenizer_load(&e->tok, e->g)))
        goto fail;
    if (strcmp(tokenizer_model(e->tok), "bert")) {
        st = infer_error(INFER_ERR_UNSUPPORTED, "tokenizer.ggml.model is '%s', a bert model needs 'bert'",
                         tokenizer_model(e->tok));
        goto fail;
    }
    if (tokenizer_n_vocab(e->tok) > e->enc.c.n_vocab) {
        st = infer_error(INFER_ERR_FORMAT, "the tokenizer has %d tokens but the embedding only %d rows",
                         tokenizer_n_vocab(e->tok), e->enc.c.n_vocab);
        goto fail;
    }
    const int n_ctx_train = e->enc.c.n_ctx_train;
    int64_t st_max = infer_gguf_get_int(e->g, "sentence_transformers.max_seq_length", 0);
    e->n_ctx = st_max > 0 && st_max < n_ctx_train ? (int)st_max : n_ctx_train;
    if (params && params->n_ctx > 0)
        e->n_ctx = params->n_ctx < n_ctx_train ? params->n_ctx : n_ctx_train;
    if (e->n_ctx < 2) {
        st = infer_error(INFER_ERR_FORMAT, "a context of %d tokens cannot hold [CLS] and [SEP]", e->n_ctx);
        goto fail;
    }
    e->n_threads = params && params->n_threads > 0 ? params->n_threads : infer_n_physical_cores();
    const char *name = infer_gguf_get_str(e->g, "general.name", NULL);
    if (!name) {
        name = strrchr(path, '/');
        name = name ? name + 1 : path;
    }
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->load_seconds = infer_now() - t0;
    *out = e;
    return INFER_OK;
fail:
    infer_error_prefix(st, "%s", path);
    infer_embedder_close(e);
    return st;
}

void infer_embedder_close(infer_embedder *e)
{
    if (!e)
        return;
    tokenizer_free(e->tok);
    encoder_unbind(&e->enc);
    infer_gguf_close(e->g);
    free(e);
}

int infer_embedder_n_embd(const infer_embedder *e) { return e->enc.c.n_embd; }
int infer_embedder_n_ctx(const infer_embedder *e) { return e->n_ctx; }
const char *infer_embedder_name(const infer_embedder *e) { return e->name; }
const infer_gguf *infer_embedder_gguf(const infer_embedder *e) { return e->g; }
const infer_tokenizer *infer_embedder_tokenizer(const infer_embedder *e) { return (const infer_tokenizer *)e->tok; }
double infer_embedder_load_seconds(const infer_embedder *e) { return e->load_seconds; }

const char *infer_embedder_pooling(const infer_embedder *e)
{
    switch (e->enc.c.pooling) {
    case POOL_CLS: return "cls";
    case POOL_LAST: return "last";
    default: return "mean";
    }
}

/* Tokens of one input, truncated to n_ctx; *n_in gets the untruncated count.
 * Writes into ids (room for n_ctx). */
static infer_status tokenize_one(const infer_embedder *e, const char *text, size_t len, int32_t *ids, int32_t *n,
                                 int32_t *n_in)
{
    int64_t k = tokenizer_encode(e->tok, text, len, true, false, ids, e->n_ctx);
    if (k < 0)
        return (infer_status)k;
    *n_in = k > INT32_MAX ? INT32_MAX : (int32_t)k;
    if (k > e->n_ctx) {
        k = e->n_ctx;
        ids[k - 1] = tokenizer_sep(e->tok);
    }
    *n = (int32_t)k;
    return INFER_OK;
}

infer_status infer_embed(infer_embedder *e, const char *const *texts, const size_t *lens, size_t n, float *out,
                         infer_embed_info *info)
{
    if (n == 0)
        return INFER_OK;
    if (!texts || !out)
        return infer_error(INFER_ERR_INVALID, "embed: NULL texts or output");
    for (size_t i = 0; i < n; i++)
        if (!texts[i])
            return infer_error(INFER_ERR_INVALID, "embed: input %zu is NULL", i);
    const int n_ctx = e->n_ctx, d = e->enc.c.n_embd;
    omp_set_num_threads(e->n_threads); /* this thread's parallel regions */
    if (pool_max_threads() != e->n_threads) /* the matmuls' pool (process-wide; unchanged: keep its adaptive state) */
        pool_set_threads(e->n_threads);
    const size_t max_seq = BATCH_TOKENS / 2 + 1; /* inputs per batch: each has >= 2 tokens */
    /* a batch (at most BATCH_TOKENS, or one input of n_ctx) and the next input */
    const size_t batch_cap = (size_t)(n_ctx > BATCH_TOKENS ? n_ctx : BATCH_TOKENS);
    int32_t *ids = malloc((batch_cap + (size_t)n_ctx) * sizeof(*ids));
    int32_t *lens_tok = malloc(max_seq * sizeof(*lens_tok));
    if (!ids || !lens_tok) {
        free(ids);
        free(lens_tok);
        return infer_error(INFER_ERR_NOMEM, "embed: out of memory");
    }
    infer_status st = INFER_OK;
    size_t first = 0; /* first input of the batch being filled */
    int64_t n_tok = 0;
    int n_seq = 0;
    for (size_t i = 0; i <= n && st == INFER_OK; i++) {
        int32_t k = 0, k_in = 0;
        if (i < n) {
            const size_t len = lens ? lens[i] : strlen(texts[i]);
            if ((st = tokenize_one(e, texts[i], len, ids + n_tok, &k, &k_in)))
                break;
            if (info)
                info[i] = (infer_embed_info){k, k_in, k < k_in};
        }
        /* run the batch when this input does not fit (it was tokenized past
         * the batch: move it to the front afterwards) or at the end */
        const bool flush = i == n || n_tok + k > BATCH_TOKENS || (size_t)n_seq == max_seq;
        if (flush && n_seq > 0) {
            st = encoder_forward(&e->enc, ids, lens_tok, n_seq, true, out + first * (size_t)d);
            memmove(ids, ids + n_tok, (size_t)k * sizeof(*ids));
            first = i;
            n_tok = 0;
            n_seq = 0;
        }
        if (i < n) {
            lens_tok[n_seq++] = k;
            n_tok += k;
        }
    }
    free(ids);
    free(lens_tok);
    return st;
}
