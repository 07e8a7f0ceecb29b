/*
 * test-gguf.c - the GGUF loader (src/model/gguf.c) and the residency helpers.
 *
 * The files are written by the tests themselves with a small in-test GGUF
 * writer (struct gw, below): every metadata value type, arrays of each and
 * nested arrays, for v2 and v3, custom alignment and tensor placement, read
 * back through the public accessors (infer.h) and the internal array view
 * (gguf.h).  Then a corpus of broken files, each of which must be rejected
 * with a specific message: truncation at every byte, absurd counts, lengths
 * and offsets past the end, misalignment, overlaps, bad type ids, nesting,
 * magic, versions and duplicates.  Buffers handed to the parser are exactly
 * the file's size, so that under --enable-asan any read past the end is a
 * failure.  Real files from ../shared/fixtures are opened too.
 */
#include "test-common.h"

#include "model/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ writer */

/* A GGUF image under construction; all integers are written little-endian. */
struct gw {
    uint8_t *p;
    size_t len, cap;
};

static void gw_raw(struct gw *w, const void *d, size_t n)
{
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        w->p = realloc(w->p, cap);
        assert_non_null(w->p);
        w->cap = cap;
    }
    if (n)
        memcpy(w->p + w->len, d, n);
    w->len += n;
}

/* n (1, 2, 4 or 8) little-endian bytes of v */
static void gw_le(struct gw *w, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    gw_raw(w, b, (size_t)n);
}

static void gw_u32(struct gw *w, uint32_t v) { gw_le(w, v, 4); }
static void gw_u64(struct gw *w, uint64_t v) { gw_le(w, v, 8); }

static uint64_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

static void gw_strn(struct gw *w, const char *s, size_t n)
{
    gw_u64(w, n);
    gw_raw(w, s, n);
}

static void gw_str(struct gw *w, const char *s) { gw_strn(w, s, strlen(s)); }

static void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gw_raw(w, "GGUF", 4);
    gw_u32(w, version);
    gw_u64(w, n_tensors);
    gw_u64(w, n_kv);
}

static size_t type_bytes(uint32_t type)
{
    switch (type) {
    case INFER_GGUF_UINT8: case INFER_GGUF_INT8: case INFER_GGUF_BOOL: return 1;
    case INFER_GGUF_UINT16: case INFER_GGUF_INT16: return 2;
    case INFER_GGUF_UINT32: case INFER_GGUF_INT32: case INFER_GGUF_FLOAT32: return 4;
    default: return 8;
    }
}

/* one primitive element of the given type, bits already in its encoding */
static void gw_prim(struct gw *w, uint32_t type, uint64_t bits)
{
    gw_le(w, bits, (int)type_bytes(type));
}

static void gw_key(struct gw *w, const char *key, uint32_t type)
{
    gw_str(w, key);
    gw_u32(w, type);
}

static void gw_kv_prim(struct gw *w, const char *key, uint32_t type, uint64_t bits)
{
    gw_key(w, key, type);
    gw_prim(w, type, bits);
}

static void gw_kv_str(struct gw *w, const char *key, const char *s)
{
    gw_key(w, key, INFER_GGUF_STRING);
    gw_str(w, s);
}

/* array header; key NULL for an element of an array of arrays */
static void gw_arr(struct gw *w, const char *key, uint32_t elem_type, uint64_t n)
{
    if (key)
        gw_key(w, key, INFER_GGUF_ARRAY);
    gw_u32(w, elem_type);
    gw_u64(w, n);
}

static void gw_pad(struct gw *w, size_t align)
{
    static const uint8_t zero[1] = {0};
    while (w->len % align)
        gw_raw(w, zero, 1);
}

/* One tensor info; writes n_dims dims even when n_dims is out of range. */
struct tspec {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t type;
    uint64_t offset;
};

static void gw_tensor(struct gw *w, const struct tspec *t)
{
    gw_str(w, t->name);
    gw_u32(w, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims && d < 5; d++)
        gw_u64(w, t->ne[d]);
    gw_u32(w, t->type);
    gw_u64(w, t->offset);
}

/* Tensor data: byte i of the data section is (i * 7 + 3) & 0xff. */
static uint8_t data_byte(size_t i) { return (uint8_t)(i * 7 + 3); }

static void gw_data(struct gw *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b = data_byte(i);
        gw_raw(w, &b, 1);
    }
}

/* A v3 file with only tensors: optional general.alignment (u32; 0 = none),
 * the infos, padding, then data_bytes of data.  *data_offset gets where the
 * data section starts. */
static void build_tensor_file(struct gw *w, uint32_t version, uint32_t alignment,
                              const struct tspec *ts, int n, size_t data_bytes, size_t *data_offset)
{
    gw_header(w, version, (uint64_t)n, alignment ? 1 : 0);
    if (alignment)
        gw_kv_prim(w, "general.alignment", INFER_GGUF_UINT32, alignment);
    for (int i = 0; i < n; i++)
        gw_tensor(w, &ts[i]);
    gw_pad(w, alignment ? alignment : 32);
    if (data_offset)
        *data_offset = w->len;
    gw_data(w, data_bytes);
}

/* ------------------------------------------------------------ helpers */

static char tmpdir[256];

static int group_setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/infer-test-gguf-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return rmdir(tmpdir); /* each test removes its own files */
}

