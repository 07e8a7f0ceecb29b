/*
 * gguf.c - GGUF v2/v3 parser over a read-only memory map.
 *
 * Layout (ggml docs/gguf.md): magic "GGUF", u32 version, u64 tensor count,
 * u64 metadata count, the metadata key/values, the tensor infos, padding to
 * general.alignment, then the tensor data.  All integers are little-endian.
 *
 * Every byte is treated as hostile: each read is bounds-checked against the
 * buffer, every count is bounded by the bytes that remain before anything is
 * allocated for it, and all size arithmetic is overflow-checked.  Tensors are
 * checked to lie inside the file, aligned and non-overlapping; duplicate keys
 * and tensor names are found by sorting, so a hostile file with millions of
 * entries costs O(n log n), not O(n^2).  A failure leaves a message naming the
 * offending key, tensor or offset; names from the file are escaped and cut
 * before they are printed, so a hostile name cannot drive the terminal.
 */
#include "gguf.h"

#include "../../kernels/types.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_STRING (1ull << 30)
#define GGUF_MAX_KEY 65535  /* real keys are tens of bytes */
#define GGUF_MAX_NAME 4096  /* tensor names; ggml's own limit is 64 */

/* A printable, bounded copy of a name read from the file, for messages:
 * bytes outside printable ASCII (and the quote) become \xNN, long names are
 * cut with "...".  Returns buf. */

/* Traits of a type id read from a file: only GGUF's own ids (infer's
 * repacked layouts have ids past GGML_TYPE_COUNT and never come from a file). */
static const struct ggml_type_traits *file_type_traits(uint32_t type)
{
    return type < GGML_TYPE_COUNT ? ggml_type_traits_get(type) : NULL;
}

static const char *msg_name(const char *s, char buf[96])
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *s && o + 4 < 92; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
    }
    if (*s) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* ------------------------------------------------------------ reader */

struct reader {
    const uint8_t *p;
    uint64_t size;
    uint64_t pos;
};

static infer_status rd_truncated(const struct reader *r, uint64_t need, const char *what)
{
    return infer_error(INFER_ERR_FORMAT,
                       "file truncated: %s needs %llu bytes at offset %llu, file is %llu bytes",
                       what, (unsigned long long)need, (unsigned long long)r->pos,
                       (unsigned long long)r->size);
}

static bool rd_has(const struct reader *r, uint64_t n)
{
    return r->size - r->pos >= n;
}

static infer_status rd_bytes(struct reader *r, void *out, uint64_t n, const char *what)
{
    if (!rd_has(r, n))
        return rd_truncated(r, n, what);
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return INFER_OK;
}

static infer_status rd_u32(struct reader *r, uint32_t *v, const char *what)
{
    return rd_bytes(r, v, 4, what);
}

static infer_status rd_u64(struct reader *r, uint64_t *v, const char *what)
{
    return rd_bytes(r, v, 8, what);
}

static infer_status rd_str(struct reader *r, struct gguf_str *s, const char *what)
{
    uint64_t len = 0;
    infer_status st = rd_u64(r, &len, what);
    if (st)
        return st;
    if (len > GGUF_MAX_STRING)
        return infer_error(INFER_ERR_FORMAT, "%s: string length %llu at offset %llu is absurd",
                           what, (unsigned long long)len, (unsigned long long)(r->pos - 8));
    if (!rd_has(r, len))
        return infer_error(INFER_ERR_FORMAT,
                           "%s: string of %llu bytes at offset %llu extends past end of file (%llu bytes)",
                           what, (unsigned long long)len, (unsigned long long)r->pos,
                           (unsigned long long)r->size);
    s->s = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += len;
    return INFER_OK;
}

static char *str_dup(const struct gguf_str *s)
{
    char *c = malloc(s->len + 1);
    if (c) {
        memcpy(c, s->s, s->len);
        c[s->len] = '\0';
    }
    return c;
}

/* ------------------------------------------------------------ types */

