/*
 * golden.h - reader for the llama.cpp reference files in tests/golden/
 * (written by contrib/golden/regen; format documented there).
 */
#ifndef INFER_TEST_GOLDEN_H
#define INFER_TEST_GOLDEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_MAX_PROMPTS 8
#define GOLDEN_MAX_STEPS 64
#define GOLDEN_MAX_TOP 64
#define GOLDEN_MAX_TOKENS 2048

struct golden_step {
    int32_t chosen;
    int n_top;
    int32_t top_id[GOLDEN_MAX_TOP];
    float top_logit[GOLDEN_MAX_TOP];
};

struct golden_prompt {
    int is_long;     /* a `long N` record: tokens given, no text (long-position logits) */
    char text[1024]; /* decoded from the JSON string literal */
    int n_tokens;
    int32_t tokens[GOLDEN_MAX_TOKENS];
    int n_steps;
    struct golden_step steps[GOLDEN_MAX_STEPS];
    double margin;
};

struct golden {
    char model[256];
    int n_vocab;
    int n_prompts;
    struct golden_prompt prompts[GOLDEN_MAX_PROMPTS];
    int ppl_ctx, ppl_chunks;
    double ppl;
    int long_ctx; /* n_ctx of the long records (it picks LongRoPE's factors) */
};

/* Decode a JSON string literal starting at s (at the opening quote) into out. */
static inline void golden_json_string(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    if (*s == '"')
        s++;
    while (*s && *s != '"' && o + 4 < cap) {
        if (*s != '\\') {
            out[o++] = *s++;
            continue;
        }
        s++;
        char c = *s++;
        if (c == 'n') out[o++] = '\n';
        else if (c == 't') out[o++] = '\t';
        else if (c == 'r') out[o++] = '\r';
        else if (c == 'u') {
            unsigned cp = 0;
            sscanf(s, "%4x", &cp);
            s += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && s[0] == '\\' && s[1] == 'u') {
                unsigned lo = 0;
                sscanf(s + 2, "%4x", &lo);
                s += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp < 0x80) out[o++] = (char)cp;
            else if (cp < 0x800) { out[o++] = (char)(0xc0 | cp >> 6); out[o++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) { out[o++] = (char)(0xe0 | cp >> 12); out[o++] = (char)(0x80 | ((cp >> 6) & 63)); out[o++] = (char)(0x80 | (cp & 63)); }
            else { out[o++] = (char)(0xf0 | cp >> 18); out[o++] = (char)(0x80 | ((cp >> 12) & 63)); out[o++] = (char)(0x80 | ((cp >> 6) & 63)); out[o++] = (char)(0x80 | (cp & 63)); }
        } else out[o++] = c;
    }
    out[o] = '\0';
}

/* Parse a golden file; returns 0 on success. */
static inline int golden_load(const char *path, struct golden *g)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(g, 0, sizeof(*g));
    static char line[1 << 16];
    struct golden_prompt *p = NULL;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "model ", 6)) {
            snprintf(g->model, sizeof(g->model), "%.200s", line + 6);
        } else if (!strncmp(line, "n_vocab ", 8)) {
            g->n_vocab = atoi(line + 8);
        } else if (!strncmp(line, "prompt ", 7) && g->n_prompts < GOLDEN_MAX_PROMPTS) {
            p = &g->prompts[g->n_prompts++];
            golden_json_string(line + 7, p->text, sizeof(p->text));
        } else if (!strncmp(line, "long ", 5) && g->n_prompts < GOLDEN_MAX_PROMPTS) {
            p = &g->prompts[g->n_prompts++];
            p->is_long = 1;
        } else if (!strncmp(line, "long_ctx ", 9)) {
            g->long_ctx = atoi(line + 9);
        } else if (!strncmp(line, "tokens", 6) && p) {
            char *s = line + 6, *e;
            while (p->n_tokens < GOLDEN_MAX_TOKENS) {
                long v = strtol(s, &e, 10);
                if (e == s)
                    break;
                p->tokens[p->n_tokens++] = (int32_t)v;
                s = e;
            }
        } else if (!strncmp(line, "step ", 5) && p && p->n_steps < GOLDEN_MAX_STEPS) {
            struct golden_step *st = &p->steps[p->n_steps++];
            int idx, k, off = 0;
            if (sscanf(line + 5, "%d %d %d%n", &idx, &st->chosen, &k, &off) != 3)
                continue;
            char *s = line + 5 + off;
            for (int i = 0; i < k && i < GOLDEN_MAX_TOP; i++) {
                int id, n = 0;
                float v;
                if (sscanf(s, " %d:%f%n", &id, &v, &n) != 2)
                    break;
                st->top_id[st->n_top] = id;
                st->top_logit[st->n_top++] = v;
                s += n;
            }
        } else if (!strncmp(line, "margin ", 7) && p) {
            p->margin = atof(line + 7);
        } else if (!strncmp(line, "perplexity ", 11)) {
            sscanf(line + 11, "%d %d %lf", &g->ppl_ctx, &g->ppl_chunks, &g->ppl);
        }
    }
    fclose(f);
    return g->n_prompts > 0 || g->ppl > 0 ? 0 : -1;
}

#endif