/* Write buf to <tmpdir>/<name>; returns the path (static rotating buffer). */
static const char *write_tmp(const char *name, const void *buf, size_t len)
{
    const char *path = test_path(tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Parse an exact-size heap copy of buf (so ASan sees any overread). */
static infer_status open_copy(infer_gguf **g, const uint8_t *buf, size_t len, uint8_t **copy)
{
    *copy = malloc(len ? len : 1);
    assert_non_null(*copy);
    if (len)
        memcpy(*copy, buf, len);
    return infer_gguf_open_memory(g, *copy, len);
}

/* The image must be rejected, with a message containing substr. */
static void expect_error(const struct gw *w, const char *substr)
{
    infer_gguf *g = (infer_gguf *)1;
    uint8_t *copy;
    infer_status st = open_copy(&g, w->p, w->len, &copy);
    if (st == INFER_OK || !strstr(infer_last_error(), substr))
        print_error("expected an error containing \"%s\", got %s: \"%s\"\n", substr,
                    infer_status_name(st), infer_last_error());
    assert_int_not_equal(st, INFER_OK);
    assert_null(g);
    assert_non_null(strstr(infer_last_error(), substr));
    free(copy);
}

/* Same, through a file on disk: the message also names the path. */
static void expect_file_error(const struct gw *w, const char *substr)
{
    const char *path = write_tmp("broken.gguf", w->p, w->len);
    infer_gguf *g = (infer_gguf *)1;
    infer_status st = infer_gguf_open(&g, path, 0);
    if (st == INFER_OK || !strstr(infer_last_error(), substr))
        print_error("expected an error containing \"%s\", got %s: \"%s\"\n", substr,
                    infer_status_name(st), infer_last_error());
    assert_int_not_equal(st, INFER_OK);
    assert_null(g);
    assert_non_null(strstr(infer_last_error(), substr));
    assert_non_null(strstr(infer_last_error(), path));
    unlink(path);
}

static void expect_ok(const struct gw *w, infer_gguf **g, uint8_t **copy)
{
    infer_status st = open_copy(g, w->p, w->len, copy);
    if (st != INFER_OK)
        print_error("unexpected error: %s\n", infer_last_error());
    assert_int_equal(st, INFER_OK);
    assert_non_null(*g);
}

/* ------------------------------------------------------------ every value type */

#define BIG_U64 0xfedcba9876543210ull /* > INT64_MAX */

/* All value types as top-level values, arrays of each, and nested arrays. */
static void build_all_types(struct gw *w, uint32_t version)
{
    gw_header(w, version, 1, 32);
    gw_kv_prim(w, "t.u8", INFER_GGUF_UINT8, 200);
    gw_kv_prim(w, "t.i8", INFER_GGUF_INT8, (uint8_t)-100);
    gw_kv_prim(w, "t.u16", INFER_GGUF_UINT16, 60000);
    gw_kv_prim(w, "t.i16", INFER_GGUF_INT16, (uint16_t)-30000);
    gw_kv_prim(w, "t.u32", INFER_GGUF_UINT32, 4000000000u);
    gw_kv_prim(w, "t.i32", INFER_GGUF_INT32, (uint32_t)-2000000000);
    gw_kv_prim(w, "t.f32", INFER_GGUF_FLOAT32, f32_bits(1.5f));
    gw_kv_prim(w, "t.bool", INFER_GGUF_BOOL, 1);
    gw_kv_prim(w, "t.false", INFER_GGUF_BOOL, 0);
    gw_kv_str(w, "t.str", "hello\nworld");
    gw_kv_str(w, "t.empty", "");
    gw_kv_prim(w, "t.u64", INFER_GGUF_UINT64, 0x123456789abull);
    gw_kv_prim(w, "t.u64big", INFER_GGUF_UINT64, BIG_U64);
    gw_kv_prim(w, "t.i64", INFER_GGUF_INT64, (uint64_t)-0x123456789abll);
    gw_kv_prim(w, "t.f64", INFER_GGUF_FLOAT64, f64_bits(-2.25));

    gw_arr(w, "a.u8", INFER_GGUF_UINT8, 3);
    gw_prim(w, INFER_GGUF_UINT8, 1), gw_prim(w, INFER_GGUF_UINT8, 2), gw_prim(w, INFER_GGUF_UINT8, 255);
    gw_arr(w, "a.i8", INFER_GGUF_INT8, 2);
    gw_prim(w, INFER_GGUF_INT8, (uint8_t)-128), gw_prim(w, INFER_GGUF_INT8, 127);
    gw_arr(w, "a.u16", INFER_GGUF_UINT16, 2);
    gw_prim(w, INFER_GGUF_UINT16, 1), gw_prim(w, INFER_GGUF_UINT16, 65535);
    gw_arr(w, "a.i16", INFER_GGUF_INT16, 2);
    gw_prim(w, INFER_GGUF_INT16, (uint16_t)-32768), gw_prim(w, INFER_GGUF_INT16, 5);
    gw_arr(w, "a.u32", INFER_GGUF_UINT32, 2);
    gw_prim(w, INFER_GGUF_UINT32, 7), gw_prim(w, INFER_GGUF_UINT32, 4000000000u);
    gw_arr(w, "a.i32", INFER_GGUF_INT32, 3);
    gw_prim(w, INFER_GGUF_INT32, 1), gw_prim(w, INFER_GGUF_INT32, (uint32_t)-2);
    gw_prim(w, INFER_GGUF_INT32, 3);
    gw_arr(w, "a.f32", INFER_GGUF_FLOAT32, 2);
    gw_prim(w, INFER_GGUF_FLOAT32, f32_bits(0.5f)), gw_prim(w, INFER_GGUF_FLOAT32, f32_bits(-1.25f));
    gw_arr(w, "a.bool", INFER_GGUF_BOOL, 2);
    gw_prim(w, INFER_GGUF_BOOL, 1), gw_prim(w, INFER_GGUF_BOOL, 0);
    gw_arr(w, "a.str", INFER_GGUF_STRING, 3);
    gw_str(w, "a"), gw_str(w, ""), gw_strn(w, "x\0z", 3); /* NUL inside an array string is fine */
    gw_arr(w, "a.u64", INFER_GGUF_UINT64, 2);
    gw_prim(w, INFER_GGUF_UINT64, 1), gw_prim(w, INFER_GGUF_UINT64, BIG_U64);
    gw_arr(w, "a.i64", INFER_GGUF_INT64, 2);
    gw_prim(w, INFER_GGUF_INT64, (uint64_t)INT64_MIN), gw_prim(w, INFER_GGUF_INT64, 42);
    gw_arr(w, "a.f64", INFER_GGUF_FLOAT64, 1);
    gw_prim(w, INFER_GGUF_FLOAT64, f64_bits(3.5));
    gw_arr(w, "a.empty", INFER_GGUF_INT32, 0);
    /* [[1, 2], [3]] */
    gw_arr(w, "a.nested", INFER_GGUF_ARRAY, 2);
    gw_arr(w, NULL, INFER_GGUF_INT32, 2);
    gw_prim(w, INFER_GGUF_INT32, 1), gw_prim(w, INFER_GGUF_INT32, 2);
    gw_arr(w, NULL, INFER_GGUF_INT32, 1);
    gw_prim(w, INFER_GGUF_INT32, 3);
    /* [["x", "yz"], []] */
    gw_arr(w, "a.nested_str", INFER_GGUF_ARRAY, 2);
    gw_arr(w, NULL, INFER_GGUF_STRING, 2);
    gw_str(w, "x"), gw_str(w, "yz");
    gw_arr(w, NULL, INFER_GGUF_STRING, 0);
    /* [[[9.5]]] */
    gw_arr(w, "a.deep", INFER_GGUF_ARRAY, 1);
    gw_arr(w, NULL, INFER_GGUF_ARRAY, 1);
    gw_arr(w, NULL, INFER_GGUF_FLOAT64, 1);
    gw_prim(w, INFER_GGUF_FLOAT64, f64_bits(9.5));
    gw_kv_str(w, "general.architecture", "test");

    struct tspec t = {"w", 2, {4, 2}, 0 /* F32 */, 0};
    gw_tensor(w, &t);
    gw_pad(w, 32);
    gw_data(w, 32);
}

static void check_all_types(const infer_gguf *g, uint32_t version)
{
    char buf[128];
    assert_int_equal(infer_gguf_version(g), version);
    assert_int_equal(infer_gguf_n_kv(g), 32);
    assert_int_equal(infer_gguf_n_tensors(g), 1);
    assert_int_equal(infer_gguf_alignment(g), 32);

    /* integers of every width through one getter */
    assert_int_equal(infer_gguf_get_int(g, "t.u8", -1), 200);
    assert_int_equal(infer_gguf_get_int(g, "t.i8", 0), -100);
    assert_int_equal(infer_gguf_get_int(g, "t.u16", -1), 60000);
    assert_int_equal(infer_gguf_get_int(g, "t.i16", 0), -30000);
    assert_int_equal(infer_gguf_get_int(g, "t.u32", -1), 4000000000ll);
    assert_int_equal(infer_gguf_get_int(g, "t.i32", 0), -2000000000ll);
    assert_int_equal(infer_gguf_get_int(g, "t.u64", -1), 0x123456789abll);
    assert_int_equal(infer_gguf_get_int(g, "t.i64", 0), -0x123456789abll);
    assert_int_equal(infer_gguf_get_int(g, "t.u64big", -7), -7); /* does not fit int64 */
    assert_int_equal(infer_gguf_get_int(g, "t.f32", -7), -7);    /* not an integer */
    assert_int_equal(infer_gguf_get_int(g, "t.str", -7), -7);
    assert_int_equal(infer_gguf_get_int(g, "absent", -7), -7);

    /* floats: both widths, and integers widen */
    assert_true(infer_gguf_get_float(g, "t.f32", 0) == 1.5);
    assert_true(infer_gguf_get_float(g, "t.f64", 0) == -2.25);
    assert_true(infer_gguf_get_float(g, "t.i16", 0) == -30000.0);
    assert_true(infer_gguf_get_float(g, "t.str", 9.0) == 9.0);
    assert_true(infer_gguf_get_float(g, "a.f32", 9.0) == 9.0);

    /* booleans */
    assert_true(infer_gguf_get_bool(g, "t.bool", false));
    assert_false(infer_gguf_get_bool(g, "t.false", true));
    assert_true(infer_gguf_get_bool(g, "absent", true));
    assert_true(infer_gguf_get_bool(g, "t.str", true));

    /* strings */
    assert_string_equal(infer_gguf_get_str(g, "t.str", NULL), "hello\nworld");
    assert_string_equal(infer_gguf_get_str(g, "t.empty", NULL), "");
    assert_string_equal(infer_gguf_get_str(g, "general.architecture", NULL), "test");
    assert_null(infer_gguf_get_str(g, "t.u8", NULL));
    assert_null(infer_gguf_get_str(g, "a.str", NULL)); /* an array is not a string */

    /* key table */
    int64_t k = infer_gguf_find_key(g, "t.f64");
    assert_int_equal(k, 14);
    assert_string_equal(infer_gguf_kv_key(g, k), "t.f64");
    assert_int_equal(infer_gguf_kv_type(g, k), INFER_GGUF_FLOAT64);
    assert_int_equal(infer_gguf_find_key(g, "absent"), -1);
    assert_null(infer_gguf_kv_key(g, 32));
    assert_true((int)infer_gguf_kv_type(g, -1) == -1);
    static const struct { const char *key; uint32_t type; uint64_t n; } arrs[] = {
        {"a.u8", INFER_GGUF_UINT8, 3},     {"a.i8", INFER_GGUF_INT8, 2},
        {"a.u16", INFER_GGUF_UINT16, 2},   {"a.i16", INFER_GGUF_INT16, 2},
        {"a.u32", INFER_GGUF_UINT32, 2},   {"a.i32", INFER_GGUF_INT32, 3},
        {"a.f32", INFER_GGUF_FLOAT32, 2},  {"a.bool", INFER_GGUF_BOOL, 2},
        {"a.str", INFER_GGUF_STRING, 3},   {"a.u64", INFER_GGUF_UINT64, 2},
        {"a.i64", INFER_GGUF_INT64, 2},    {"a.f64", INFER_GGUF_FLOAT64, 1},
        {"a.empty", INFER_GGUF_INT32, 0},  {"a.nested", INFER_GGUF_ARRAY, 2},
        {"a.nested_str", INFER_GGUF_ARRAY, 2}, {"a.deep", INFER_GGUF_ARRAY, 1},
    };
    for (size_t i = 0; i < sizeof(arrs) / sizeof(arrs[0]); i++) {
        k = infer_gguf_find_key(g, arrs[i].key);
        assert_true(k >= 0);
        assert_int_equal(infer_gguf_kv_type(g, k), INFER_GGUF_ARRAY);
        assert_int_equal(infer_gguf_kv_arr_type(g, k), arrs[i].type);
        assert_int_equal(infer_gguf_kv_arr_n(g, k), arrs[i].n);
        assert_non_null(gguf_get_arr(g, arrs[i].key, arrs[i].type));
        assert_null(gguf_get_arr(g, arrs[i].key, arrs[i].type == 0 ? 1 : 0)); /* wrong element type */
    }
    assert_int_equal(infer_gguf_kv_arr_n(g, infer_gguf_find_key(g, "t.u8")), 0);
    assert_true((int)infer_gguf_kv_arr_type(g, infer_gguf_find_key(g, "t.u8")) == -1);
    assert_null(gguf_get_arr(g, "t.u8", INFER_GGUF_UINT8)); /* not an array */

    /* primitive arrays through the internal view, any width */
    const struct gguf_value *a;
    int64_t iv;
    double fv;
    a = gguf_get_arr(g, "a.u8", INFER_GGUF_UINT8);
    assert_true(gguf_arr_int(a, 2, &iv) && iv == 255);
    assert_false(gguf_arr_int(a, 3, &iv)); /* out of range */
    a = gguf_get_arr(g, "a.i8", INFER_GGUF_INT8);
    assert_true(gguf_arr_int(a, 0, &iv) && iv == -128);
    a = gguf_get_arr(g, "a.u16", INFER_GGUF_UINT16);
    assert_true(gguf_arr_int(a, 1, &iv) && iv == 65535);
    a = gguf_get_arr(g, "a.i16", INFER_GGUF_INT16);
    assert_true(gguf_arr_int(a, 0, &iv) && iv == -32768);
    assert_true(gguf_arr_float(a, 1, &fv) && fv == 5.0);
    a = gguf_get_arr(g, "a.u32", INFER_GGUF_UINT32);
    assert_true(gguf_arr_int(a, 1, &iv) && iv == 4000000000ll);
    a = gguf_get_arr(g, "a.i32", INFER_GGUF_INT32);
    assert_true(gguf_arr_int(a, 1, &iv) && iv == -2);
    a = gguf_get_arr(g, "a.f32", INFER_GGUF_FLOAT32);
    assert_true(gguf_arr_float(a, 1, &fv) && fv == -1.25);
    assert_false(gguf_arr_int(a, 0, &iv)); /* a float is not an integer */
    a = gguf_get_arr(g, "a.bool", INFER_GGUF_BOOL);
    assert_true(gguf_arr_int(a, 0, &iv) && iv == 1);
    assert_true(gguf_arr_int(a, 1, &iv) && iv == 0);
    a = gguf_get_arr(g, "a.u64", INFER_GGUF_UINT64);
    assert_true(gguf_arr_int(a, 0, &iv) && iv == 1);
    assert_false(gguf_arr_int(a, 1, &iv)); /* > INT64_MAX */
    a = gguf_get_arr(g, "a.i64", INFER_GGUF_INT64);
    assert_true(gguf_arr_int(a, 0, &iv) && iv == INT64_MIN);
    a = gguf_get_arr(g, "a.f64", INFER_GGUF_FLOAT64);
    assert_true(gguf_arr_float(a, 0, &fv) && fv == 3.5);
    assert_false(gguf_arr_float(a, 1, &fv));
    a = gguf_get_arr(g, "a.empty", INFER_GGUF_INT32);
    assert_false(gguf_arr_int(a, 0, &iv));

    /* string arrays point into the file and are not NUL-terminated */
    a = gguf_get_arr(g, "a.str", INFER_GGUF_STRING);
    assert_int_equal(a->arr.n, 3);
    assert_int_equal(a->arr.strs[0].len, 1);
    assert_memory_equal(a->arr.strs[0].s, "a", 1);
    assert_int_equal(a->arr.strs[1].len, 0);
    assert_int_equal(a->arr.strs[2].len, 3);
    assert_memory_equal(a->arr.strs[2].s, "x\0z", 3);
    assert_false(gguf_arr_int(a, 0, &iv));

    /* nested arrays */
    a = gguf_get_arr(g, "a.nested", INFER_GGUF_ARRAY);
    assert_int_equal(a->arr.n, 2);
    assert_int_equal(a->arr.vals[0].type, INFER_GGUF_ARRAY);
    assert_int_equal(a->arr.vals[0].arr.type, INFER_GGUF_INT32);
    assert_int_equal(a->arr.vals[0].arr.n, 2);
    assert_int_equal(a->arr.vals[1].arr.n, 1);
    assert_true(gguf_arr_int(&a->arr.vals[0], 1, &iv) && iv == 2);
    assert_true(gguf_arr_int(&a->arr.vals[1], 0, &iv) && iv == 3);
    assert_false(gguf_arr_int(a, 0, &iv)); /* an array is not an integer */
    a = gguf_get_arr(g, "a.nested_str", INFER_GGUF_ARRAY);
    assert_int_equal(a->arr.vals[0].arr.type, INFER_GGUF_STRING);
    assert_int_equal(a->arr.vals[0].arr.strs[1].len, 2);
    assert_memory_equal(a->arr.vals[0].arr.strs[1].s, "yz", 2);
    assert_int_equal(a->arr.vals[1].arr.n, 0);
    a = gguf_get_arr(g, "a.deep", INFER_GGUF_ARRAY);
    const struct gguf_value *inner = &a->arr.vals[0].arr.vals[0];
    assert_int_equal(a->arr.vals[0].arr.type, INFER_GGUF_ARRAY);
    assert_int_equal(inner->arr.type, INFER_GGUF_FLOAT64);
    assert_true(gguf_arr_float(inner, 0, &fv) && fv == 9.5);

    /* formatting */
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.u8"), buf, sizeof(buf)), "200");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.i8"), buf, sizeof(buf)), "-100");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.u32"), buf, sizeof(buf)),
                        "4000000000");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.u64big"), buf, sizeof(buf)),
                        "18364758544493064720");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.f32"), buf, sizeof(buf)), "1.5");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.f64"), buf, sizeof(buf)), "-2.25");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.bool"), buf, sizeof(buf)), "true");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "t.str"), buf, sizeof(buf)),
                        "hello\\nworld");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "a.i32"), buf, sizeof(buf)),
                        "[i32 × 3] 1, -2, 3");
    assert_string_equal(infer_gguf_kv_format(g, infer_gguf_find_key(g, "a.nested"), buf, sizeof(buf)),
                        "[arr × 2]");
    assert_string_equal(infer_gguf_kv_format(g, 99, buf, sizeof(buf)), "");

    /* the tensor after all that metadata */
    infer_tensor_info ti;
    assert_int_equal(infer_gguf_tensor(g, 0, &ti), INFER_OK);
    assert_string_equal(ti.name, "w");
    assert_int_equal(ti.nbytes, 32);
    assert_int_equal(ti.offset % 32, 0);
    assert_int_equal(ti.offset, infer_gguf_data_offset(g));
    assert_int_equal(ti.offset + ti.nbytes, infer_gguf_file_size(g));
}

