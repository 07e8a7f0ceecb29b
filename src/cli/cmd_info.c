/*
 * cmd_info.c - `infer info`, `infer warm`, `infer cold`, `infer cpu`: the
 * artifact and page-cache layers made visible.
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 64

struct group {
    const char *type_name;
    int n;
    uint64_t elements, bytes, resident;
};

/* Expert residency of a mixture-of-experts file: per layer, the page-cache
 * share of each expert's bytes over its 3-D blk.N.ffn_*_exps tensors (gate,
 * up or gate_up, down), which the router reads at random.  A tensor the
 * active kernels read from the repacked copy (rf, when a load made one) is
 * measured there: that is the copy decode reads; *n_repacked counts them. */
struct expert_layer {
    int layer, n_expert;
    uint64_t bytes_per_expert;
    double *percent; /* (n_expert) */
};

static int expert_residency(const infer_gguf *g, const infer_repack_file *rf, struct expert_layer **out,
                            int *n_repacked)
{
    *n_repacked = 0;
    static const char *const kinds[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps", "ffn_down_exps"};
    struct expert_layer *ls = NULL;
    int n = 0;
    char key[160];
    snprintf(key, sizeof(key), "%s.block_count", infer_gguf_get_str(g, "general.architecture", "?"));
    const int64_t n_layer = infer_gguf_get_int(g, key, 0);
    for (int il = 0; il < n_layer && il < 4096; il++) {
        uint64_t *res = NULL, per = 0;
        int n_exp = 0, found = 0;
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            char name[96];
            snprintf(name, sizeof(name), "blk.%d.%s.weight", il, kinds[k]);
            const int64_t ti = infer_gguf_find_tensor(g, name);
            infer_tensor_info t;
            if (ti < 0 || infer_gguf_tensor(g, ti, &t) != INFER_OK || t.n_dims != 3 || t.ne[2] < 1 || !t.nbytes)
                continue;
            if (!res) {
                n_exp = (int)t.ne[2];
                res = calloc((size_t)n_exp, sizeof(*res));
                if (!res)
                    break;
            } else if (t.ne[2] != n_exp) {
                continue; /* inconsistent: the loader refuses it, info shows what agrees */
            }
            const uint64_t slice = t.nbytes / (uint64_t)n_exp;
            uint64_t at;
            const bool rp = infer_repack_file_find(rf, t.offset, &at);
            *n_repacked += rp;
            per += slice;
            for (int e = 0; e < n_exp; e++) {
                infer_residency r = {0};
                if (rp)
                    infer_repack_file_range_residency(rf, at + (uint64_t)e * slice, slice, &r);
                else
                    infer_gguf_range_residency(g, t.offset + (uint64_t)e * slice, slice, &r);
                res[e] += r.bytes_resident;
            }
            found++;
        }
        if (!found) {
            free(res);
            continue;
        }
        struct expert_layer *nl = realloc(ls, (size_t)(n + 1) * sizeof(*ls));
        double *pc = calloc((size_t)n_exp, sizeof(double));
        if (!nl || !pc) {
            free(pc);
            free(res);
            if (nl)
                ls = nl;
            break;
        }
        ls = nl;
        for (int e = 0; e < n_exp; e++)
            pc[e] = per ? 100.0 * (double)res[e] / (double)per : 0.0;
        ls[n++] = (struct expert_layer){il, n_exp, per, pc};
        free(res);
    }
    *out = ls;
    return n;
}

/* The hot (layer, expert) pairs of a usage profile: lines
 * "infer_expert_routed_tokens_total{layer="L",expert="E"} N" (infer serve's
 * /metrics as saved) or "L E N"; a pair is hot when N > 0.  Returns the
 * number of hot pairs written to hot (layer * n_expert + expert), -1 when
 * the file cannot be read (message printed). */