size_t gguf_type_size(uint32_t type)
{
    switch (type) {
    case INFER_GGUF_UINT8: case INFER_GGUF_INT8: case INFER_GGUF_BOOL: return 1;
    case INFER_GGUF_UINT16: case INFER_GGUF_INT16: return 2;
    case INFER_GGUF_UINT32: case INFER_GGUF_INT32: case INFER_GGUF_FLOAT32: return 4;
    case INFER_GGUF_UINT64: case INFER_GGUF_INT64: case INFER_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(uint32_t type)
{
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "str", "arr", "u64", "i64", "f64"};
    return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

/* Decode one primitive element at p (unaligned) into the value union. */
static void decode_prim(uint32_t type, const uint8_t *p, struct gguf_value *v)
{
    v->type = type;
    switch (type) {
    case INFER_GGUF_UINT8: v->u64 = p[0]; break;
    case INFER_GGUF_INT8: v->i64 = (int8_t)p[0]; break;
    case INFER_GGUF_BOOL: v->b = p[0] != 0; break;
    case INFER_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); v->u64 = x; break; }
    case INFER_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); v->i64 = x; break; }
    case INFER_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); v->u64 = x; break; }
    case INFER_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); v->i64 = x; break; }
    case INFER_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v->f64 = x; break; }
    case INFER_GGUF_UINT64: { uint64_t x; memcpy(&x, p, 8); v->u64 = x; break; }
    case INFER_GGUF_INT64: { int64_t x; memcpy(&x, p, 8); v->i64 = x; break; }
    case INFER_GGUF_FLOAT64: { double x; memcpy(&x, p, 8); v->f64 = x; break; }
    }
}

static bool value_int(const struct gguf_value *v, int64_t *out)
{
    switch (v->type) {
    case INFER_GGUF_UINT8: case INFER_GGUF_UINT16: case INFER_GGUF_UINT32:
        *out = (int64_t)v->u64;
        return true;
    case INFER_GGUF_UINT64:
        if (v->u64 > INT64_MAX)
            return false;
        *out = (int64_t)v->u64;
        return true;
    case INFER_GGUF_INT8: case INFER_GGUF_INT16: case INFER_GGUF_INT32: case INFER_GGUF_INT64:
        *out = v->i64;
        return true;
    case INFER_GGUF_BOOL:
        *out = v->b;
        return true;
    default:
        return false;
    }
}

static bool value_float(const struct gguf_value *v, double *out)
{
    if (v->type == INFER_GGUF_FLOAT32 || v->type == INFER_GGUF_FLOAT64) {
        *out = v->f64;
        return true;
    }
    int64_t i;
    if (value_int(v, &i)) {
        *out = (double)i;
        return true;
    }
    return false;
}

/* ------------------------------------------------------------ values */

static void value_free(struct gguf_value *v)
{
    if (v->type != INFER_GGUF_ARRAY)
        return;
    free(v->arr.strs);
    if (v->arr.vals) {
        for (uint64_t i = 0; i < v->arr.n; i++)
            value_free(&v->arr.vals[i]);
        free(v->arr.vals);
    }
}

static infer_status read_value(struct reader *r, uint32_t type, struct gguf_value *v,
                               const char *key, int depth);

/* Read an array value (element type, count, elements) into v.  `key` is the
 * escaped key name for messages.  On error v holds only what was read, so
 * value_free(v) releases it. */