static void test_all_value_types(void **state)
{
    (void)state;
    for (uint32_t version = 2; version <= 3; version++) {
        struct gw w = {0};
        build_all_types(&w, version);
        infer_gguf *g;
        uint8_t *copy;
        expect_ok(&w, &g, &copy);
        check_all_types(g, version);
        assert_string_equal(infer_gguf_path(g), "<memory>");
        infer_gguf_close(g);
        free(copy);

        /* the same file through open(2) + mmap */
        const char *path = write_tmp("types.gguf", w.p, w.len);
        assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
        check_all_types(g, version);
        assert_string_equal(infer_gguf_path(g), path);
        assert_int_equal(infer_gguf_file_size(g), w.len);
        assert_true(infer_gguf_load_seconds(g) >= 0.0);
        infer_gguf_close(g);
        unlink(path);
        free(w.p);
    }
}

static void test_kv_format_strings(void **state)
{
    (void)state;
    char buf[128];
    struct gw w = {0};
    gw_header(&w, 3, 0, 3);
    gw_kv_str(&w, "eight", "abcdefgh");
    char longs[201];
    memset(longs, 'x', 200);
    longs[200] = '\0';
    gw_kv_str(&w, "long", longs);
    gw_kv_str(&w, "ctl", "a\tb\x7f");
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    /* a string that ends exactly where the buffer's room does is not cut */
    assert_string_equal(infer_gguf_kv_format(g, 0, buf, 16), "abcdefgh");
    /* a long one is cut, says so, and stays inside the buffer */
    memset(buf, '#', sizeof(buf));
    infer_gguf_kv_format(g, 1, buf, 32);
    assert_true(strlen(buf) < 32);
    assert_non_null(strstr(buf, "..."));
    assert_int_equal(buf[40], '#');
    assert_string_equal(infer_gguf_kv_format(g, 1, buf, 1), "");
    assert_string_equal(infer_gguf_kv_format(g, 2, buf, sizeof(buf)), "a\\x09b\\x7f");
    infer_gguf_close(g);
    free(copy);
    free(w.p);
}