static int read_profile(const char *path, int n_layer, int n_expert, bool *hot)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "error: cannot open the expert profile '%s'\n", path);
        return -1;
    }
    char line[512];
    int n = 0, bad = 0;
    while (fgets(line, sizeof(line), f)) {
        int l, e;
        double c;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "infer_expert_routed_tokens_total{layer=\"%d\",expert=\"%d\"} %lf", &l, &e, &c) != 3 &&
            sscanf(line, "%d %d %lf", &l, &e, &c) != 3) {
            if (!strncmp(line, "infer_", 6))
                continue; /* other metrics of a saved /metrics page */
            bad++;
            continue;
        }
        if (l < 0 || l >= n_layer || e < 0 || e >= n_expert) {
            bad++;
            continue;
        }
        if (c > 0 && !hot[(size_t)l * n_expert + e]) {
            hot[(size_t)l * n_expert + e] = true;
            n++;
        }
    }
    fclose(f);
    if (bad)
        fprintf(stderr, "warning: %s: %d lines are not 'LAYER EXPERT COUNT' of this model (ignored)\n", path, bad);
    return n;
}

/* Bytes [off, off + n) of the tensor at gguf offset t_off: from the
 * repacked copy when the kernels read the tensor there. */
static infer_status warm_tensor_range(const infer_gguf *g, const infer_repack_file *rf, uint64_t t_off, uint64_t off,
                                      uint64_t n)
{
    uint64_t at;
    if (infer_repack_file_find(rf, t_off, &at))
        return infer_repack_file_warm_range(rf, at + off, n);
    return infer_gguf_warm_range(g, t_off + off, n);
}

/* Read into the page cache every tensor that is not an expert tensor (each
 * token reads them) and the hot experts' slices of every blk.N.ffn_*_exps
 * tensor; the cold experts stay where they are.  Tensors in the repacked
 * copy (rf) are read from it, as decode does.  *bytes: bytes asked for
 * (*exp_bytes of them experts). */