static infer_status read_array(struct reader *r, struct gguf_value *v, const char *key, int depth)
{
    uint32_t et;
    uint64_t n;
    infer_status st;
    v->type = INFER_GGUF_ARRAY;
    if ((st = rd_u32(r, &et, key)) || (st = rd_u64(r, &n, key)))
        return st;
    if (depth >= GGUF_MAX_NESTING)
        return infer_error(INFER_ERR_FORMAT, "key '%s': arrays nested deeper than %d", key,
                           GGUF_MAX_NESTING);
    v->arr.type = et;
    v->arr.n = 0;
    uint64_t remain = r->size - r->pos;
    size_t es = gguf_type_size(et);
    if (es) {
        uint64_t bytes;
        if (!ck_mul(n, es, &bytes) || bytes > remain)
            return infer_error(INFER_ERR_FORMAT,
                               "key '%s': array of %llu %s elements at offset %llu extends past end of file (%llu bytes)",
                               key, (unsigned long long)n, gguf_type_name(et),
                               (unsigned long long)r->pos, (unsigned long long)r->size);
        v->arr.raw = r->p + r->pos;
        v->arr.n = n;
        r->pos += bytes;
        return INFER_OK;
    }
    if (et == INFER_GGUF_STRING) {
        if (n > remain / 8) /* each string needs at least its 8-byte length */
            return infer_error(INFER_ERR_FORMAT,
                               "key '%s': array of %llu strings cannot fit in the %llu bytes left",
                               key, (unsigned long long)n, (unsigned long long)remain);
        v->arr.strs = malloc((n ? n : 1) * sizeof(struct gguf_str));
        if (!v->arr.strs)
            return infer_error(INFER_ERR_NOMEM, "key '%s': out of memory", key);
        for (uint64_t i = 0; i < n; i++) {
            if ((st = rd_str(r, &v->arr.strs[i], key)))
                return st;
        }
        v->arr.n = n;
        return INFER_OK;
    }
    if (et == INFER_GGUF_ARRAY) {
        if (n > remain / 12) /* each nested array needs its type and count */
            return infer_error(INFER_ERR_FORMAT,
                               "key '%s': array of %llu arrays cannot fit in the %llu bytes left",
                               key, (unsigned long long)n, (unsigned long long)remain);
        /* Grow as elements are read: a count that merely fits the bytes left
         * must not reserve memory at every nesting level before anything is
         * read (memory stays proportional to the bytes actually parsed). */
        uint64_t cap = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (i == cap) {
                uint64_t ncap = cap ? 2 * cap : 8;
                if (ncap > n)
                    ncap = n;
                struct gguf_value *nv = realloc(v->arr.vals, ncap * sizeof(*nv));
                if (!nv)
                    return infer_error(INFER_ERR_NOMEM, "key '%s': out of memory", key);
                memset(nv + cap, 0, (ncap - cap) * sizeof(*nv));
                v->arr.vals = nv;
                cap = ncap;
            }
            v->arr.n = i + 1; /* so value_free sees what was read */
            if ((st = read_array(r, &v->arr.vals[i], key, depth + 1)))
                return st;
        }
        v->arr.n = n;
        return INFER_OK;
    }
    return infer_error(INFER_ERR_FORMAT, "key '%s': bad array element type %u at offset %llu", key,
                       et, (unsigned long long)(r->pos - 12));
}

static infer_status read_value(struct reader *r, uint32_t type, struct gguf_value *v,
                               const char *key, int depth)
{
    size_t es = gguf_type_size(type);
    if (es) {
        if (!rd_has(r, es))
            return rd_truncated(r, es, key);
        decode_prim(type, r->p + r->pos, v);
        r->pos += es;
        return INFER_OK;
    }
    if (type == INFER_GGUF_STRING) {
        v->type = type;
        return rd_str(r, &v->str, key);
    }
    if (type == INFER_GGUF_ARRAY)
        return read_array(r, v, key, depth);
    return infer_error(INFER_ERR_FORMAT, "key '%s': bad value type %u at offset %llu", key, type,
                       (unsigned long long)(r->pos - 4));
}

/* ------------------------------------------------------------ parse */

static void gguf_free_contents(infer_gguf *g)
{
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].cstr);
        value_free(&g->kv[i].v);
    }
    free(g->kv);
    for (int64_t i = 0; i < g->n_tensors; i++)
        free(g->tensors[i].name);
    free(g->tensors);
    g->kv = NULL;
    g->tensors = NULL;
    g->n_kv = g->n_tensors = 0;
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Find a name that occurs twice among n names (sorted copy of the pointers).
 * Returns INFER_OK when all differ, else an error "duplicate <what> 'name'". */
static infer_status check_unique(const char **names, size_t n, const char *what)
{
    if (n < 2)
        return INFER_OK;
    qsort(names, n, sizeof(*names), cmp_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) {
            char nb[96];
            return infer_error(INFER_ERR_FORMAT, "duplicate %s '%s'", what, msg_name(names[i], nb));
        }
    return INFER_OK;
}