/* ------------------------------------------------------------ tensors and alignment */

static void check_tensor(const infer_gguf *g, int64_t i, const char *name, const char *type_name,
                         uint32_t n_dims, const int64_t ne[4], uint64_t rel, uint64_t nbytes,
                         const uint8_t *base)
{
    infer_tensor_info ti;
    assert_int_equal(infer_gguf_find_tensor(g, name), i);
    assert_int_equal(infer_gguf_tensor(g, i, &ti), INFER_OK);
    assert_string_equal(ti.name, name);
    assert_string_equal(ti.type_name, type_name);
    assert_int_equal(ti.n_dims, n_dims);
    for (int d = 0; d < 4; d++)
        assert_int_equal(ti.ne[d], ne[d]);
    size_t data_offset = infer_gguf_data_offset(g);
    assert_int_equal(ti.offset, data_offset + rel);
    assert_int_equal(ti.nbytes, nbytes);
    assert_ptr_equal(ti.data, base + data_offset + rel);
    const uint8_t *d = ti.data;
    for (uint64_t k = 0; k < nbytes; k++)
        assert_int_equal(d[k], data_byte(rel + k));
}

static void test_tensor_placement(void **state)
{
    (void)state;
    /* 4-D F32, Q8_0 (34-byte blocks), F16 with a gap before it, all for v2 and v3 */
    const struct tspec ts[] = {
        {"blk.0.ffn_up.weight", 4, {2, 2, 2, 1}, 0 /* F32 */, 0},
        {"blk.0.attn_q.weight", 2, {64, 1}, 8 /* Q8_0 */, 32},
        {"output_norm.weight", 1, {3}, 1 /* F16 */, 128},
    };
    for (uint32_t version = 2; version <= 3; version++) {
        struct gw w = {0};
        size_t data_offset;
        build_tensor_file(&w, version, 0, ts, 3, 134, &data_offset);
        infer_gguf *g;
        uint8_t *copy;
        expect_ok(&w, &g, &copy);
        assert_int_equal(infer_gguf_data_offset(g), data_offset);
        assert_int_equal(infer_gguf_n_tensors(g), 3);
        check_tensor(g, 0, "blk.0.ffn_up.weight", "F32", 4, (int64_t[]){2, 2, 2, 1}, 0, 32, copy);
        check_tensor(g, 1, "blk.0.attn_q.weight", "Q8_0", 2, (int64_t[]){64, 1, 1, 1}, 32, 68, copy);
        check_tensor(g, 2, "output_norm.weight", "F16", 1, (int64_t[]){3, 1, 1, 1}, 128, 6, copy);
        assert_int_equal(infer_gguf_find_tensor(g, "absent"), -1);
        infer_tensor_info ti;
        assert_int_equal(infer_gguf_tensor(g, 3, &ti), INFER_ERR_INVALID);
        assert_int_equal(infer_gguf_tensor(g, -1, &ti), INFER_ERR_INVALID);
        const struct gguf_tensor *t = gguf_get_tensor(g, "blk.0.attn_q.weight");
        assert_non_null(t);
        assert_int_equal(t->offset, 32);
        assert_null(gguf_get_tensor(g, "absent"));
        infer_gguf_close(g);
        free(copy);

        /* through the file: data points into the map */
        const char *path = write_tmp("tensors.gguf", w.p, w.len);
        assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
        assert_int_equal(infer_gguf_tensor(g, 1, &ti), INFER_OK);
        assert_int_equal(ti.offset, data_offset + 32);
        assert_int_equal(((const uint8_t *)ti.data)[67], data_byte(32 + 67));
        infer_residency r;
        assert_int_equal(infer_gguf_range_residency(g, ti.offset, ti.nbytes, &r), INFER_OK);
        assert_int_equal(r.bytes_total, 68);
        assert_int_equal(infer_gguf_range_residency(g, w.len - 1, 2, &r), INFER_ERR_INVALID);
        infer_gguf_close(g);
        unlink(path);
        free(w.p);
    }
}

static void test_custom_alignment(void **state)
{
    (void)state;
    const struct tspec ts[] = {
        {"a", 1, {8}, 0, 0},
        {"b", 1, {8}, 0, 64},
    };
    struct gw w = {0};
    size_t data_offset;
    build_tensor_file(&w, 3, 64, ts, 2, 96, &data_offset);
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    assert_int_equal(infer_gguf_alignment(g), 64);
    assert_int_equal(infer_gguf_data_offset(g), data_offset);
    assert_int_equal(data_offset % 64, 0);
    check_tensor(g, 1, "b", "F32", 1, (int64_t[]){8, 1, 1, 1}, 64, 32, copy);
    infer_gguf_close(g);
    free(copy);
    free(w.p);

    /* general.alignment as u64 and as u8: any integer width */
    const uint32_t widths[] = {INFER_GGUF_UINT64, INFER_GGUF_UINT8, INFER_GGUF_INT32};
    for (int i = 0; i < 3; i++) {
        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 1, 1);
        gw_kv_prim(&w, "general.alignment", widths[i], 16);
        gw_tensor(&w, &(struct tspec){"t", 1, {4}, 0, 16});
        gw_pad(&w, 16);
        data_offset = w.len;
        gw_data(&w, 32);
        expect_ok(&w, &g, &copy);
        assert_int_equal(infer_gguf_alignment(g), 16);
        assert_int_equal(infer_gguf_data_offset(g), data_offset);
        infer_gguf_close(g);
        free(copy);
        free(w.p);
    }
}

static void test_alignment_rejected(void **state)
{
    (void)state;
    static const struct { uint32_t type; uint64_t bits; } bad[] = {
        {INFER_GGUF_UINT32, 48},         /* not a power of two */
        {INFER_GGUF_UINT32, 0},
        {INFER_GGUF_INT32, (uint32_t)-64},
        {INFER_GGUF_UINT64, 1ull << 40}, /* absurd */
        {INFER_GGUF_BOOL, 1},
        {INFER_GGUF_FLOAT32, 0x42800000}, /* 64.0f */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw w = {0};
        gw_header(&w, 3, 0, 1);
        gw_kv_prim(&w, "general.alignment", bad[i].type, bad[i].bits);
        expect_error(&w, "general.alignment must be an integer power of two");
        free(w.p);
    }
    struct gw w = {0};
    gw_header(&w, 3, 0, 1);
    gw_kv_str(&w, "general.alignment", "64");
    expect_error(&w, "general.alignment must be an integer power of two up to 2^20, not 64 (str)");
    free(w.p);
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 0, 1);
    gw_kv_prim(&w, "general.alignment", INFER_GGUF_UINT32, 48);
    expect_error(&w, "not 48 (u32)");
    free(w.p);
}

static void test_unknown_tensor_type(void **state)
{
    (void)state;
    /* id 4 is a retired ggml type, 200 was never one, 41 is infer's own
     * repacked Q5_0 (kernels/repack.h, never valid in a file): all open,
     * unusable */
    const struct tspec ts[] = {
        {"future", 2, {7, 3}, 200, 0},
        {"retired", 1, {32}, 4, 32},
        {"known", 1, {8}, 0, 64},
        {"internal", 1, {32}, 41, 96},
    };
    struct gw w = {0};
    build_tensor_file(&w, 3, 0, ts, 4, 128, NULL);
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    infer_tensor_info ti;
    assert_int_equal(infer_gguf_tensor(g, 0, &ti), INFER_OK);
    assert_int_equal(ti.type, 200);
    assert_string_equal(ti.type_name, "unknown(200)");
    assert_int_equal(ti.nbytes, 0);
    assert_null(ti.data);
    assert_int_equal(ti.ne[1], 3);
    assert_int_equal(infer_gguf_tensor(g, 1, &ti), INFER_OK);
    assert_string_equal(ti.type_name, "unknown(4)");
    assert_null(ti.data);
    check_tensor(g, 2, "known", "F32", 1, (int64_t[]){8, 1, 1, 1}, 64, 32, copy);
    assert_int_equal(infer_gguf_tensor(g, 3, &ti), INFER_OK);
    assert_string_equal(ti.type_name, "unknown(41)");
    assert_null(ti.data);
    infer_gguf_close(g);
    free(copy);
    free(w.p);
}