static void warm_experts(const infer_gguf *g, const infer_repack_file *rf, const bool *hot, int n_layer,
                         int n_expert, bool with_rest, uint64_t *bytes, uint64_t *exp_bytes)
{
    static const char *const kinds[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps", "ffn_down_exps"};
    *bytes = *exp_bytes = 0;
    for (int64_t i = 0; with_rest && i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        if (infer_gguf_tensor(g, i, &t) != INFER_OK || !t.nbytes || (t.n_dims == 3 && strstr(t.name, "_exps.")))
            continue;
        if (warm_tensor_range(g, rf, t.offset, 0, t.nbytes) == INFER_OK)
            *bytes += t.nbytes;
    }
    for (int il = 0; il < n_layer; il++)
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            char name[96];
            snprintf(name, sizeof(name), "blk.%d.%s.weight", il, kinds[k]);
            const int64_t ti = infer_gguf_find_tensor(g, name);
            infer_tensor_info t;
            if (ti < 0 || infer_gguf_tensor(g, ti, &t) != INFER_OK || t.n_dims != 3 || t.ne[2] != n_expert)
                continue;
            const uint64_t slice = t.nbytes / (uint64_t)n_expert;
            for (int e = 0; e < n_expert; e++)
                if (hot[(size_t)il * n_expert + e] &&
                    warm_tensor_range(g, rf, t.offset, (uint64_t)e * slice, slice) == INFER_OK)
                    *exp_bytes += slice;
        }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static const char *model_arg(int argc, char **argv, const char *m)
{
    if (m)
        return m;
    return optind < argc ? argv[optind] : NULL;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"json", no_argument, 0, 'j'},
        {"sha256", no_argument, 0, 's'},      {"cpu", no_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *m = NULL;
    int json = 0, sha = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:jsh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': m = optarg; break;
        case 'j': json = 1; break;
        case 's': sha = 1; break;
        case 'c': return cmd_cpu(1, argv);
        case 'h':
            printf("usage: infer info [-m] MODEL [--json] [--sha256] [--cpu]\n");
            return 0;
        default: return 2;
        }
    }
    const char *path = cli_model_path(model_arg(argc, argv, m));
    if (!path)
        return 1;
    infer_gguf *g;
    if (infer_gguf_open(&g, path, 0) != INFER_OK)
        return cli_fail(NULL);

    infer_residency res;
    infer_gguf_residency(g, &res);
    struct group groups[MAX_GROUPS];
    int n_groups = 0;
    uint64_t n_params = 0;
    for (int64_t i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        infer_gguf_tensor(g, i, &t);
        uint64_t nel = (uint64_t)(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
        n_params += nel;
        int k;
        for (k = 0; k < n_groups; k++)
            if (!strcmp(groups[k].type_name, t.type_name))
                break;
        if (k == n_groups) {
            if (n_groups == MAX_GROUPS)
                continue;
            groups[k] = (struct group){.type_name = strdup(t.type_name)};
            n_groups++;
        }
        infer_residency tr = {0};
        if (t.nbytes)
            infer_gguf_range_residency(g, t.offset, t.nbytes, &tr);
        groups[k].n++;
        groups[k].elements += nel;
        groups[k].bytes += t.nbytes;
        groups[k].resident += tr.bytes_resident;
    }
    struct expert_layer *exl = NULL;
    infer_repack_file *rf = NULL;
    infer_repack_file_open(&rf, g, NULL); /* none: every tensor is read from the GGUF */
    int n_exp_repacked = 0;
    const int n_exl = expert_residency(g, rf, &exl, &n_exp_repacked);
    char hex[65] = "";
    if (sha && infer_file_sha256(path, hex) != INFER_OK) {
        infer_gguf_close(g);
        return cli_fail("sha256");
    }
    const char *arch = infer_gguf_get_str(g, "general.architecture", "?");
    char key[256];
    snprintf(key, sizeof(key), "%s.context_length", arch);
    int64_t ctx = infer_gguf_get_int(g, key, 0);
    int64_t n_vocab = (int64_t)infer_gguf_kv_arr_n(g, infer_gguf_find_key(g, "tokenizer.ggml.tokens"));
    const char *tok = infer_gguf_get_str(g, "tokenizer.ggml.model", "none");
    int has_tmpl = infer_gguf_find_key(g, "tokenizer.chat_template") >= 0;

    if (json) {
        printf("{\"path\": ");
        json_str(stdout, path);
        printf(", \"gguf_version\": %u, \"file_size\": %zu, ", infer_gguf_version(g), infer_gguf_file_size(g));
        if (sha)
            printf("\"sha256\": \"%s\", ", hex);
        printf("\"architecture\": ");
        json_str(stdout, arch);
        printf(", \"name\": ");
        json_str(stdout, infer_gguf_get_str(g, "general.name", ""));
        printf(", \"parameters\": %llu, \"context_length\": %lld, \"tokenizer\": ",
               (unsigned long long)n_params, (long long)ctx);
        json_str(stdout, tok);
        printf(", \"vocab_size\": %lld, \"chat_template\": %s, \"n_tensors\": %lld, "
               "\"load_seconds\": %.6f, \"residency\": {\"bytes\": %llu, \"resident\": %llu, \"percent\": %.2f}, "
               "\"tensor_groups\": [",
               (long long)n_vocab, has_tmpl ? "true" : "false", (long long)infer_gguf_n_tensors(g),
               infer_gguf_load_seconds(g), (unsigned long long)res.bytes_total,
               (unsigned long long)res.bytes_resident, res.percent);
        for (int k = 0; k < n_groups; k++)
            printf("%s{\"type\": \"%s\", \"tensors\": %d, \"elements\": %llu, \"bytes\": %llu, "
                   "\"resident_percent\": %.2f}",
                   k ? ", " : "", groups[k].type_name, groups[k].n, (unsigned long long)groups[k].elements,
                   (unsigned long long)groups[k].bytes,
                   groups[k].bytes ? 100.0 * (double)groups[k].resident / (double)groups[k].bytes : 0.0);
        printf("], \"experts\": [");
        for (int i = 0; i < n_exl; i++) {
            printf("%s{\"layer\": %d, \"n_expert\": %d, \"bytes_per_expert\": %llu, \"resident_percent\": [",
                   i ? ", " : "", exl[i].layer, exl[i].n_expert, (unsigned long long)exl[i].bytes_per_expert);
            for (int e = 0; e < exl[i].n_expert; e++)
                printf("%s%.2f", e ? ", " : "", exl[i].percent[e]);
            printf("]}");
        }
        printf("], \"experts_repacked\": ");
        if (rf && n_exp_repacked > 0) { /* where the resident_percent of those tensors was measured */
            printf("{\"tensors\": %d, \"path\": ", n_exp_repacked);
            json_str(stdout, infer_repack_file_path(rf));
            printf("}");
        } else {
            printf("null");
        }
        printf(", \"metadata\": {");
        for (int64_t i = 0; i < infer_gguf_n_kv(g); i++) {
            char val[512];
            printf("%s", i ? ", " : "");
            json_str(stdout, infer_gguf_kv_key(g, i));
            printf(": ");
            json_str(stdout, infer_gguf_kv_format(g, i, val, sizeof(val)));
        }
        printf("}}\n");
    } else {
        printf("file:           %s\n", path);
        printf("size:           %zu bytes (%.1f MiB), GGUF v%u, alignment %zu\n", infer_gguf_file_size(g),
               mib(infer_gguf_file_size(g)), infer_gguf_version(g), infer_gguf_alignment(g));
        if (sha)
            printf("sha256:         %s\n", hex);
        printf("architecture:   %s\n", arch);
        printf("name:           %s\n", infer_gguf_get_str(g, "general.name", "-"));
        printf("parameters:     %llu (%.1f M)\n", (unsigned long long)n_params, (double)n_params / 1e6);
        printf("context length: %lld\n", (long long)ctx);
        printf("tokenizer:      %s, %lld tokens\n", tok, (long long)n_vocab);
        printf("chat template:  %s\n", has_tmpl ? "present" : "absent");
        printf("load:           %.3f ms (parse and validate)\n", infer_gguf_load_seconds(g) * 1e3);
        printf("page cache:     %.1f%% resident (%.1f of %.1f MiB)\n", res.percent, mib(res.bytes_resident),
               mib(res.bytes_total));
        printf("\ntensors: %lld\n  %-8s %7s %14s %12s %9s\n", (long long)infer_gguf_n_tensors(g), "type",
               "count", "elements", "MiB", "resident");
        for (int k = 0; k < n_groups; k++)
            printf("  %-8s %7d %14llu %12.2f %8.1f%%\n", groups[k].type_name, groups[k].n,
                   (unsigned long long)groups[k].elements, mib(groups[k].bytes),
                   groups[k].bytes ? 100.0 * (double)groups[k].resident / (double)groups[k].bytes : 0.0);
        if (n_exl > 0) {
            printf("\nexperts in the page cache (per layer: fully / partly / not resident, of %d):\n",
                   exl[0].n_expert);
            for (int i = 0; i < n_exl; i++) {
                int full = 0, part = 0;
                double sum = 0;
                for (int e = 0; e < exl[i].n_expert; e++) {
                    full += exl[i].percent[e] >= 99.995;
                    part += exl[i].percent[e] > 0 && exl[i].percent[e] < 99.995;
                    sum += exl[i].percent[e];
                }
                printf("  blk.%-4d %4d / %4d / %4d   %5.1f%% of %.2f MiB\n", exl[i].layer, full, part,
                       exl[i].n_expert - full - part, sum / exl[i].n_expert,
                       mib(exl[i].bytes_per_expert * (uint64_t)exl[i].n_expert));
            }
            if (rf && n_exp_repacked > 0)
                printf("  (%d expert tensors measured in the repacked copy the %s kernels read: %s)\n",
                       n_exp_repacked, infer_kernel_variant(), infer_repack_file_path(rf));
        }
        printf("\nmetadata: %lld keys\n", (long long)infer_gguf_n_kv(g));
        for (int64_t i = 0; i < infer_gguf_n_kv(g); i++) {
            char val[160];
            printf("  %-44s %s\n", infer_gguf_kv_key(g, i), infer_gguf_kv_format(g, i, val, sizeof(val)));
        }
    }
    for (int k = 0; k < n_groups; k++)
        free((void *)groups[k].type_name);
    for (int i = 0; i < n_exl; i++)
        free(exl[i].percent);
    free(exl);
    infer_repack_file_close(rf);
    infer_gguf_close(g);
    return 0;
}

