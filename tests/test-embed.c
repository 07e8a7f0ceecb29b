/*
 * test-embed.c - sentence embeddings (infer_embedder, the BERT encoder) on
 * all-MiniLM-L6-v2 as models/fetch-embedder writes it:
 *   - agreement with llama.cpp's embeddings of the same F16 file
 *     (tests/data/embed/, contrib/golden/embed-ref): cosine >= 0.9999;
 *   - a batch gives the same bits as each input alone;
 *   - truncation to the sentence-transformers maximum (256), reported;
 *   - the Q8_0 file against the F16 reference;
 *   - odd text (empty, NUL bytes, invalid UTF-8) is embedded, never an error;
 *   - hostile metadata (patched copies of the file) is refused with the key
 *     or tensor named.
 * The tests skip when the embedder has not been fetched (contrib/quickstart.sh
 * fetches it before make check).
 */
#include "test-common.h"

#include "model/encoder.h"

#include <math.h>

#define REF_MIN_COS 0.9999

struct fixture {
    infer_embedder *e; /* F16, n_ctx 512: the reference's context */
    char **sentences;
    size_t n;
    float *ref; /* n x 384, llama.cpp's */
};

static const char *embedder_path(const char *file)
{
    const char *p = test_path(test_srcdir(), file);
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fclose(f);
    return p;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    *state = fx;
    const char *path = embedder_path("models/all-minilm-l6-v2-f16.gguf");
    if (!path) {
        print_message("models/all-minilm-l6-v2-f16.gguf not fetched (models/fetch-embedder): tests skip\n");
        return 0;
    }
    infer_embedder_params p = {.n_ctx = 512};
    if (infer_embedder_open(&fx->e, path, &p) != INFER_OK) {
        print_error("%s\n", infer_last_error());
        return -1;
    }
    char *s = test_read_file(test_path(test_srcdir(), "tests/data/embed/sentences.txt"), NULL);
    char *r = test_read_file(test_path(test_srcdir(), "tests/data/embed/all-minilm-l6-v2-f16.out"), NULL);
    if (!s || !r)
        return -1;
    fx->sentences = calloc(64, sizeof(*fx->sentences));
    for (char *line = strtok(s, "\n"); line && fx->n < 64; line = strtok(NULL, "\n"))
        fx->sentences[fx->n++] = strdup(line);
    free(s);
    fx->ref = malloc(fx->n * 384 * sizeof(float));
    char *q = r;
    for (size_t i = 0; i < fx->n * 384; i++)
        fx->ref[i] = strtof(q, &q);
    free(r);
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    infer_embedder_close(fx->e);
    for (size_t i = 0; i < fx->n; i++)
        free(fx->sentences[i]);
    free(fx->sentences);
    free(fx->ref);
    free(fx);
    return 0;
}