static void test_no_tensors(void **state)
{
    (void)state;
    struct gw w = {0};
    gw_header(&w, 3, 0, 0); /* 24 bytes: the smallest valid file */
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    assert_int_equal(infer_gguf_n_kv(g), 0);
    assert_int_equal(infer_gguf_n_tensors(g), 0);
    infer_gguf_close(g);
    free(copy);
    free(w.p);
}

/* ------------------------------------------------------------ broken files */

/* A small valid file with something in every section: each truncation of it
 * must be rejected. */
static void build_small(struct gw *w, uint32_t version)
{
    gw_header(w, version, 2, 5);
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_prim(w, "llama.block_count", INFER_GGUF_UINT32, 1);
    gw_kv_prim(w, "llama.rope.freq_base", INFER_GGUF_FLOAT32, f32_bits(10000.0f));
    gw_arr(w, "tokenizer.ggml.tokens", INFER_GGUF_STRING, 3);
    gw_str(w, "<s>"), gw_str(w, "a"), gw_str(w, "bc");
    gw_arr(w, "x.nested", INFER_GGUF_ARRAY, 1);
    gw_arr(w, NULL, INFER_GGUF_INT16, 2);
    gw_prim(w, INFER_GGUF_INT16, 1), gw_prim(w, INFER_GGUF_INT16, 2);
    gw_tensor(w, &(struct tspec){"token_embd.weight", 2, {4, 3}, 1 /* F16 */, 0});
    gw_tensor(w, &(struct tspec){"blk.0.attn_q.weight", 1, {32}, 2 /* Q4_0 */, 32});
    gw_pad(w, 32);
    gw_data(w, 50);
}

static void test_truncated_everywhere(void **state)
{
    (void)state;
    for (uint32_t version = 2; version <= 3; version++) {
        struct gw w = {0};
        build_small(&w, version);
        infer_gguf *g;
        uint8_t *copy;
        expect_ok(&w, &g, &copy); /* the whole file is fine */
        infer_gguf_close(g);
        free(copy);
        for (size_t len = 0; len < w.len; len++) {
            g = (infer_gguf *)1;
            infer_status st = open_copy(&g, w.p, len, &copy);
            const char *e = infer_last_error();
            bool specific = strstr(e, "bad magic") || strstr(e, "truncated") ||
                            strstr(e, "past end of file") || strstr(e, "cannot fit");
            if (st == INFER_OK || !specific)
                print_error("v%u cut at %zu of %zu: %s \"%s\"\n", version, len, w.len,
                            infer_status_name(st), e);
            assert_int_equal(st, INFER_ERR_FORMAT);
            assert_null(g);
            assert_true(specific);
            free(copy);
        }
        /* and through a file, at one cut per section */
        size_t full = w.len;
        w.len = 40;
        expect_file_error(&w, "metadata count 5 cannot fit in a 40-byte file");
        w.len = full - 10;
        expect_file_error(&w, "tensor 'blk.0.attn_q.weight' extends past end of file");
        free(w.p);
    }
}

static void test_past_eof_message(void **state)
{
    (void)state;
    const struct tspec ts[] = {{"blk.3.attn_q.weight", 2, {16, 2}, 0, 64}};
    struct gw w = {0};
    size_t data_offset;
    build_tensor_file(&w, 3, 0, ts, 1, 64 + 100, &data_offset);
    char want[256];
    snprintf(want, sizeof(want),
             "tensor 'blk.3.attn_q.weight' extends past end of file (offset %zu, size 128, file %zu)",
             data_offset + 64, w.len);
    expect_error(&w, want);
    expect_file_error(&w, want);
    free(w.p);

    /* an offset so large that data offset + offset overflows */
    const struct tspec huge[] = {{"w", 1, {8}, 0, UINT64_MAX - 31}};
    memset(&w, 0, sizeof(w));
    build_tensor_file(&w, 3, 0, huge, 1, 32, NULL);
    expect_error(&w, "tensor 'w' extends past end of file (offset ");
    free(w.p);

    /* a name from the file is escaped before it is printed */
    const struct tspec esc[] = {{"evil\x1b[2J\n'", 1, {8}, 0, 4096}};
    memset(&w, 0, sizeof(w));
    build_tensor_file(&w, 3, 0, esc, 1, 32, NULL);
    expect_error(&w, "tensor 'evil\\x1b[2J\\x0a\\x27' extends past end of file");
    assert_null(strchr(infer_last_error(), '\x1b'));
    free(w.p);
}

static void test_tensor_layout_rejected(void **state)
{
    (void)state;
    static const struct {
        struct tspec t[2];
        int n;
        const char *msg;
    } cases[] = {
        {{{"w", 1, {8}, 0, 4}}, 1, "tensor 'w': offset 4 is not a multiple of the alignment 32"},
        {{{"w", 1, {16}, 0, 0}, {"v", 1, {16}, 0, 32}}, 2,
         "tensors 'w' and 'v' overlap (offsets 0+64 and 32)"},
        {{{"w", 1, {8}, 0, 32}, {"v", 1, {16}, 0, 0}}, 2,
         "tensors 'v' and 'w' overlap"}, /* found whatever the order of the infos */
        {{{"w", 0, {0}, 0, 0}}, 1, "tensor 'w' has 0 dimensions (1..4 allowed)"},
        {{{"w", 5, {1, 1, 1, 1, 1}, 0, 0}}, 1, "tensor 'w' has 5 dimensions"},
        {{{"w", 2, {1ull << 32, 1ull << 32}, 0, 0}}, 1, "tensor 'w': element count overflows"},
        {{{"w", 1, {1ull << 63}, 0, 0}}, 1, "tensor 'w': element count overflows"},
        {{{"w", 4, {1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16}, 0, 0}}, 1,
         "element count overflows"},
        /* element count fits int64, byte size does not (2^61 F64 = 2^64 bytes) */
        {{{"w", 1, {1ull << 61}, 28 /* F64 */, 0}}, 1, "tensor 'w': byte size overflows"},
        {{{"w", 2, {1ull << 40, 1ull << 21}, 27 /* I64 */, 0}}, 1, "byte size overflows"},
        {{{"w", 1, {1ull << 62}, 0 /* F32 */, 0}}, 1, "byte size overflows"},
        /* large but not overflowing: past the end of the file */
        {{{"w", 1, {1ull << 40}, 0, 0}}, 1, "tensor 'w' extends past end of file"},
        {{{"w", 1, {100}, 12 /* Q4_K */, 0}}, 1, "not a multiple of the Q4_K block size 256"},
        {{{"w", 1, {8}, 0, 0}, {"w", 1, {8}, 0, 32}}, 2, "duplicate tensor name 'w'"},
        {{{"", 1, {8}, 0, 0}}, 1, "empty, overlong"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw w = {0};
        build_tensor_file(&w, 3, 0, cases[i].t, cases[i].n, 128, NULL);
        expect_error(&w, cases[i].msg);
        free(w.p);
    }
    /* a NUL inside a tensor name, and an overlong one */
    struct gw w = {0};
    gw_header(&w, 3, 1, 0);
    gw_strn(&w, "a\0b", 3);
    gw_u32(&w, 1), gw_u64(&w, 1), gw_u32(&w, 0), gw_u64(&w, 0);
    expect_error(&w, "NUL-containing name");
    free(w.p);
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 1, 0);
    char *name = malloc(5000);
    memset(name, 'n', 5000);
    gw_strn(&w, name, 5000);
    gw_u32(&w, 1), gw_u64(&w, 1), gw_u32(&w, 0), gw_u64(&w, 0);
    expect_error(&w, "overlong");
    free(name);
    free(w.p);
    /* data section starts past the end */
    memset(&w, 0, sizeof(w));
    build_tensor_file(&w, 3, 0, (struct tspec[]){{"w", 1, {0}, 0, 0}}, 1, 0, NULL);
    w.len -= 1; /* drop a padding byte: data would start past the end */
    expect_error(&w, "truncated before the tensor data");
    free(w.p);
}