static infer_status parse_kvs(infer_gguf *g, struct reader *r, uint64_t n_kv)
{
    infer_status st;
    /* each kv needs at least key length (8) + type (4) + 1 byte of value */
    if (n_kv > (r->size - r->pos) / 13)
        return infer_error(INFER_ERR_FORMAT, "metadata count %llu cannot fit in a %llu-byte file",
                           (unsigned long long)n_kv, (unsigned long long)r->size);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof(*g->kv));
    if (!g->kv)
        return infer_error(INFER_ERR_NOMEM, "out of memory for %llu metadata entries",
                           (unsigned long long)n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        struct gguf_kv *kv = &g->kv[i];
        struct gguf_str key;
        uint32_t type;
        char kname[96];
        g->n_kv = (int64_t)i + 1;
        if ((st = rd_str(r, &key, "metadata key")))
            return st;
        if (key.len == 0 || key.len > GGUF_MAX_KEY || memchr(key.s, '\0', key.len))
            return infer_error(INFER_ERR_FORMAT,
                               "metadata key %llu at offset %llu is empty, longer than %d bytes or has a NUL byte",
                               (unsigned long long)i, (unsigned long long)(r->pos - key.len - 8),
                               GGUF_MAX_KEY);
        if (!(kv->key = str_dup(&key)))
            return infer_error(INFER_ERR_NOMEM, "out of memory");
        msg_name(kv->key, kname);
        if ((st = rd_u32(r, &type, kname)))
            return st;
        if ((st = read_value(r, type, &kv->v, kname, 0)))
            return st;
        if (kv->v.type == INFER_GGUF_STRING && !(kv->cstr = str_dup(&kv->v.str)))
            return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    const char **names = malloc((n_kv ? n_kv : 1) * sizeof(*names));
    if (!names)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n_kv; i++)
        names[i] = g->kv[i].key;
    st = check_unique(names, n_kv, "metadata key");
    free(names);
    return st;
}

/* Bytes of a tensor of a known type, overflow-checked.  ne[0] must be a
 * multiple of the block size. */
static infer_status tensor_nbytes(const struct gguf_tensor *t, const struct ggml_type_traits *tt,
                                  const char *tname, uint64_t *out)
{
    if (t->ne[0] % tt->block_size != 0)
        return infer_error(INFER_ERR_FORMAT,
                           "tensor '%s': row of %lld elements is not a multiple of the %s block size %u",
                           tname, (long long)t->ne[0], tt->name, tt->block_size);
    uint64_t nb;
    bool ok = ck_mul((uint64_t)t->ne[0] / tt->block_size, tt->type_size, &nb);
    for (int d = 1; ok && d < GGUF_MAX_DIMS; d++)
        ok = ck_mul(nb, (uint64_t)t->ne[d], &nb);
    if (!ok)
        return infer_error(INFER_ERR_FORMAT, "tensor '%s': byte size overflows", tname);
    *out = nb;
    return INFER_OK;
}

static infer_status parse_tensor_infos(infer_gguf *g, struct reader *r, uint64_t n_tensors)
{
    infer_status st;
    /* each info needs name length (8) + n_dims (4) + type (4) + offset (8) */
    if (n_tensors > (r->size - r->pos) / 24)
        return infer_error(INFER_ERR_FORMAT, "tensor count %llu cannot fit in a %llu-byte file",
                           (unsigned long long)n_tensors, (unsigned long long)r->size);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof(*g->tensors));
    if (!g->tensors)
        return infer_error(INFER_ERR_NOMEM, "out of memory for %llu tensors", (unsigned long long)n_tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        struct gguf_str name;
        char tname[96];
        g->n_tensors = (int64_t)i + 1;
        if ((st = rd_str(r, &name, "tensor name")))
            return st;
        if (name.len == 0 || name.len > GGUF_MAX_NAME || memchr(name.s, '\0', name.len))
            return infer_error(INFER_ERR_FORMAT,
                               "tensor %llu at offset %llu has an empty, overlong (> %d bytes) or NUL-containing name",
                               (unsigned long long)i, (unsigned long long)(r->pos - name.len - 8),
                               GGUF_MAX_NAME);
        if (!(t->name = str_dup(&name)))
            return infer_error(INFER_ERR_NOMEM, "out of memory");
        msg_name(t->name, tname);
        if ((st = rd_u32(r, &t->n_dims, tname)))
            return st;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return infer_error(INFER_ERR_FORMAT, "tensor '%s' has %u dimensions (1..%d allowed)",
                               tname, t->n_dims, GGUF_MAX_DIMS);
        uint64_t nel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) {
            uint64_t ne = 1;
            if ((uint32_t)d < t->n_dims && (st = rd_u64(r, &ne, tname)))
                return st;
            if (ne > INT64_MAX || !ck_mul(nel, ne, &nel) || nel > INT64_MAX)
                return infer_error(INFER_ERR_FORMAT, "tensor '%s': element count overflows", tname);
            t->ne[d] = (int64_t)ne;
        }
        if ((st = rd_u32(r, &t->type, tname)) || (st = rd_u64(r, &t->offset, tname)))
            return st;
        const struct ggml_type_traits *tt = file_type_traits(t->type);
        if (tt && (st = tensor_nbytes(t, tt, tname, &t->nbytes)))
            return st;
    }
    const char **names = malloc((n_tensors ? n_tensors : 1) * sizeof(*names));
    if (!names)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n_tensors; i++)
        names[i] = g->tensors[i].name;
    st = check_unique(names, n_tensors, "tensor name");
    free(names);
    return st;
}