static int parse_model_opts(int argc, char **argv, const char *usage_line, const char **path, int *threads)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"threads", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *m = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': m = optarg; break;
        case 't': if (threads) *threads = atoi(optarg); break;
        case 'h': printf("%s\n", usage_line); return 0;
        default: return 2;
        }
    }
    *path = cli_model_path(model_arg(argc, argv, m));
    return *path ? -1 : 1;
}

int cmd_warm(int argc, char **argv)
{
    const char *path, *profile = NULL;
    int threads = 0, huge = 0, experts_only = 0;
    for (int i = 1; i < argc; i++) /* --huge, --experts are warm's own; the rest is parse_model_opts' */
        if (!strcmp(argv[i], "--huge")) {
            huge = 1;
            memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof(*argv));
            argc--, i--;
        } else if (!strcmp(argv[i], "--experts-only")) {
            experts_only = 1;
            memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof(*argv));
            argc--, i--;
        } else if (!strcmp(argv[i], "--experts") && i + 1 < argc) {
            profile = argv[i + 1];
            memmove(argv + i, argv + i + 2, (size_t)(argc - i - 1) * sizeof(*argv));
            argc -= 2, i--;
        }
    int rc = parse_model_opts(argc, argv,
                              "usage: infer warm [-m] MODEL [-t THREADS] [--huge] [--experts PROFILE [--experts-only]]\n"
                              "  --huge  drop the pages of the file and of its repacked copy first and read\n"
                              "          them again, so that the page cache holds them in 2 MiB pages where the\n"
                              "          kernel can (faster decode)\n"
                              "  --experts PROFILE  MoE models: read the tensors every token uses and, of the\n"
                              "          experts, only those a usage profile routed tokens to (lines 'LAYER EXPERT\n"
                              "          COUNT', or a saved /metrics page of infer serve), so that a board whose RAM\n"
                              "          cannot hold every expert keeps the hot ones in the page cache\n"
                              "  --experts-only  with --experts: the hot experts and nothing else (the kernel's\n"
                              "          readahead of large reads may bring neighbouring bytes in as well)",
                              &path, &threads);
    if (rc >= 0)
        return rc;
    infer_gguf *g;
    if (infer_gguf_open(&g, path, 0) != INFER_OK)
        return cli_fail(NULL);
    infer_residency before, after;
    infer_gguf_residency(g, &before);
    if (profile) {
        char key[160];
        const char *arch = infer_gguf_get_str(g, "general.architecture", "?");
        snprintf(key, sizeof(key), "%s.block_count", arch);
        const int64_t n_layer = infer_gguf_get_int(g, key, 0);
        snprintf(key, sizeof(key), "%s.expert_count", arch);
        const int64_t n_expert = infer_gguf_get_int(g, key, 0);
        if (n_layer <= 0 || n_layer > 4096 || n_expert <= 0 || n_expert > 1024) {
            fprintf(stderr, "error: %s is not a mixture-of-experts model (no %s)\n", path, key);
            infer_gguf_close(g);
            return 1;
        }
        bool *hot = calloc((size_t)(n_layer * n_expert), sizeof(bool));
        const int n_hot = hot ? read_profile(profile, (int)n_layer, (int)n_expert, hot) : -1;
        if (n_hot < 0) {
            free(hot);
            infer_gguf_close(g);
            return 1;
        }
        double t0 = infer_now_seconds();
        uint64_t bytes, exp_bytes;
        infer_repack_file *rf = NULL;
        infer_repack_file_open(&rf, g, NULL);
        warm_experts(g, rf, hot, (int)n_layer, (int)n_expert, !experts_only, &bytes, &exp_bytes);
        const double secs = infer_now_seconds() - t0;
        infer_gguf_residency(g, &after);
        printf("warm --experts %s: %d of %lld experts (%lld layers x %lld) hot; %.1f MiB of hot experts and %.1f MiB "
               "of other tensors touched in %.3f s; the file %.1f%% -> %.1f%% resident\n",
               profile, n_hot, (long long)(n_layer * n_expert), (long long)n_layer, (long long)n_expert,
               mib(exp_bytes), mib(bytes), secs, before.percent, after.percent);
        if (rf)
            printf("(tensors the %s kernels read repacked were read from %s)\n", infer_kernel_variant(),
                   infer_repack_file_path(rf));
        infer_repack_file_close(rf);
        free(hot);
        infer_gguf_close(g);
        return 0;
    }
    if (huge) { /* pages this map holds cannot be dropped: close it first */
        infer_gguf_close(g);
        if (infer_file_cold(path) != INFER_OK || infer_gguf_open(&g, path, 0) != INFER_OK)
            return cli_fail(NULL);
        infer_gguf_residency(g, &before);
    }
    uint64_t bytes;
    double secs;
    infer_gguf_warm(g, threads, &bytes, &secs);
    infer_gguf_residency(g, &after);
    infer_repack_file *rf = NULL; /* the repacked copy decode reads: warm it too (--huge: drop it first) */
    bool copy_small = false;
    if (infer_repack_file_open(&rf, g, NULL) == INFER_OK) {
        infer_residency rb, ra;
        const char *copy = infer_repack_file_path(rf);
        infer_file_residency(copy, &rb);
        const double t0 = infer_now_seconds();
        /* rf's map is only asked (mincore) and holds no page: all can be dropped */
        if ((huge && infer_file_cold(copy) != INFER_OK) || infer_repack_file_warm(rf, &ra) != INFER_OK) {
            infer_repack_file_close(rf);
            infer_gguf_close(g);
            return cli_fail(NULL);
        }
        printf("warm %s (the repacked copy the %s kernels read): %.1f%% -> %.1f%% resident, %.1f MiB in %.3f s, "
               "%.1f%% in 2 MiB pages\n",
               copy, infer_kernel_variant(), rb.percent, ra.percent, mib(infer_repack_file_size(rf)),
               infer_now_seconds() - t0, ra.bytes_total ? 100.0 * (double)ra.bytes_huge / (double)ra.bytes_total : 0.0);
        copy_small = ra.bytes_total >= (4u << 20) && ra.bytes_huge < ra.bytes_total / 2;
        infer_repack_file_close(rf);
    }
    uint64_t read = after.bytes_resident > before.bytes_resident ? after.bytes_resident - before.bytes_resident : 0;
    printf("warm %s: %.1f%% -> %.1f%% resident, %.1f MiB read in %.3f s (%.1f MiB/s), %.1f MiB touched, "
           "%.1f%% in 2 MiB pages\n",
           path, before.percent, after.percent, mib(read), secs, secs > 0 ? mib(read) / secs : 0.0, mib(bytes),
           after.bytes_total ? 100.0 * (double)after.bytes_huge / (double)after.bytes_total : 0.0);
    if ((after.bytes_total >= (4u << 20) && after.bytes_huge < after.bytes_total / 2) || copy_small) {
        if (!huge)
            printf("hint: the page cache holds %s in small pages; 'infer warm --huge %s' reads it again "
                   "into 2 MiB pages where the kernel can (decode reads them faster)\n",
                   copy_small ? "the repacked copy" : "this file", path);
        else
            printf("note: %s stayed in small pages: another process maps it (a running infer serve?), or "
                   "this kernel or file system keeps no 2 MiB page-cache folios\n",
                   copy_small ? "the repacked copy" : "the file");
    }
    infer_gguf_close(g);
    return 0;
}

