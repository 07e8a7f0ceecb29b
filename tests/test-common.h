/*
 * test-common.h - shared helpers for the cmocka test programs.
 */
#ifndef INFER_TEST_COMMON_H
#define INFER_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "infer.h"

/* Paths of the source tree and of ../shared (set by make check). */
static inline const char *test_srcdir(void)
{
    const char *s = getenv("INFER_SRCDIR");
    return s ? s : ".";
}

static inline const char *test_shared(void)
{
    static char buf[4096];
    const char *s = getenv("INFER_SHARED");
    if (s)
        return s;
    snprintf(buf, sizeof(buf), "%s/../shared", test_srcdir());
    return buf;
}

/* Build "<dir>/<rel>" in a static rotating buffer. */
static inline const char *test_path(const char *dir, const char *rel)
{
    static char bufs[8][4096];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, 4096, "%s/%s", dir, rel);
    return b;
}

/* Read a whole file into a NUL-terminated buffer (caller frees); NULL on error. */
static inline char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

/* A session of engine e with cache salt `salt` (NULL: none); fails the test otherwise. */
static inline infer_session *test_session(infer_engine *e, const char *salt)
{
    infer_session_params sp;
    infer_session_params_default(&sp);
    sp.cache_salt = salt;
    infer_session *s = NULL;
    assert_int_equal(infer_session_new_in(&s, e, &sp), INFER_OK);
    return s;
}

/* Path to the default model if it has been fetched, else NULL (tests skip). */
static inline const char *test_default_model(void)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), "%s/models/gemma-3-270m-q4_k_m.gguf", test_srcdir());
    FILE *f = fopen(buf, "rb");
    if (!f)
        return NULL;
    fclose(f);
    return buf;
}

#endif