/* Place tensors in the data section: aligned, inside the file, no overlaps.
 * Tensors of unknown type are placed with size 0 (their data is NULL). */
static infer_status place_tensors(infer_gguf *g)
{
    infer_status st = INFER_OK;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        char tname[96];
        if (t->offset % g->alignment != 0)
            return infer_error(INFER_ERR_FORMAT, "tensor '%s': offset %llu is not a multiple of the alignment %llu",
                               msg_name(t->name, tname), (unsigned long long)t->offset,
                               (unsigned long long)g->alignment);
        if (!ck_add(g->data_offset, t->offset, &start) || !ck_add(start, t->nbytes, &end) || end > g->size) {
            /* the absolute offset itself may overflow: then say so */
            if (!ck_add(g->data_offset, t->offset, &start))
                return infer_error(INFER_ERR_FORMAT,
                                   "tensor '%s' extends past end of file (offset %llu+%llu, size %llu, file %llu)",
                                   msg_name(t->name, tname), (unsigned long long)g->data_offset,
                                   (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                                   (unsigned long long)g->size);
            return infer_error(INFER_ERR_FORMAT,
                               "tensor '%s' extends past end of file (offset %llu, size %llu, file %llu)",
                               msg_name(t->name, tname), (unsigned long long)start,
                               (unsigned long long)t->nbytes, (unsigned long long)g->size);
        }
        t->data = file_type_traits(t->type) ? g->base + start : NULL;
    }
    if (g->n_tensors < 2)
        return INFER_OK;
    struct gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof(*order));
    if (!order)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++)
        order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof(*order), cmp_tensor_offset);
    /* sorted by offset, every tensor must end before the next one starts;
     * a->offset + a->nbytes cannot overflow: it is inside the file */
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const struct gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->nbytes > b->offset) {
            char an[96], bn[96];
            st = infer_error(INFER_ERR_FORMAT, "tensors '%s' and '%s' overlap (offsets %llu+%llu and %llu)",
                             msg_name(a->name, an), msg_name(b->name, bn), (unsigned long long)a->offset,
                             (unsigned long long)a->nbytes, (unsigned long long)b->offset);
            break;
        }
    }
    free(order);
    return st;
}

static infer_status gguf_parse(infer_gguf *g)
{
    struct reader r = {g->base, g->size, 0};
    char magic[4];
    uint32_t version;
    uint64_t n_tensors, n_kv;
    infer_status st;

    if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0)
        return infer_error(INFER_ERR_FORMAT, "not a GGUF file (bad magic)");
    if ((st = rd_bytes(&r, magic, 4, "magic")) || (st = rd_u32(&r, &version, "version")))
        return st;
    if (version == 1)
        return infer_error(INFER_ERR_UNSUPPORTED, "GGUF version 1 is not supported (only 2 and 3)");
    if (version != 2 && version != 3) {
        if (version != 0 && (version & 0xffff) == 0) /* 2 or 3 read the wrong way round */
            return infer_error(INFER_ERR_UNSUPPORTED, "big-endian GGUF files are not supported");
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported GGUF version %u (only 2 and 3)", version);
    }
    g->version = version;
    if ((st = rd_u64(&r, &n_tensors, "tensor count")) || (st = rd_u64(&r, &n_kv, "metadata count")))
        return st;
    if ((st = parse_kvs(g, &r, n_kv)))
        return st;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *al = gguf_get_kv(g, "general.alignment");
    if (al) {
        int64_t a;
        char buf[64];
        if (al->v.type == INFER_GGUF_BOOL || !value_int(&al->v, &a) || a <= 0 || (a & (a - 1)) != 0 ||
            a > (1 << 20))
            return infer_error(INFER_ERR_FORMAT,
                               "general.alignment must be an integer power of two up to 2^20, not %s (%s)",
                               infer_gguf_kv_format(g, al - g->kv, buf, sizeof(buf)),
                               gguf_type_name(al->v.type));
        g->alignment = (uint64_t)a;
    }
    if ((st = parse_tensor_infos(g, &r, n_tensors)))
        return st;
    uint64_t pad = (g->alignment - r.pos % g->alignment) % g->alignment;
    g->data_offset = r.pos + pad;
    if (g->n_tensors > 0 && g->data_offset > g->size)
        return infer_error(INFER_ERR_FORMAT, "file truncated before the tensor data (data at %llu, file %llu)",
                           (unsigned long long)g->data_offset, (unsigned long long)g->size);
    return place_tensors(g);
}