int cmd_cold(int argc, char **argv)
{
    const char *path;
    int rc = parse_model_opts(argc, argv, "usage: infer cold [-m] MODEL", &path, NULL);
    if (rc >= 0)
        return rc;
    /* validate it is a model first, then drop its pages while nothing maps it */
    infer_gguf *g;
    if (infer_gguf_open(&g, path, 0) != INFER_OK)
        return cli_fail(NULL);
    infer_residency before, after;
    infer_gguf_residency(g, &before);
    char copy[1100] = ""; /* the repacked copy of some of its tensors, dropped too */
    infer_repack_file *rf = NULL;
    if (infer_repack_file_open(&rf, g, NULL) == INFER_OK)
        snprintf(copy, sizeof(copy), "%s", infer_repack_file_path(rf));
    infer_repack_file_close(rf);
    infer_gguf_close(g);
    if (infer_file_cold(path) != INFER_OK)
        return cli_fail(NULL);
    if (infer_file_residency(path, &after) != INFER_OK)
        return cli_fail(NULL);
    printf("cold %s: %.1f%% -> %.1f%% resident\n", path, before.percent, after.percent);
    if (copy[0]) {
        infer_file_residency(copy, &before);
        if (infer_file_cold(copy) != INFER_OK || infer_file_residency(copy, &after) != INFER_OK)
            return cli_fail(NULL);
        printf("cold %s (its repacked copy): %.1f%% -> %.1f%% resident\n", copy, before.percent, after.percent);
    }
    return 0;
}

int cmd_cpu(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("%s\n\n%s", infer_build_info(), infer_kernel_report());
    return 0;
}