static void test_absurd_counts(void **state)
{
    (void)state;
    struct gw w = {0};
    gw_header(&w, 3, 0, 1ull << 63);
    gw_kv_prim(&w, "k", INFER_GGUF_UINT8, 1);
    expect_error(&w, "metadata count 9223372036854775808 cannot fit");
    free(w.p);

    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, UINT64_MAX, 0);
    gw_tensor(&w, &(struct tspec){"w", 1, {8}, 0, 0});
    expect_error(&w, "tensor count 18446744073709551615 cannot fit");
    free(w.p);

    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 1ull << 40, 0);
    expect_error(&w, "tensor count");
    free(w.p);

    /* arrays: counts whose byte size overflows, or merely exceeds the file */
    static const struct { uint32_t et; uint64_t n; const char *msg; } arrs[] = {
        {INFER_GGUF_UINT32, 1ull << 62, "key 'a': array of 4611686018427387904 u32 elements"},
        {INFER_GGUF_UINT64, UINT64_MAX, "extends past end of file"},
        {INFER_GGUF_UINT8, 1ull << 60, "extends past end of file"},
        {INFER_GGUF_UINT8, 9, "extends past end of file"}, /* one more than there is */
        {INFER_GGUF_STRING, 1ull << 62, "key 'a': array of 4611686018427387904 strings cannot fit"},
        {INFER_GGUF_STRING, 2, "cannot fit"},
        {INFER_GGUF_ARRAY, 1ull << 61, "arrays cannot fit"},
    };
    for (size_t i = 0; i < sizeof(arrs) / sizeof(arrs[0]); i++) {
        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 0, 1);
        gw_arr(&w, "a", arrs[i].et, arrs[i].n);
        gw_u64(&w, 0); /* 8 bytes of room */
        expect_error(&w, arrs[i].msg);
        free(w.p);
    }
}

static void test_bad_strings(void **state)
{
    (void)state;
    struct gw w = {0};
    /* a value string longer than the rest of the file */
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "s", INFER_GGUF_STRING);
    gw_u64(&w, 100);
    gw_raw(&w, "0123456789", 10);
    expect_error(&w, "s: string of 100 bytes at offset 45 extends past end of file (55 bytes)");
    free(w.p);

    static const uint64_t huge[] = {1ull << 62, UINT64_MAX, (1ull << 30) + 1};
    for (int i = 0; i < 3; i++) {
        /* as a value */
        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 0, 1);
        gw_key(&w, "s", INFER_GGUF_STRING);
        gw_u64(&w, huge[i]);
        gw_u64(&w, 0);
        expect_error(&w, "is absurd");
        free(w.p);
        /* as a key */
        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 0, 1);
        gw_u64(&w, huge[i]);
        gw_u64(&w, 0);
        gw_u64(&w, 0);
        expect_error(&w, "metadata key: string length");
        free(w.p);
        /* inside a string array */
        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 0, 1);
        gw_arr(&w, "a", INFER_GGUF_STRING, 1);
        gw_u64(&w, huge[i]);
        gw_u64(&w, 0);
        expect_error(&w, "a: string length");
        free(w.p);
    }
    /* keys: empty, NUL inside, too long */
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 0, 1);
    gw_kv_prim(&w, "", INFER_GGUF_UINT8, 1);
    expect_error(&w, "metadata key 0 at offset 24 is empty");
    free(w.p);
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 0, 1);
    gw_strn(&w, "a\0b", 3);
    gw_u32(&w, INFER_GGUF_UINT8);
    gw_prim(&w, INFER_GGUF_UINT8, 1);
    expect_error(&w, "has a NUL byte");
    free(w.p);
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 0, 1);
    char *key = malloc(70000);
    memset(key, 'k', 70000);
    gw_strn(&w, key, 70000);
    gw_u32(&w, INFER_GGUF_UINT8);
    gw_prim(&w, INFER_GGUF_UINT8, 1);
    expect_error(&w, "longer than 65535 bytes");
    free(key);
    free(w.p);
}

static void test_bad_types(void **state)
{
    (void)state;
    static const uint32_t bad[] = {13, 255, 0xffffffffu};
    for (int i = 0; i < 3; i++) {
        char msg[64];
        struct gw w = {0};
        gw_header(&w, 3, 0, 1);
        gw_key(&w, "k", bad[i]);
        gw_u64(&w, 0);
        snprintf(msg, sizeof(msg), "key 'k': bad value type %u at offset 33", bad[i]);
        expect_error(&w, msg);
        free(w.p);

        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 0, 1);
        gw_arr(&w, "k", bad[i], 1);
        gw_u64(&w, 0);
        snprintf(msg, sizeof(msg), "key 'k': bad array element type %u", bad[i]);
        expect_error(&w, msg);
        free(w.p);

        /* inside a nested array */
        memset(&w, 0, sizeof(w));
        gw_header(&w, 3, 0, 1);
        gw_arr(&w, "k", INFER_GGUF_ARRAY, 1);
        gw_arr(&w, NULL, bad[i], 1);
        gw_u64(&w, 0);
        expect_error(&w, "bad array element type");
        free(w.p);
    }
}

/* An array nested `levels` deep (the outermost counts as one) around [7]. */
static void build_nested(struct gw *w, int levels)
{
    gw_header(w, 3, 0, 1);
    gw_key(w, "n", INFER_GGUF_ARRAY);
    for (int i = 0; i < levels - 1; i++)
        gw_arr(w, NULL, INFER_GGUF_ARRAY, 1);
    gw_arr(w, NULL, INFER_GGUF_INT32, 1);
    gw_prim(w, INFER_GGUF_INT32, 7);
}

static void test_nesting(void **state)
{
    (void)state;
    struct gw w = {0};
    build_nested(&w, GGUF_MAX_NESTING);
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    const struct gguf_value *v = gguf_get_arr(g, "n", INFER_GGUF_ARRAY);
    for (int i = 0; i < GGUF_MAX_NESTING - 1; i++) {
        assert_non_null(v);
        assert_int_equal(v->arr.n, 1);
        v = v->arr.type == INFER_GGUF_ARRAY ? &v->arr.vals[0] : NULL;
    }
    int64_t iv;
    assert_true(gguf_arr_int(v, 0, &iv) && iv == 7);
    infer_gguf_close(g);
    free(copy);
    free(w.p);

    memset(&w, 0, sizeof(w));
    build_nested(&w, GGUF_MAX_NESTING + 1);
    expect_error(&w, "key 'n': arrays nested deeper than 8");
    free(w.p);
    memset(&w, 0, sizeof(w));
    build_nested(&w, 1000);
    expect_error(&w, "nested deeper");
    free(w.p);

    /* many small nested arrays: storage grows as they are read */
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 0, 1);
    gw_arr(&w, "many", INFER_GGUF_ARRAY, 1000);
    for (int i = 0; i < 1000; i++) {
        gw_arr(&w, NULL, INFER_GGUF_UINT16, 1);
        gw_prim(&w, INFER_GGUF_UINT16, (uint64_t)i);
    }
    expect_ok(&w, &g, &copy);
    v = gguf_get_arr(g, "many", INFER_GGUF_ARRAY);
    assert_int_equal(v->arr.n, 1000);
    assert_true(gguf_arr_int(&v->arr.vals[999], 0, &iv) && iv == 999);
    infer_gguf_close(g);
    free(copy);
    /* the same, with a count one larger than what follows */
    w.p[24 + 8 + 4 + 4 + 4] = 0xe9; /* 1000 = 0x3e8 -> 0x3e9 */
    expect_error(&w, "file truncated: many needs 4 bytes");
    free(w.p);
}

static void test_magic_and_version(void **state)
{
    (void)state;
    struct gw w = {0};
    build_small(&w, 3);
    memcpy(w.p, "GGUX", 4);
    expect_error(&w, "not a GGUF file (bad magic)");
    memcpy(w.p, "GGML", 4);
    expect_error(&w, "bad magic");
    memcpy(w.p, "FUGG", 4);
    expect_error(&w, "bad magic");
    memcpy(w.p, "GGUF", 4);

    static const struct { uint32_t version; const char *msg; } versions[] = {
        {1, "GGUF version 1 is not supported"},
        {0, "unsupported GGUF version 0"},
        {4, "unsupported GGUF version 4"},
        {0xffffffffu, "unsupported GGUF version 4294967295"},
        {0x03000000u, "big-endian GGUF files are not supported"},
        {0x02000000u, "big-endian"},
    };
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        uint32_t v = versions[i].version;
        for (int b = 0; b < 4; b++)
            w.p[4 + b] = (uint8_t)(v >> (8 * b));
        expect_error(&w, versions[i].msg);
    }
    expect_file_error(&w, "big-endian");
    free(w.p);

    /* short files */
    static const char *shorts[] = {"", "G", "GGU", "GGUF", "GGUF\x03\0\0"};
    for (int i = 0; i < 5; i++) {
        struct gw s = {.p = (uint8_t *)shorts[i], .len = strlen(shorts[i]) + (i == 4 ? 1 : 0)};
        expect_error(&s, i < 3 ? "bad magic" : "file truncated: version needs 4 bytes");
    }
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    struct gw w = {0};
    gw_header(&w, 3, 0, 4);
    gw_kv_prim(&w, "b", INFER_GGUF_UINT8, 1);
    gw_kv_str(&w, "a", "x");
    gw_kv_prim(&w, "c", INFER_GGUF_UINT8, 1);
    gw_kv_prim(&w, "a", INFER_GGUF_UINT32, 2); /* same key, other type */
    expect_error(&w, "duplicate metadata key 'a'");
    free(w.p);

    /* many distinct keys are fine */
    memset(&w, 0, sizeof(w));
    gw_header(&w, 3, 0, 2000);
    for (int i = 0; i < 2000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k.%d", (i * 7919) % 2000);
        gw_kv_prim(&w, key, INFER_GGUF_UINT16, (uint64_t)i);
    }
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    assert_int_equal(infer_gguf_get_int(g, "k.7919", -1), -1); /* 7919 % 2000 = 1919 */
    assert_int_equal(infer_gguf_get_int(g, "k.1919", -1), 1);
    infer_gguf_close(g);
    free(copy);
    free(w.p);
}