/* ------------------------------------------------------------ open/close */

infer_status infer_gguf_open_memory(infer_gguf **out, const void *data, size_t size)
{
    *out = NULL;
    double t0 = infer_now();
    infer_gguf *g = calloc(1, sizeof(*g));
    if (!g)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    g->base = data;
    g->size = size;
    g->path = strdup("<memory>");
    infer_status st = g->path ? gguf_parse(g) : infer_error(INFER_ERR_NOMEM, "out of memory");
    if (st) {
        infer_gguf_close(g);
        return st;
    }
    g->load_seconds = infer_now() - t0;
    *out = g;
    return INFER_OK;
}

/* Map the file read-only.  Unless small pages are asked for, the map starts
 * on a 2 MiB boundary (so file offset k * 2 MiB falls on a huge-page boundary)
 * and is advised MADV_HUGEPAGE: where the page cache holds the file in 2 MiB
 * folios (file systems with large folios, on pages read in after the advice)
 * the kernel then maps each 2 MiB of weights with one TLB entry instead of
 * 512.  On this 2-core VM a streaming read of 4 KiB-mapped memory runs at
 * ~24 GB/s and of 2 MiB-mapped memory at ~31 GB/s, and decode is such a read.
 * The weights stay in the shared, reclaimable page cache either way (DESIGN.md
 * decision 3); *huge says whether the advice was taken. */