static double dot(const float *a, const float *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

#define NEED_MODEL(fx)                                                                  \
    do {                                                                                \
        if (!(fx)->e)                                                                   \
            skip();                                                                     \
    } while (0)

static void test_shape(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    assert_int_equal(infer_embedder_n_embd(fx->e), 384);
    assert_int_equal(infer_embedder_n_ctx(fx->e), 512);
    assert_string_equal(infer_embedder_pooling(fx->e), "mean");
    assert_string_equal(infer_embedder_name(fx->e), "all-MiniLM-L6-v2");
    assert_int_equal(fx->n, 12);
}

/* All sentences in one call against llama.cpp's vectors. */
static void test_reference(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    float *v = malloc(fx->n * 384 * sizeof(float));
    infer_embed_info info[64];
    assert_int_equal(infer_embed(fx->e, (const char *const *)fx->sentences, NULL, fx->n, v, info), INFER_OK);
    double worst = 1.0;
    for (size_t i = 0; i < fx->n; i++) {
        double c = dot(v + i * 384, fx->ref + i * 384, 384);
        double norm = dot(v + i * 384, v + i * 384, 384);
        assert_true(fabs(norm - 1.0) < 1e-5);
        assert_false(info[i].truncated);
        if (c < worst)
            worst = c;
        if (c < REF_MIN_COS)
            print_error("sentence %zu (%d tokens): cosine %.7f to llama.cpp\n", i, info[i].n_tokens, c);
    }
    print_message("min cosine to llama.cpp over %zu sentences (up to %d tokens): %.7f\n", fx->n,
                  info[fx->n - 1].n_tokens, worst);
    assert_true(worst >= REF_MIN_COS);
    free(v);
}

/* Batched and one by one: the same bits (matmul is batch-invariant). */
static void test_batch_invariant(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    float *all = malloc(fx->n * 384 * sizeof(float)), one[384];
    assert_int_equal(infer_embed(fx->e, (const char *const *)fx->sentences, NULL, fx->n, all, NULL), INFER_OK);
    for (size_t i = 0; i < fx->n; i++) {
        const char *t = fx->sentences[i];
        assert_int_equal(infer_embed(fx->e, &t, NULL, 1, one, NULL), INFER_OK);
        assert_memory_equal(one, all + i * 384, sizeof(one));
    }
    free(all);
}

/* The default context is all-MiniLM's 256: the long sentence is cut, and
 * says so. */
static void test_truncation(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    infer_embedder *e;
    assert_int_equal(infer_embedder_open(&e, embedder_path("models/all-minilm-l6-v2-f16.gguf"), NULL), INFER_OK);
    assert_int_equal(infer_embedder_n_ctx(e), 256);
    const char *t[2] = {fx->sentences[fx->n - 1], fx->sentences[0]};
    float v[2 * 384];
    infer_embed_info info[2];
    assert_int_equal(infer_embed(e, t, NULL, 2, v, info), INFER_OK);
    assert_true(info[0].truncated);
    assert_int_equal(info[0].n_tokens, 256);
    assert_int_equal(info[0].n_tokens_in, 332);
    assert_false(info[1].truncated);
    assert_true(fabs(dot(v, v, 384) - 1.0) < 1e-5);
    /* the beginning dominates: still close to the whole text's embedding */
    double c = dot(v, fx->ref + (fx->n - 1) * 384, 384);
    assert_true(c > 0.9 && c < 0.99999);
    assert_true(dot(v + 384, fx->ref, 384) >= REF_MIN_COS);
    /* an explicit context below the file's maximum, and above it (clamped) */
    infer_embedder_close(e);
    infer_embedder_params p = {.n_ctx = 100000};
    assert_int_equal(infer_embedder_open(&e, embedder_path("models/all-minilm-l6-v2-f16.gguf"), &p), INFER_OK);
    assert_int_equal(infer_embedder_n_ctx(e), 512);
    infer_embedder_close(e);
}

static void test_q8_0(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    const char *path = embedder_path("models/all-minilm-l6-v2-q8_0.gguf");
    if (!path)
        skip();
    infer_embedder *e;
    infer_embedder_params p = {.n_ctx = 512};
    assert_int_equal(infer_embedder_open(&e, path, &p), INFER_OK);
    float *v = malloc(fx->n * 384 * sizeof(float));
    assert_int_equal(infer_embed(e, (const char *const *)fx->sentences, NULL, fx->n, v, NULL), INFER_OK);
    double worst = 1.0;
    for (size_t i = 0; i < fx->n; i++) {
        double c = dot(v + i * 384, fx->ref + i * 384, 384);
        worst = c < worst ? c : worst;
    }
    print_message("Q8_0: min cosine to llama.cpp's F16 embeddings: %.6f\n", worst);
    assert_true(worst >= 0.999);
    free(v);
    infer_embedder_close(e);
}

/* Text is never an error: empty, NUL bytes, invalid UTF-8, only spaces. */
static void test_odd_text(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    const char *t[4] = {"", "a\0b", "\xff\xfe\xc3", "   \t\n  "};
    const size_t lens[4] = {0, 3, 3, 7};
    float v[4 * 384];
    infer_embed_info info[4];
    assert_int_equal(infer_embed(fx->e, t, lens, 4, v, info), INFER_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(fabs(dot(v + i * 384, v + i * 384, 384) - 1.0) < 1e-5);
        assert_false(isnan(v[i * 384]));
    }
    assert_int_equal(info[0].n_tokens, 2); /* [CLS] [SEP] */
    assert_int_equal(info[3].n_tokens, 2);
    assert_int_equal(infer_embed(fx->e, t, lens, 0, v, info), INFER_OK);
    const char *null_text[1] = {NULL};
    assert_int_equal(infer_embed(fx->e, null_text, NULL, 1, v, NULL), INFER_ERR_INVALID);
}

/* Overwrite the u32 value of metadata key `key` in a GGUF image. */
static void patch_u32(char *buf, size_t len, const char *key, uint32_t v)
{
    size_t kl = strlen(key);
    char *hit = memmem(buf, len, key, kl);
    assert_non_null(hit);
    uint32_t type;
    memcpy(&type, hit + kl, 4);
    assert_true(type == INFER_GGUF_UINT32);
    memcpy(hit + kl + 4, &v, 4);
}

static void expect_refused(const char *img, size_t len, infer_status want, const char *msg)
{
    infer_gguf *g;
    assert_int_equal(infer_gguf_open_memory(&g, img, len), INFER_OK);
    struct encoder enc;
    infer_status st = encoder_bind(&enc, g);
    encoder_unbind(&enc);
    infer_gguf_close(g);
    if (st != want || !strstr(infer_last_error(), msg))
        print_error("want %d '%s', got %d '%s'\n", want, msg, st, infer_last_error());
    assert_int_equal(st, want);
    assert_non_null(strstr(infer_last_error(), msg));
}

static void test_hostile_metadata(void **state)
{
    struct fixture *fx = *state;
    NEED_MODEL(fx);
    size_t len;
    char *orig = test_read_file(embedder_path("models/all-minilm-l6-v2-f16.gguf"), &len);
    assert_non_null(orig);
    char *img = malloc(len);
    static const struct {
        const char *key;
        uint32_t v;
        infer_status st;
        const char *msg;
    } cases[] = {
        {"bert.block_count", 0, INFER_ERR_FORMAT, "bert.block_count"},
        {"bert.block_count", 7, INFER_ERR_FORMAT, "blk.6.attn_q.weight"},
        {"bert.block_count", 4000000000u, INFER_ERR_FORMAT, "bert.block_count"},
        {"bert.embedding_length", 385, INFER_ERR_FORMAT, "not a multiple of 12 heads"},
        {"bert.embedding_length", 768, INFER_ERR_FORMAT, "token_embd.weight"},
        {"bert.attention.head_count", 0, INFER_ERR_FORMAT, "bert.attention.head_count"},
        {"bert.feed_forward_length", 1537, INFER_ERR_FORMAT, "ffn_up.weight"},
        {"bert.context_length", 513, INFER_ERR_FORMAT, "position_embd.weight"},
        {"bert.pooling_type", 0, INFER_ERR_UNSUPPORTED, "bert.pooling_type"},
        {"bert.pooling_type", 9, INFER_ERR_FORMAT, "bert.pooling_type"},
        {"tokenizer.ggml.token_type_count", 3, INFER_ERR_FORMAT, "token_types.weight"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(img, orig, len);
        patch_u32(img, len, cases[i].key, cases[i].v);
        expect_refused(img, len, cases[i].st, cases[i].msg);
    }
    /* another architecture name of the same length */
    memcpy(img, orig, len);
    char *arch = memmem(img, len, "general.architecture", 20);
    assert_non_null(arch);
    char *val = memmem(arch, 64, "bert", 4);
    assert_non_null(val);
    memcpy(val, "gpt2", 4);
    expect_refused(img, len, INFER_ERR_UNSUPPORTED, "not an embedding model");
    /* the untouched image binds; bad token ids and lengths are refused */
    infer_gguf *g;
    struct encoder enc;
    assert_int_equal(infer_gguf_open_memory(&g, orig, len), INFER_OK);
    assert_int_equal(encoder_bind(&enc, g), INFER_OK);
    float out[384];
    int32_t ids[3] = {101, 30522, 102}, n3 = 3, n0 = 0, big = 513;
    assert_int_equal(encoder_forward(&enc, ids, &n3, 1, true, out), INFER_ERR_INVALID);
    assert_int_equal(encoder_forward(&enc, ids, &n0, 1, true, out), INFER_ERR_INVALID);
    assert_int_equal(encoder_forward(&enc, ids, &big, 1, true, out), INFER_ERR_INVALID);
    ids[1] = 7592;
    assert_int_equal(encoder_forward(&enc, ids, &n3, 1, true, out), INFER_OK);
    encoder_unbind(&enc);
    infer_gguf_close(g);
    /* a decoder model is not an embedder */
    const char *dflt = test_default_model();
    if (dflt) {
        infer_embedder *e;
        assert_int_equal(infer_embedder_open(&e, dflt, NULL), INFER_ERR_UNSUPPORTED);
        assert_null(e);
    }
    free(img);
    free(orig);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),          cmocka_unit_test(test_reference),
        cmocka_unit_test(test_batch_invariant), cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_q8_0),           cmocka_unit_test(test_odd_text),
        cmocka_unit_test(test_hostile_metadata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