static void test_open_errors(void **state)
{
    (void)state;
    infer_gguf *g = (infer_gguf *)1;
    assert_int_equal(infer_gguf_open(&g, "/nonexistent/x.gguf", 0), INFER_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(infer_last_error(), "/nonexistent/x.gguf"));

    g = (infer_gguf *)1;
    assert_int_equal(infer_gguf_open(&g, tmpdir, 0), INFER_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(infer_last_error(), "is not a regular file"));

    const char *path = write_tmp("empty.gguf", "", 0);
    g = (infer_gguf *)1;
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_ERR_FORMAT);
    assert_null(g);
    assert_non_null(strstr(infer_last_error(), "is empty"));
    unlink(path);
}

/* ------------------------------------------------------------ residency */

static void test_file_residency(void **state)
{
    (void)state;
    /* a 256 KiB tensor so that the file spans many pages */
    const struct tspec ts[] = {{"big", 1, {65536}, 0, 0}};
    struct gw w = {0};
    build_tensor_file(&w, 3, 0, ts, 1, 65536 * 4, NULL);
    const char *path = write_tmp("resident.gguf", w.p, w.len);

    infer_residency r;
    assert_int_equal(infer_file_residency(path, &r), INFER_OK);
    assert_int_equal(r.bytes_total, w.len);
    assert_true(r.bytes_resident <= r.bytes_total);

    /* after a warm-up through the parser's map, the path-only view agrees */
    infer_gguf *g;
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
    uint64_t touched = 0;
    assert_int_equal(infer_gguf_warm(g, 1, &touched, NULL), INFER_OK);
    assert_int_equal(touched, w.len);
    infer_residency warm;
    assert_int_equal(infer_gguf_residency(g, &warm), INFER_OK);
    assert_int_equal(warm.bytes_total, w.len);
    infer_gguf_close(g);
    assert_int_equal(infer_file_residency(path, &r), INFER_OK);
    assert_int_equal(r.bytes_total, w.len);
    assert_int_equal(r.bytes_resident, w.len);
    assert_true(r.percent == 100.0);

    /* dropped pages: never more resident than before, and asking does not
     * bring anything back (a second look sees no more than the first) */
    assert_int_equal(infer_file_cold(path), INFER_OK);
    infer_residency after, again;
    assert_int_equal(infer_file_residency(path, &after), INFER_OK);
    assert_int_equal(after.bytes_total, w.len);
    assert_true(after.bytes_resident <= r.bytes_resident);
    assert_int_equal(infer_file_residency(path, &again), INFER_OK);
    assert_true(again.bytes_resident <= after.bytes_resident);
    /* where the filesystem drops pages at all (not tmpfs), a clean unmapped
     * file goes entirely, and looking did not read its header back in */
    if (after.bytes_resident < w.len)
        assert_int_equal(again.bytes_resident, 0);
    unlink(path);
    free(w.p);

    /* not a GGUF file: no parse, so still a figure */
    path = write_tmp("garbage.bin", "not a model at all", 18);
    assert_int_equal(infer_file_residency(path, &r), INFER_OK);
    assert_int_equal(r.bytes_total, 18);
    unlink(path);
    path = write_tmp("empty.bin", "", 0);
    assert_int_equal(infer_file_residency(path, &r), INFER_OK);
    assert_int_equal(r.bytes_total, 0);
    unlink(path);

    r.bytes_total = 5;
    assert_int_equal(infer_file_residency("/nonexistent/x.gguf", &r), INFER_ERR_IO);
    assert_int_equal(r.bytes_total, 0);
    assert_non_null(strstr(infer_last_error(), "/nonexistent/x.gguf"));
    assert_int_equal(infer_file_residency(tmpdir, &r), INFER_ERR_IO);
}

/* The VmFlags line of the /proc/self/smaps entry of the mapping that starts
 * at p, into buf; false when there is none. */
static bool map_vmflags(const void *p, char *buf, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return false;
    char line[512];
    bool in = false, found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)lo == (uintptr_t)p;
        else if (in && !strncmp(line, "VmFlags:", 8)) {
            size_t k = strlen(line + 8) < n ? strlen(line + 8) : n - 1;
            memcpy(buf, line + 8, k);
            buf[k] = '\0';
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* Whether a PROT_NONE mapping (a leftover address reservation) starts at p. */
static bool reservation_at(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    unsigned long long lo, hi;
    char perms[8];
    while (!found && fgets(line, sizeof(line), f))
        if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) == 3 && (uintptr_t)lo == (uintptr_t)p)
            found = !strcmp(perms, "---p");
    fclose(f);
    return found;
}

static void test_huge_page_map(void **state)
{
    (void)state;
    /* a 5 MiB tensor: the file spans two whole 2 MiB pages and a tail */
    const int64_t n = (int64_t)5 << 18;
    const struct tspec ts[] = {{"big", 1, {n}, 0, 0}};
    struct gw w = {0};
    build_tensor_file(&w, 3, 0, ts, 1, (uint64_t)n * 4, NULL);
    const char *path = write_tmp("huge.gguf", w.p, w.len);
    struct stat sb;
    if (stat("/proc/self/smaps", &sb) != 0) {
        unlink(path);
        free(w.p);
        skip(); /* no /proc: nothing to look at */
    }

    /* default: 2 MiB-aligned, advised huge ("hg"), every byte the file's */
    infer_gguf *g;
    char flags[256];
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
    const uint8_t *base = g->base;
    assert_int_equal((uintptr_t)base % ((uintptr_t)2 << 20), 0);
    assert_true(map_vmflags(base, flags, sizeof(flags)));
    assert_non_null(strstr(flags, " hg"));
    assert_memory_equal(base, w.p, w.len);
    /* the 2 MiB of address space reserved to align the map were given back,
     * past its last page too (the file is not a whole number of pages) */
    assert_true(w.len % 4096 != 0);
    assert_false(reservation_at(base + (w.len + 4095) / 4096 * 4096));
    infer_residency r;
    assert_int_equal(infer_gguf_warm(g, 1, NULL, NULL), INFER_OK);
    assert_int_equal(infer_gguf_residency(g, &r), INFER_OK);
    /* whole 2 MiB pages only, and never the partial last one */
    assert_int_equal(r.bytes_huge % ((uint64_t)2 << 20), 0);
    assert_true(r.bytes_huge <= (uint64_t)4 << 20);
    infer_gguf_close(g);

    /* the probe reads nothing from the file: of a 40 MiB file dropped from
     * the cache, only what the parse's readahead brought in is resident
     * after it */
    {
        const int64_t nb = (int64_t)10 << 20;
        const struct tspec tb[] = {{"big", 1, {nb}, 0, 0}};
        struct gw wb = {0};
        build_tensor_file(&wb, 3, 0, tb, 1, (uint64_t)nb * 4, NULL);
        const char *pb = write_tmp("probe.gguf", wb.p, wb.len);
        assert_int_equal(infer_file_cold(pb), INFER_OK);
        infer_residency cold;
        assert_int_equal(infer_file_residency(pb, &cold), INFER_OK);
        if (cold.bytes_resident == 0) { /* the file system drops pages (not tmpfs) */
            assert_int_equal(infer_gguf_open(&g, pb, 0), INFER_OK);
            infer_residency before;
            assert_int_equal(infer_gguf_residency(g, &before), INFER_OK);
            assert_int_equal(infer_gguf_probe_pages(g, &r), INFER_OK);
            print_message("  probe: %llu of %zu bytes resident after the parse\n",
                          (unsigned long long)before.bytes_resident, wb.len);
            assert_int_equal(r.bytes_resident, before.bytes_resident);
            assert_true(r.bytes_resident < wb.len / 2);
            infer_gguf_close(g);
        }
        unlink(pb);
        free(wb.p);
    }

    /* when the load-time note is due: big, resident, not in 2 MiB pages */
    const uint64_t MiB = 1 << 20;
    assert_true(infer_residency_small_pages(&(infer_residency){.bytes_total = 100 * MiB, .bytes_resident = 100 * MiB}));
    assert_false(infer_residency_small_pages(
        &(infer_residency){.bytes_total = 100 * MiB, .bytes_resident = 100 * MiB, .bytes_huge = 50 * MiB}));
    assert_false(infer_residency_small_pages(&(infer_residency){.bytes_total = 100 * MiB, .bytes_resident = 10 * MiB}));
    assert_false(infer_residency_small_pages(&(infer_residency){.bytes_total = 10 * MiB, .bytes_resident = 10 * MiB}));
    char note[512];
    assert_non_null(strstr(infer_small_pages_note("m.gguf", note, sizeof(note)), "infer warm --huge m.gguf"));

    /* small pages asked for, by flag or environment: no advice */
    assert_int_equal(infer_gguf_open(&g, path, INFER_GGUF_OPEN_SMALL_PAGES), INFER_OK);
    assert_true(map_vmflags(g->base, flags, sizeof(flags)));
    assert_null(strstr(flags, " hg"));
    assert_int_equal(infer_gguf_residency(g, &r), INFER_OK);
    assert_int_equal(r.bytes_huge, 0);
    infer_gguf_close(g);
    setenv("INFER_NO_HUGE_WEIGHTS", "1", 1);
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
    unsetenv("INFER_NO_HUGE_WEIGHTS");
    assert_true(map_vmflags(g->base, flags, sizeof(flags)));
    assert_null(strstr(flags, " hg"));
    infer_gguf_close(g);
    unlink(path);
    free(w.p);
}

