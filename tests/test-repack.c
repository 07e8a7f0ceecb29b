/*
 * test-repack.c - the repacked-weight cache (src/cache/repack_cache.c) end to end,
 * on a generated Q4_0 llama model copied into a temporary directory:
 *
 *   - a first load repacks and writes the cache file (state "created", the
 *     model hashed), the next one maps it ("hit", no hashing), and both give
 *     exactly the logits of the weights used as stored (--no-repack);
 *   - a damaged cache file (data byte, magic, entry table, truncation) is
 *     detected, named in the note and rebuilt, still with the same logits;
 *   - a changed model identity (mtime) is hashed again and finds the same
 *     cache file; INFER_NO_REPACK turns it off; an unusable cache directory
 *     leaves the weights as stored, with the reason.
 *
 * On a CPU whose kernels have no repacked layout (anything but avx512), the
 * test turns the layouts on in the active table with the reference x4 tiles
 * (kernels/matmul.c), so the cache is exercised everywhere.  The whole
 * group runs five times: on the Q4_0 model, on the Q4_K_M one (the x4
 * layouts of Q4_K and of its Q6_K tensors), on the IQ4_NL one (IQ4_NL x4),
 * on the Q3_K_M one (Q3_K x4, whose quants are re-coded, not only moved)
 * and on a Q4_K_M qwen3moe, whose 3-D expert tensors of Q4_K and Q6_K are
 * repacked as well (test_experts).
 */
#include "test-common.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../kernels/dispatch.h"
#include "util/common.h"
#include "cache/prefix.h"
#include "model/model.h"

#define N_PROMPT 19
#define N_STEPS 3

static char tmpdir[256], model[512], cache_dir[512];
static const char *src_name; /* the generated model under test */
static size_t n_vocab;

/* Logits after a 19-token prompt (chunks of 7) and after each of 3 more
 * tokens, into out (4 x n_vocab floats), and the load's repack info
 * (strings copied into note). */
static void run(unsigned flags, float *out, infer_repack_info *ri, char *note, size_t note_len)
{
    infer_model_params mp = {.flags = flags};
    infer_model *m;
    if (infer_model_load(&m, model, &mp) != INFER_OK)
        fail_msg("%s: %s", model, infer_last_error());
    infer_model_repack_info(m, ri);
    snprintf(note, note_len, "%s", ri->note);
    ri->note = note;
    ri->path = "";
    print_message("    %s\n", infer_model_repack_summary(m));
    n_vocab = (size_t)infer_model_n_vocab(m);
    infer_session_params sp;
    infer_session_params_default(&sp);
    sp.n_ctx = 64;
    sp.n_batch = 7;
    sp.n_threads = 2;
    infer_session *s;
    assert_int_equal(infer_session_new(&s, m, &sp), INFER_OK);
    int32_t toks[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        toks[i] = 1 + (i * 37) % 200;
    assert_int_equal(infer_session_set_tokens(s, toks, N_PROMPT, NULL), INFER_OK);
    for (int k = 0; k <= N_STEPS; k++) {
        const float *l = infer_session_logits(s);
        assert_non_null(l);
        memcpy(out + (size_t)k * n_vocab, l, n_vocab * sizeof(float));
        int32_t t = 5 + 11 * k;
        if (k < N_STEPS)
            assert_int_equal(infer_session_append(s, &t, 1), INFER_OK);
    }
    infer_session_free(s);
    infer_model_free(m);
}

static float *ref_logits, *got;

static void same_logits(const char *what)
{
    if (memcmp(ref_logits, got, (N_STEPS + 1) * n_vocab * sizeof(float)) != 0)
        fail_msg("%s: logits differ from the weights used as stored", what);
}

/* The cache file of the model (the one *.bin in the cache directory). */
static const char *cache_file(void)
{
    static char path[1024];
    char pattern[600];
    snprintf(pattern, sizeof(pattern), "%s/repack/*.bin", cache_dir);
    glob_t g;
    path[0] = '\0';
    if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1)
        snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
    globfree(&g);
    return path;
}

/* Overwrite len bytes at off (from the end when off < 0) of a file. */
static void poke(const char *path, long off, const void *bytes, size_t len)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    const off_t at = off >= 0 ? (off_t)off : lseek(fd, 0, SEEK_END) + (off_t)off;
    assert_int_equal(pwrite(fd, bytes, len, at), (ssize_t)len);
    close(fd);
}

static void expect(const infer_repack_info *ri, const char *state, const char *note_part)
{
    if (strcmp(ri->state, state) != 0)
        fail_msg("repack state %s, expected %s (note: %s)", ri->state, state, ri->note);
    if (note_part && !strstr(ri->note, note_part))
        fail_msg("repack note '%s' does not say '%s'", ri->note, note_part);
}