void *gguf_map_readonly(int fd, size_t size, bool want_huge, bool *huge)
{
    const size_t H = (size_t)2 << 20;
    *huge = false;
    if (!want_huge || size < H || size > SIZE_MAX - H)
        return mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    /* Reserve size + 2 MiB of address space, place the file map at the first
     * 2 MiB boundary inside it, give back the rest. */
    uint8_t *res = mmap(NULL, size + H, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED)
        return mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    uint8_t *at = (uint8_t *)(((uintptr_t)res + H - 1) & ~(uintptr_t)(H - 1));
    void *map = mmap(at, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (map == MAP_FAILED) {
        int err = errno;
        munmap(res, size + H);
        errno = err;
        return map;
    }
    if (at > res)
        munmap(res, (size_t)(at - res));
    /* the file map covers whole pages: give back what lies past its last one */
    const long ps = sysconf(_SC_PAGESIZE);
    const size_t pg = ps > 0 ? (size_t)ps : 4096;
    uint8_t *end = at + (size + pg - 1) / pg * pg;
    if (end < res + size + H)
        munmap(end, (size_t)(res + size + H - end));
    *huge = madvise(map, size, MADV_HUGEPAGE) == 0;
    return map;
}

infer_status infer_gguf_open(infer_gguf **out, const char *path, unsigned flags)
{
    *out = NULL;
    double t0 = infer_now();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return infer_error(INFER_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return infer_error(INFER_ERR_IO, "'%s' is not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return infer_error(INFER_ERR_FORMAT, "'%s' is empty", path);
    }
    bool huge = false;
    const char *nohuge = getenv("INFER_NO_HUGE_WEIGHTS");
    if (nohuge && *nohuge && strcmp(nohuge, "0") != 0)
        flags |= INFER_GGUF_OPEN_SMALL_PAGES;
    void *map = gguf_map_readonly(fd, (size_t)sb.st_size, !(flags & INFER_GGUF_OPEN_SMALL_PAGES), &huge);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file referenced */
    if (map == MAP_FAILED)
        return infer_error(INFER_ERR_IO, "cannot map '%s': %s", path, strerror(map_errno));

    infer_gguf *g = calloc(1, sizeof(*g));
    if (!g) {
        munmap(map, (size_t)sb.st_size);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    g->base = map;
    g->size = (size_t)sb.st_size;
    g->mapped = true;
    g->huge_advised = huge;
    g->path = strdup(path);
    infer_status st = g->path ? gguf_parse(g) : infer_error(INFER_ERR_NOMEM, "out of memory");
    if (st == INFER_OK && (flags & INFER_GGUF_OPEN_MLOCK)) {
        if (mlock(g->base, g->size) != 0) {
            st = infer_error(INFER_ERR_NOMEM,
                             "cannot mlock %zu bytes of '%s': %s (raise the limit with 'ulimit -l' or "
                             "LimitMEMLOCK= in the systemd unit)",
                             g->size, path, strerror(errno));
        } else {
            g->locked = true;
        }
    }
    if (st) {
        infer_error_prefix(st, "%s", path);
        infer_gguf_close(g);
        return st;
    }
    g->load_seconds = infer_now() - t0;
    *out = g;
    return INFER_OK;
}

void infer_gguf_close(infer_gguf *g)
{
    if (!g)
        return;
    gguf_free_contents(g);
    if (g->mapped) {
        if (g->locked)
            munlock(g->base, g->size);
        munmap((void *)g->base, g->size);
    }
    free(g->path);
    free(g);
}

/* ------------------------------------------------------------ accessors */

uint32_t infer_gguf_version(const infer_gguf *g) { return g->version; }
size_t infer_gguf_file_size(const infer_gguf *g) { return g->size; }
const char *infer_gguf_path(const infer_gguf *g) { return g->path; }
size_t infer_gguf_alignment(const infer_gguf *g) { return (size_t)g->alignment; }
size_t infer_gguf_data_offset(const infer_gguf *g) { return (size_t)g->data_offset; }
double infer_gguf_load_seconds(const infer_gguf *g) { return g->load_seconds; }
int64_t infer_gguf_n_kv(const infer_gguf *g) { return g->n_kv; }
int64_t infer_gguf_n_tensors(const infer_gguf *g) { return g->n_tensors; }

const char *infer_gguf_kv_key(const infer_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

infer_gguf_type infer_gguf_kv_type(const infer_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? (infer_gguf_type)g->kv[i].v.type : (infer_gguf_type)-1;
}

infer_gguf_type infer_gguf_kv_arr_type(const infer_gguf *g, int64_t i)
{
    if (i < 0 || i >= g->n_kv || g->kv[i].v.type != INFER_GGUF_ARRAY)
        return (infer_gguf_type)-1;
    return (infer_gguf_type)g->kv[i].v.arr.type;
}

uint64_t infer_gguf_kv_arr_n(const infer_gguf *g, int64_t i)
{
    if (i < 0 || i >= g->n_kv || g->kv[i].v.type != INFER_GGUF_ARRAY)
        return 0;
    return g->kv[i].v.arr.n;
}

int64_t infer_gguf_find_key(const infer_gguf *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0)
            return i;
    return -1;
}

const struct gguf_kv *gguf_get_kv(const infer_gguf *g, const char *key)
{
    int64_t i = infer_gguf_find_key(g, key);
    return i >= 0 ? &g->kv[i] : NULL;
}

const struct gguf_value *gguf_get_arr(const infer_gguf *g, const char *key, uint32_t elem_type)
{
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    if (!kv || kv->v.type != INFER_GGUF_ARRAY || kv->v.arr.type != elem_type)
        return NULL;
    return &kv->v;
}

bool gguf_arr_int(const struct gguf_value *arr, uint64_t i, int64_t *out)
{
    size_t es = gguf_type_size(arr->arr.type);
    if (arr->type != INFER_GGUF_ARRAY || !es || i >= arr->arr.n)
        return false;
    struct gguf_value v;
    decode_prim(arr->arr.type, arr->arr.raw + i * es, &v);
    return value_int(&v, out);
}

bool gguf_arr_float(const struct gguf_value *arr, uint64_t i, double *out)
{
    size_t es = gguf_type_size(arr->arr.type);
    if (arr->type != INFER_GGUF_ARRAY || !es || i >= arr->arr.n)
        return false;
    struct gguf_value v;
    decode_prim(arr->arr.type, arr->arr.raw + i * es, &v);
    return value_float(&v, out);
}

int64_t infer_gguf_get_int(const infer_gguf *g, const char *key, int64_t dflt)
{
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    int64_t v;
    return kv && value_int(&kv->v, &v) ? v : dflt;
}

double infer_gguf_get_float(const infer_gguf *g, const char *key, double dflt)
{
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    double v;
    return kv && value_float(&kv->v, &v) ? v : dflt;
}

bool infer_gguf_get_bool(const infer_gguf *g, const char *key, bool dflt)
{
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    int64_t v;
    return kv && value_int(&kv->v, &v) ? v != 0 : dflt;
}

const char *infer_gguf_get_str(const infer_gguf *g, const char *key, const char *dflt)
{
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    return kv && kv->cstr ? kv->cstr : dflt;
}

static size_t fmt_prim(const struct gguf_value *v, char *buf, size_t n)
{
    switch (v->type) {
    case INFER_GGUF_FLOAT32: case INFER_GGUF_FLOAT64: return (size_t)snprintf(buf, n, "%g", v->f64);
    case INFER_GGUF_BOOL: return (size_t)snprintf(buf, n, "%s", v->b ? "true" : "false");
    case INFER_GGUF_INT8: case INFER_GGUF_INT16: case INFER_GGUF_INT32: case INFER_GGUF_INT64:
        return (size_t)snprintf(buf, n, "%lld", (long long)v->i64);
    default: return (size_t)snprintf(buf, n, "%llu", (unsigned long long)v->u64);
    }
}

char *infer_gguf_kv_format(const infer_gguf *g, int64_t i, char *buf, size_t n)
{
    if (n == 0)
        return buf;
    buf[0] = '\0';
    if (i < 0 || i >= g->n_kv)
        return buf;
    const struct gguf_value *v = &g->kv[i].v;
    if (v->type == INFER_GGUF_STRING) {
        /* one line, control characters escaped, long strings cut */
        size_t o = 0;
        uint64_t k = 0;
        for (; k < v->str.len && o + 8 < n; k++) {
            unsigned char c = (unsigned char)v->str.s[k];
            if (c == '\n') { buf[o++] = '\\'; buf[o++] = 'n'; }
            else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
            else buf[o++] = (char)c;
        }
        if (k < v->str.len && n > 4) /* cut: say so */
            strcpy(buf + (o < n - 4 ? o : n - 4), "...");
        else
            buf[o] = '\0'; /* o < n: each step writes at most 4 bytes */
    } else if (v->type == INFER_GGUF_ARRAY) {
        size_t o = (size_t)snprintf(buf, n, "[%s × %llu]", gguf_type_name(v->arr.type),
                                    (unsigned long long)v->arr.n);
        size_t es = gguf_type_size(v->arr.type);
        for (uint64_t k = 0; es && k < v->arr.n && k < 4 && o + 32 < n; k++) {
            struct gguf_value e;
            decode_prim(v->arr.type, v->arr.raw + k * es, &e);
            o += (size_t)snprintf(buf + o, n - o, k ? ", " : " ");
            o += fmt_prim(&e, buf + o, n - o);
        }
    } else {
        fmt_prim(v, buf, n);
    }
    return buf;
}

int64_t infer_gguf_find_tensor(const infer_gguf *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return i;
    return -1;
}

const struct gguf_tensor *gguf_get_tensor(const infer_gguf *g, const char *name)
{
    int64_t i = infer_gguf_find_tensor(g, name);
    return i >= 0 ? &g->tensors[i] : NULL;
}

infer_status infer_gguf_tensor(const infer_gguf *g, int64_t i, infer_tensor_info *out)
{
    if (i < 0 || i >= g->n_tensors)
        return infer_error(INFER_ERR_INVALID, "tensor index %lld out of range", (long long)i);
    const struct gguf_tensor *t = &g->tensors[i];
    const struct ggml_type_traits *tt = file_type_traits(t->type);
    static _Thread_local char unk[32];
    out->name = t->name;
    out->type = t->type;
    if (tt) {
        out->type_name = tt->name;
    } else {
        snprintf(unk, sizeof(unk), "unknown(%u)", t->type);
        out->type_name = unk;
    }
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof(out->ne));
    out->offset = g->data_offset + t->offset;
    out->nbytes = t->nbytes;
    out->data = t->data;
    return INFER_OK;
}