/* Warming a whole file (infer warm: the repacked copy decode reads) goes
 * through a MADV_HUGEPAGE map, so a dropped file comes back in 2 MiB folios
 * wherever a model map's own faults would bring them: pread, which the
 * warming of ranges uses, brings 4 KiB folios, which every later map can only
 * map with 4 KiB pages. */
static void test_warm_huge(void **state)
{
    (void)state;
    const int64_t n = (int64_t)3 << 20; /* 12 MiB of tensor data */
    const struct tspec ts[] = {{"big", 1, {n}, 0, 0}};
    struct gw w = {0};
    build_tensor_file(&w, 3, 0, ts, 1, (uint64_t)n * 4, NULL);
    const char *path = write_tmp("warmhuge.gguf", w.p, w.len);
    struct stat sb;
    infer_residency cold, r;
    assert_int_equal(infer_file_cold(path), INFER_OK);
    assert_int_equal(infer_file_residency(path, &cold), INFER_OK);
    if (stat("/proc/self/smaps", &sb) != 0 || cold.bytes_resident != 0) { /* no /proc, or pages not dropped */
        unlink(path);
        free(w.p);
        skip();
    }
    /* what the kernel does for a map: the model's own warm through its map */
    infer_gguf *g;
    infer_residency ctl;
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
    assert_int_equal(infer_gguf_warm(g, 1, NULL, NULL), INFER_OK);
    assert_int_equal(infer_gguf_residency(g, &ctl), INFER_OK);
    infer_gguf_close(g);

    assert_int_equal(infer_file_cold(path), INFER_OK);
    assert_int_equal(file_warm_huge(path, &r), INFER_OK);
    assert_int_equal(r.bytes_total, w.len);
    assert_int_equal(r.bytes_resident, w.len);
    assert_int_equal(r.bytes_huge % ((uint64_t)2 << 20), 0);
    assert_true(r.bytes_huge <= w.len);
    print_message("  warm through the map: %llu of %zu bytes in 2 MiB pages (the model's map: %llu)\n",
                  (unsigned long long)r.bytes_huge, w.len, (unsigned long long)ctl.bytes_huge);
    if (ctl.bytes_huge > 0) /* 2 MiB folios on this kernel and file system: the warm brings them too */
        assert_true(r.bytes_huge >= ctl.bytes_huge);

    /* pread brings small folios, which stay: a warm through the map then
     * finds them resident and maps them with 4 KiB pages */
    assert_int_equal(infer_file_cold(path), INFER_OK);
    assert_int_equal(file_warm_range(path, w.len, 0, w.len), INFER_OK);
    assert_int_equal(file_warm_huge(path, &r), INFER_OK);
    assert_int_equal(r.bytes_resident, w.len);
    if (ctl.bytes_huge > 0)
        assert_true(r.bytes_huge < ctl.bytes_huge);
    assert_int_equal(file_warm_huge(test_path(tmpdir, "no-such-file"), &r), INFER_ERR_IO);
    unlink(path);
    free(w.p);
}

static void test_memory_residency(void **state)
{
    (void)state;
    struct gw w = {0};
    build_small(&w, 3);
    infer_gguf *g;
    uint8_t *copy;
    expect_ok(&w, &g, &copy);
    infer_residency r;
    assert_int_equal(infer_gguf_residency(g, &r), INFER_OK);
    assert_int_equal(r.bytes_total, w.len);
    assert_int_equal(r.bytes_resident, w.len); /* memory images are resident */
    assert_int_equal(infer_gguf_range_residency(g, 0, 0, &r), INFER_OK);
    assert_int_equal(r.bytes_total, 0);
    assert_int_equal(infer_gguf_range_residency(g, UINT64_MAX, 2, &r), INFER_ERR_INVALID);
    infer_gguf_close(g);
    free(copy);
    free(w.p);
}

/* ------------------------------------------------------------ real files */

static void test_fixture_vocab(void **state)
{
    (void)state;
    infer_gguf *g;
    char p[8192];
    snprintf(p, sizeof(p), "%s/fixtures/tokenizer/ggml-vocab-llama-spm.gguf", test_shared());
    assert_int_equal(infer_gguf_open(&g, p, 0), INFER_OK);
    assert_string_equal(infer_gguf_get_str(g, "tokenizer.ggml.model", ""), "llama");
    int64_t k = infer_gguf_find_key(g, "tokenizer.ggml.tokens");
    assert_true(k >= 0);
    assert_int_equal(infer_gguf_kv_arr_n(g, k), 32000);
    const struct gguf_value *toks = gguf_get_arr(g, "tokenizer.ggml.tokens", INFER_GGUF_STRING);
    assert_non_null(toks);
    assert_int_equal(toks->arr.strs[1].len, 3);
    assert_memory_equal(toks->arr.strs[1].s, "<s>", 3);
    infer_residency r;
    assert_int_equal(infer_gguf_residency(g, &r), INFER_OK);
    assert_int_equal(r.bytes_total, infer_gguf_file_size(g));
    infer_gguf_close(g);
}

/* The seed corpus of the fuzzer holds valid files only. */
static void test_seed_corpus(void **state)
{
    (void)state;
    static const char *seeds[] = {"all-types-v3.gguf", "tensors-v2.gguf", "align64-v3.gguf",
                                  "nested-v3.gguf", "unknown-type-v3.gguf"};
    for (int i = 0; i < 5; i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "tests/corpus/gguf/%s", seeds[i]);
        infer_gguf *g;
        const char *p = test_path(test_srcdir(), rel);
        if (infer_gguf_open(&g, p, 0) != INFER_OK)
            print_error("%s\n", infer_last_error());
        assert_non_null(g);
        infer_gguf_close(g);
    }
}

static void test_default_model_opens(void **state)
{
    (void)state;
    const char *p = test_default_model();
    if (!p)
        skip();
    infer_gguf *g;
    assert_int_equal(infer_gguf_open(&g, p, 0), INFER_OK);
    assert_string_equal(infer_gguf_get_str(g, "general.architecture", ""), "gemma3");
    assert_true(infer_gguf_n_tensors(g) > 0);
    for (int64_t i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info ti;
        assert_int_equal(infer_gguf_tensor(g, i, &ti), INFER_OK);
        assert_non_null(ti.data);
        assert_true(ti.offset + ti.nbytes <= infer_gguf_file_size(g));
    }
    infer_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_value_types),
        cmocka_unit_test(test_kv_format_strings),
        cmocka_unit_test(test_tensor_placement),
        cmocka_unit_test(test_custom_alignment),
        cmocka_unit_test(test_alignment_rejected),
        cmocka_unit_test(test_unknown_tensor_type),
        cmocka_unit_test(test_no_tensors),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_past_eof_message),
        cmocka_unit_test(test_tensor_layout_rejected),
        cmocka_unit_test(test_absurd_counts),
        cmocka_unit_test(test_bad_strings),
        cmocka_unit_test(test_bad_types),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_magic_and_version),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_file_residency),
        cmocka_unit_test(test_huge_page_map),
        cmocka_unit_test(test_warm_huge),
        cmocka_unit_test(test_memory_residency),
        cmocka_unit_test(test_fixture_vocab),
        cmocka_unit_test(test_seed_corpus),
        cmocka_unit_test(test_default_model_opens),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