static int setup(void **state)
{
    (void)state;
    const char *build = getenv("INFER_BUILDDIR") ? getenv("INFER_BUILDDIR") : ".";
    char src[512];
    snprintf(src, sizeof(src), "%s/models/gen/%s", build, src_name);
    if (access(src, R_OK) != 0)
        return -1;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/infer-test-repack-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(model, sizeof(model), "%s/model.gguf", tmpdir);
    snprintf(cache_dir, sizeof(cache_dir), "%s/cache", tmpdir);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, model);
    if (system(cmd) != 0)
        return -1;
    setenv("INFER_REPACK_DIR", cache_dir, 1);
    unsetenv("INFER_NO_REPACK");
    char err[256];
    if (kernels_init(err, sizeof(err)) != 0)
        return -1;
    if (!kern.types[GGML_TYPE_Q4_0].repack_type) { /* no x4 kernels here: the reference tiles */
        kern.types[GGML_TYPE_Q4_0].repack_type = INFER_TYPE_Q4_0_X4;
        kern.types[GGML_TYPE_Q5_0].repack_type = INFER_TYPE_Q5_0_X4;
        print_message("(%s has no repacked layouts: testing the reference x4 tiles)\n", kern.name);
    }
    if (!kern.types[GGML_TYPE_Q4_K].repack_type) { /* this table's (or the reference) Q4_K x4 tiles */
        kern.types[GGML_TYPE_Q4_K].repack_type = INFER_TYPE_Q4_K_X4;
        print_message("(%s does not repack Q4_K: testing the x4 tiles its table has, from %s)\n", kern.name,
                      kern.types[INFER_TYPE_Q4_K_X4].gemm == kernels_ref()->types[INFER_TYPE_Q4_K_X4].gemm
                          ? "the reference"
                          : "a lesser variant");
    }
    if (!kern.types[GGML_TYPE_Q6_K].repack_type) { /* likewise for Q6_K */
        kern.types[GGML_TYPE_Q6_K].repack_type = INFER_TYPE_Q6_K_X4;
        print_message("(%s does not repack Q6_K: testing the x4 tiles its table has, from %s)\n", kern.name,
                      kern.types[INFER_TYPE_Q6_K_X4].gemm == kernels_ref()->types[INFER_TYPE_Q6_K_X4].gemm
                          ? "the reference"
                          : "a lesser variant");
    }
    if (!kern.types[GGML_TYPE_IQ4_NL].repack_type) { /* likewise for IQ4_NL */
        kern.types[GGML_TYPE_IQ4_NL].repack_type = INFER_TYPE_IQ4_NL_X4;
        print_message("(%s does not repack IQ4_NL: testing the x4 tiles its table has, from %s)\n", kern.name,
                      kern.types[INFER_TYPE_IQ4_NL_X4].gemm == kernels_ref()->types[INFER_TYPE_IQ4_NL_X4].gemm
                          ? "the reference"
                          : "a lesser variant");
    }
    if (!kern.types[GGML_TYPE_Q3_K].repack_type) { /* likewise for Q3_K (avx2 only repacks it) */
        kern.types[GGML_TYPE_Q3_K].repack_type = INFER_TYPE_Q3_K_X4;
        print_message("(%s does not repack Q3_K: testing the x4 tiles its table has, from %s)\n", kern.name,
                      kern.types[INFER_TYPE_Q3_K_X4].gemm == kernels_ref()->types[INFER_TYPE_Q3_K_X4].gemm
                          ? "the reference"
                          : "a lesser variant");
    }
    ref_logits = malloc((N_STEPS + 1) * 300000 * sizeof(float));
    got = malloc((N_STEPS + 1) * 300000 * sizeof(float));
    return ref_logits && got ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    free(ref_logits);
    free(got);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_cycle(void **state)
{
    (void)state;
    infer_repack_info ri;
    char note[512];
    run(INFER_MODEL_NO_REPACK, ref_logits, &ri, note, sizeof(note));
    expect(&ri, "off", "--no-repack");
    assert_int_equal(ri.n_tensors, 0);

    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "created", NULL);
    assert_true(ri.n_tensors > 0);
    assert_true(ri.bytes > 0);
    assert_true(ri.hash_seconds > 0);
    same_logits("created");
    const char *file = cache_file();
    assert_true(file[0] != '\0');
    struct stat sb;
    assert_int_equal(stat(file, &sb), 0);
    assert_true((uint64_t)sb.st_size > ri.bytes);

    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "hit", NULL);
    assert_true(ri.hash_seconds == 0); /* the id file remembered the sha256 */
    same_logits("hit");

    /* damage, each time detected, named and rebuilt */
    poke(file, -1, "\x5a", 1); /* the last data byte */
    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "created", "data checksum mismatch");
    same_logits("rebuilt after a data byte changed");

    poke(file, 0, "NOTINFER", 8);
    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "created", "not a cache file");
    same_logits("rebuilt after a bad magic");

    poke(file, 128 + 8, "\x07\x00\x00\x00", 4); /* the first entry's base type */
    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "created", "header checksum mismatch");
    same_logits("rebuilt after a changed entry");

    assert_int_equal(truncate(file, 100), 0);
    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "created", "not a cache file");
    same_logits("rebuilt after truncation");

    /* a new identity (mtime) hashes the model again and finds the same file */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1234567890, 0}};
    assert_int_equal(utimensat(AT_FDCWD, model, ts, 0), 0);
    run(0, got, &ri, note, sizeof(note));
    expect(&ri, "hit", NULL);
    assert_true(ri.hash_seconds > 0);
    same_logits("hit after a new mtime");

    setenv("INFER_NO_REPACK", "1", 1);
    run(0, got, &ri, note, sizeof(note));
    unsetenv("INFER_NO_REPACK");
    expect(&ri, "off", "INFER_NO_REPACK");
    same_logits("off");
}

