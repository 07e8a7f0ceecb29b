/*
 * fuzz-gguf.c - libFuzzer target for the GGUF parser: any input must be
 * accepted or rejected with an error, never crash, read out of bounds or leak.
 *
 * libFuzzer hands the input in a heap buffer of exactly `size` bytes, so
 * AddressSanitizer flags any read past the end.  An accepted file is walked
 * the way callers walk it: every key through every getter, every array
 * element (nested ones too) and the first and last byte of every tensor's
 * data, so an accepted file whose counts or offsets do not fit the buffer
 * is caught here too.  Built and run by `make check` (Makefile.am, fuzzing).
 */
#include "model/gguf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static volatile uint64_t sink;

static void walk_value(const struct gguf_value *v)
{
    if (v->type != INFER_GGUF_ARRAY)
        return;
    int64_t iv;
    double fv;
    for (uint64_t i = 0; i < v->arr.n; i++) {
        if (v->arr.type == INFER_GGUF_STRING) {
            const struct gguf_str *s = &v->arr.strs[i];
            if (s->len)
                sink += (unsigned char)s->s[0] + (unsigned char)s->s[s->len - 1];
        } else if (v->arr.type == INFER_GGUF_ARRAY) {
            walk_value(&v->arr.vals[i]);
        } else {
            if (gguf_arr_int(v, i, &iv))
                sink += (uint64_t)iv;
            if (gguf_arr_float(v, i, &fv))
                sink += (uint64_t)(fv == fv);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    infer_gguf *g;
    if (infer_gguf_open_memory(&g, data, size) != INFER_OK) {
        if (infer_last_error()[0] == '\0')
            __builtin_trap(); /* every rejection says why */
        return 0;
    }
    char buf[256];
    for (int64_t i = 0; i < infer_gguf_n_kv(g); i++) {
        const char *key = infer_gguf_kv_key(g, i);
        infer_gguf_kv_format(g, i, buf, sizeof(buf));
        infer_gguf_kv_format(g, i, buf, 7);
        sink += (uint64_t)infer_gguf_get_int(g, key, 0);
        sink += (uint64_t)infer_gguf_get_bool(g, key, false);
        sink += (uint64_t)(infer_gguf_get_float(g, key, 0) == 0);
        const char *s = infer_gguf_get_str(g, key, NULL);
        if (s)
            sink += strlen(s);
        sink += infer_gguf_kv_arr_n(g, i) + (uint64_t)infer_gguf_kv_arr_type(g, i);
        if (infer_gguf_find_key(g, key) != i)
            __builtin_trap(); /* keys are unique */
        const struct gguf_kv *kv = gguf_get_kv(g, key);
        walk_value(&kv->v);
    }
    for (int64_t i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        if (infer_gguf_tensor(g, i, &t) != INFER_OK)
            __builtin_trap();
        if (infer_gguf_find_tensor(g, t.name) != i)
            __builtin_trap(); /* names are unique */
        if (t.offset > size || t.nbytes > size - t.offset)
            __builtin_trap(); /* inside the buffer */
        if (t.data && (const uint8_t *)t.data != data + t.offset)
            __builtin_trap(); /* data is where the offset says */
        if (t.data && t.nbytes) {
            const uint8_t *d = t.data;
            sink += d[0] + d[t.nbytes - 1];
        }
    }
    infer_gguf_close(g);
    return 0;
}