/* Read a cache file, let edit() change its header or entry table, fix the
 * header checksum (as an attacker would), write it back. */
static void forge(const char *path, void (*edit)(uint8_t *hdr))
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t hdr[128 + 64 * 64];
    const ssize_t n = pread(fd, hdr, sizeof(hdr), 0);
    assert_true(n >= 128);
    uint32_t n_entries;
    memcpy(&n_entries, hdr + 72, 4);
    assert_true(n_entries >= 1 && 128 + 64 * (size_t)n_entries <= (size_t)n);
    edit(hdr);
    uint8_t h0[128];
    memcpy(h0, hdr, 128);
    memset(h0 + 76, 0, 4); /* header_crc */
    const uint32_t crc = crc32c(crc32c(0, h0, 128), hdr + 128, 64 * (size_t)n_entries);
    memcpy(hdr + 76, &crc, 4);
    assert_int_equal(pwrite(fd, hdr, (size_t)n, 0), n);
    close(fd);
}

/* header: magic 0, version 8, layout 12, sha256 16, model_size 48,
 * variant 56, n_entries 72, header_crc 76, data_offset 80, data_bytes 88;
 * entry i at 128 + 64 i: src_offset 0, types 8/12, n_in 16, n_out 24,
 * offset 32, nbytes 40 */
static void edit_offset(uint8_t *h)
{
    const uint64_t far = (uint64_t)1 << 62;
    memcpy(h + 128 + 32, &far, 8);
}
static void edit_nbytes(uint8_t *h)
{
    uint64_t v;
    memcpy(&v, h + 128 + 40, 8);
    v += 64;
    memcpy(h + 128 + 40, &v, 8);
}
static void edit_data_offset(uint8_t *h)
{
    const uint64_t v = (uint64_t)1 << 40;
    memcpy(h + 80, &v, 8);
}
static void edit_variant(uint8_t *h) { memcpy(h + 56, "ref\0", 4); }
static void edit_misaligned(uint8_t *h)
{
    uint64_t v;
    memcpy(&v, h + 128 + 32, 8);
    v += 2;
    memcpy(h + 128 + 32, &v, 8);
}

/* Files whose checksums are right but whose contents lie: each is refused
 * for what is wrong with it and rebuilt; nothing is read out of bounds. */
static void test_forged(void **state)
{
    (void)state;
    static const struct {
        void (*edit)(uint8_t *);
        const char *note;
    } cases[] = {
        {edit_offset, "outside the file"},       {edit_nbytes, "not this model's"},
        {edit_data_offset, "inconsistent sizes"}, {edit_variant, "another model, variant or layout"},
        {edit_misaligned, "outside the file"},
    };
    infer_repack_info ri;
    char note[512];
    run(INFER_MODEL_NO_REPACK, ref_logits, &ri, note, sizeof(note));
    run(0, got, &ri, note, sizeof(note)); /* make sure the file is there and good */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        forge(cache_file(), cases[i].edit);
        run(0, got, &ri, note, sizeof(note));
        expect(&ri, "created", cases[i].note);
        same_logits("rebuilt after a forged header");
    }
}

/* A cache directory that cannot be made: the load still works. */
static void test_unusable_dir(void **state)
{
    (void)state;
    infer_repack_info ri;
    char note[512], bad[600];
    snprintf(bad, sizeof(bad), "%s/model.gguf/sub", tmpdir); /* under a regular file */
    setenv("INFER_REPACK_DIR", bad, 1);
    run(INFER_MODEL_NO_REPACK, ref_logits, &ri, note, sizeof(note));
    run(0, got, &ri, note, sizeof(note));
    setenv("INFER_REPACK_DIR", cache_dir, 1);
    expect(&ri, "failed", "cannot create");
    assert_int_equal(ri.n_tensors, 0);
    same_logits("failed");
}

/* A MoE file: every expert tensor whose type has an x4 layout here is read
 * from the cache file in it, each expert's matrix inside the map (the
 * logits, test_cycle, are those of the weights as stored). */
static void test_experts(void **state)
{
    (void)state;
    infer_model_params mp = {0};
    infer_model *m;
    if (infer_model_load(&m, model, &mp) != INFER_OK)
        fail_msg("%s: %s", model, infer_last_error());
    const struct infer_model *im = m;
    if (im->c.n_expert == 0) {
        infer_model_free(m);
        skip(); /* a dense file: nothing to check */
    }
    const uint8_t *map = im->repack.map;
    assert_non_null(map);
    int n_x4 = 0;
    for (int il = 0; il < im->c.n_layer; il++) {
        const struct layer_weights *l = &im->w.layers[il];
        const struct mat_exps *xs[3] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
        const char *names[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
        for (int k = 0; k < 3; k++) {
            char name[96];
            snprintf(name, sizeof(name), "blk.%d.%s.weight", il, names[k]);
            infer_tensor_info t;
            const int64_t ti = infer_gguf_find_tensor(im->gguf, name);
            assert_true(ti >= 0);
            assert_int_equal(infer_gguf_tensor(im->gguf, ti, &t), INFER_OK);
            const uint32_t x4 = kern.types[t.type].repack_type;
            if (!x4) {
                assert_int_equal(xs[k]->m.type, t.type);
                continue;
            }
            if (xs[k]->m.type != x4)
                fail_msg("%s (%s) is not repacked", name, t.type_name);
            const uint8_t *lo = mat_expert(xs[k], 0).data;
            const uint8_t *hi = (const uint8_t *)mat_expert(xs[k], im->c.n_expert - 1).data + xs[k]->stride;
            assert_true(lo >= map && hi <= map + im->repack.map_size);
            assert_true((uint64_t)(hi - lo) == t.nbytes);
            n_x4++;
        }
    }
    print_message("    %d expert tensors in the x4 layout\n", n_x4);
    assert_true(n_x4 > 0);
    infer_model_free(m);
}

/* The cache key: sha256 on the standard vectors, and the SHA-extension
 * path (where the CPU has it) equal to the portable one for every length
 * and split of the updates. */
static void hex32(const uint8_t *d, char *out)
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha_of(const void *p, size_t n, size_t split, char *out)
{
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, p, split);
    sha256_update(&c, (const uint8_t *)p + split, n - split);
    sha256_final(&c, d);
    hex32(d, out);
}

static void test_sha256(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char sum[65], want[65];
    for (int portable = 0; portable < 2; portable++) {
        const bool was = sha256_use_portable(portable);
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
            sha_of(v[i].in, strlen(v[i].in), strlen(v[i].in) / 2, sum);
            assert_string_equal(sum, v[i].want);
        }
        sha256_use_portable(was);
    }
    const size_t n = 70000;
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    uint64_t x = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t len = 0; len <= n; len += len < 300 ? 1 : 9973) {
        const size_t split = len % 131 < len ? len % 131 : len;
        sha_of(buf, len, split, sum);
        const bool was = sha256_use_portable(true);
        sha_of(buf, len, 0, want);
        sha256_use_portable(was);
        if (strcmp(sum, want) != 0)
            fail_msg("sha256 of %zu bytes (split at %zu): %s, portable %s", len, split, sum, want);
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_forged),
        cmocka_unit_test(test_unusable_dir),
    };
    const struct CMUnitTest moe_tests[] = {
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_experts),
        cmocka_unit_test(test_forged),
    };
    src_name = "llama-q4_0.gguf";
    int failed = cmocka_run_group_tests_name("repack Q4_0", tests, setup, teardown);
    src_name = "llama-q4_k_m.gguf";
    failed += cmocka_run_group_tests_name("repack Q4_K_M", tests, setup, teardown);
    src_name = "llama-iq4_nl.gguf";
    failed += cmocka_run_group_tests_name("repack IQ4_NL", tests, setup, teardown);
    src_name = "llama-q3_k_m.gguf";
    failed += cmocka_run_group_tests_name("repack Q3_K_M", tests, setup, teardown);
    src_name = "qwen3moe-q4_k_m.gguf";
    failed += cmocka_run_group_tests_name("repack MoE Q4_K_M", moe_tests, setup, teardown);
    return failed;
}
