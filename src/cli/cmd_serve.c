/*
 * cmd_serve.c - `infer serve`: option parsing for the OpenAI-compatible
 * server in src/server/ (server_run does the rest).
 *
 * Flag names follow llama-server where one exists (-c, -b, -t, -np,
 * --host, --port, --api-key, --alias) and ollama for --keep-alive.
 */
#include "cli.h"

#include "../server/server.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    O_HOST = 2000, O_PORT, O_PARALLEL, O_QUEUE, O_NO_PREFIX, O_NO_COALESCE, O_TEMPLATE, O_MAX_BODY, O_MAX_PROMPT,
    O_MAX_TOKENS,
    O_KEEP_ALIVE, O_CACHE_DIR, O_API_KEY, O_API_KEY_FILE, O_CORS, O_TIMEOUT, O_MAX_CONN, O_ALIAS, O_KV_BLOCK,
    O_MLOCK, O_NO_REPACK, O_CACHE_TYPE_K, O_CACHE_TYPE_V, O_EMBED_MODEL, O_EMBED_CTX,
    O_RC, O_RC_DB, O_RC_TTL, O_RC_MAX, O_WARM_PROMPTS, O_CACHE_HIGH, O_BOARD, O_ADMIN_KEY, O_DRAIN_TIMEOUT, O_TOOL_CHOICE, O_RC_MAX_BYTES, O_RC_THRESHOLD, O_RC_MAX_TEMP,
    O_REASONING_BUDGET,
};

static const char *help =
    "usage: infer serve [-m MODEL] [options]\n\n"
    "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions,\n"
    "POST /v1/embeddings (with --embedding-model), GET /v1/models, /health, /metrics;\n"
    "and an Ollama-compatible one on the same port: POST /api/chat, /api/generate,\n"
    "/api/show, /api/embed, GET /api/tags, /api/ps, /api/version, HEAD / (model: --alias).\n\n"
    "  -m, --model FILE          GGUF model (default: the default model)\n"
    "      --alias NAME          model id in the API (default: the file name without .gguf)\n"
    "      --host ADDR           numeric IPv4/IPv6 address to bind (default 127.0.0.1)\n"
    "      --port N              TCP port (default 8080; 0: any free port, printed)\n"
    "  -np, --parallel N         sequences generated at once (default 4)\n"
    "      --queue N             requests that may wait for a sequence; more get 503 (default 64)\n"
    "  -c, --ctx-size N          context per sequence (default: min(model, 4096))\n"
    "  -b, --batch-size N        tokens per forward pass: every decoding sequence's next token,\n"
    "                            then chunks of new prompts (default 256)\n"
    "  -t, --threads N           threads (default: physical cores)\n"
    "      --kv-block N          tokens per KV block (default 32)\n"
    "      --mlock               lock the model's pages in memory\n"
    "      --no-repack           use the weights as stored (no repacked-weight cache)\n"
    "      --no-prefix-cache     recompute every prompt from scratch (for comparisons)\n"
    "      --no-coalesce         a request whose prefix another request is computing right now\n"
    "                            computes it too, instead of waiting for it (for comparisons)\n"
    "  -ctk, --cache-type-k T    KV cache type of keys: f16 (default) or q8_0 (half the memory;\n"
    "                            head size divisible by 32)\n"
    "  -ctv, --cache-type-v T    likewise for values\n"
    "      --chat-template NAME  chatml, gemma, llama3, ... (default: from the model)\n"
    "      --embedding-model FILE  also serve POST /v1/embeddings with this bert GGUF\n"
    "                            (e.g. models/all-minilm-l6-v2-f16.gguf from models/fetch-embedder)\n"
    "      --embedding-ctx N     truncate embedding inputs to N tokens (default: the model's maximum)\n"
    "      --semantic-cache      answer from the response cache (off by default): the exact tier\n"
    "                            (same model, tenant, messages and parameters), and with\n"
    "                            --embedding-model the semantic tier (same everything but the last\n"
    "                            user question, which must be similar and pass the content gate)\n"
    "      --semantic-cache-db PATH  its SQLite file (default ~/.cache/infer/responses.sqlite)\n"
    "      --semantic-cache-ttl D    lifetime of a stored answer from creation (default 24h)\n"
    "      --semantic-cache-max-entries N  (default 100000; least recently hit go first)\n"
    "      --tool-choice C       auto (default) or required: what a request with tools and no\n"
    "                            tool_choice gets (required: a call, constrained to the tools' schemas,\n"
    "                            on the user's turn; after the tool results the answer is text)\n"
    "      --reasoning-budget N  -1 (default): a thinking model thinks as it likes; 0: it is asked\n"
    "                            not to (its template's no-thinking prompt, as llama.cpp's flag;\n"
    "                            a request's think / chat_template_kwargs.enable_thinking wins)\n"
    "      --semantic-cache-max-bytes N    answer bytes kept (k/M suffix; default 256M)\n"
    "      --semantic-cache-threshold X    cosine a semantic hit needs (default: the one calibrated\n"
    "                            for the embedding model, see README; requests may only raise it)\n"
    "      --semantic-cache-max-temp T     no semantic tier above this temperature (default 1.0)\n"
    "      --keep-alive D        unload after D idle: 5m, 30s, 1h30m, 0 (after each request),\n"
    "                            -1 (never; the default)\n"
    "      --cache-dir DIR       disk tier of the prefix cache: cached KV survives unloads and restarts\n"
    "      --cache-high SIZE     KV bytes (running + cached) that trigger eviction, e.g. 512M (default: from RAM)\n"
    "      --warm-prompts FILE   prefill these prompts after the first load (one a line: a JSON string\n"
    "                            = a system prompt, {\"messages\": [...]}, {\"prompt\": ...}, or raw text)\n"
    "      --api-key KEY         require 'Authorization: Bearer KEY' (repeatable: one per tenant;\n"
    "                            also $INFER_API_KEY); each key salts its own prefix cache\n"
    "      --api-key-file FILE   keys, one per line\n"
    "      --cors ORIGIN         send CORS headers allowing ORIGIN ('*' for any)\n"
    "      --board-name NAME     sent as X-Infer-Board on every response (default: the host name),\n"
    "                            for balancers and logs (contrib/haproxy)\n"
    "      --admin-key KEY       allow POST /admin/drain with 'Authorization: Bearer KEY'\n"
    "      --drain-timeout D     after SIGTERM (or /admin/drain) /health answers 503 'draining' while\n"
    "                            requests are still served; the server exits when idle (after at\n"
    "                            least 5 s) or after D (default 5m). SIGINT or a second SIGTERM: now\n"
    "      --max-body BYTES      largest request body (default 1M; k/M suffixes)\n"
    "      --max-prompt-tokens N longest prompt (default: the context)\n"
    "      --max-tokens N        largest max_tokens, and the default (default 4096)\n"
    "      --timeout S           close connections idle for S seconds (default 30)\n"
    "      --max-connections N   (default 64)\n"
    "  -v, --verbose             log requests\n";

static bool parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "error: bad value '%s' (expected %ld..%ld)\n", s, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

static bool parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        goto bad;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end || v == 0 || v > (1ULL << 30))
        goto bad;
    *out = (size_t)v;
    return true;
bad:
    fprintf(stderr, "error: bad size '%s' (bytes, with an optional k or M suffix, at most 1G)\n", s);
    return false;
}

static bool add_key(struct server_config *c, const char *k)
{
    if (!*k)
        return true;
    char **keys = realloc(c->api_keys, (size_t)(c->n_api_keys + 1) * sizeof(char *));
    if (!keys)
        return false;
    c->api_keys = keys;
    if (!(c->api_keys[c->n_api_keys] = strdup(k)))
        return false;
    c->n_api_keys++;
    return true;
}

static bool read_keys(struct server_config *c, const char *path)
{
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text)
        return false;
    bool ok = true;
    for (char *save = NULL, *line = strtok_r(text, "\r\n", &save); line && ok; line = strtok_r(NULL, "\r\n", &save))
        if (line[0] != '#')
            ok = add_key(c, line);
    free(text);
    return ok;
}

int cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"alias", required_argument, 0, O_ALIAS},
        {"host", required_argument, 0, O_HOST}, {"port", required_argument, 0, O_PORT},
        {"parallel", required_argument, 0, O_PARALLEL}, {"np", required_argument, 0, O_PARALLEL},
        {"queue", required_argument, 0, O_QUEUE}, {"ctx-size", required_argument, 0, 'c'},
        {"batch-size", required_argument, 0, 'b'}, {"threads", required_argument, 0, 't'},
        {"kv-block", required_argument, 0, O_KV_BLOCK}, {"mlock", no_argument, 0, O_MLOCK},
        {"no-repack", no_argument, 0, O_NO_REPACK},
        {"no-prefix-cache", no_argument, 0, O_NO_PREFIX}, {"no-coalesce", no_argument, 0, O_NO_COALESCE},
        {"chat-template", required_argument, 0, O_TEMPLATE},
        {"keep-alive", required_argument, 0, O_KEEP_ALIVE}, {"cache-dir", required_argument, 0, O_CACHE_DIR},
        {"warm-prompts", required_argument, 0, O_WARM_PROMPTS}, {"cache-high", required_argument, 0, O_CACHE_HIGH},
        {"api-key", required_argument, 0, O_API_KEY}, {"api-key-file", required_argument, 0, O_API_KEY_FILE},
        {"cors", required_argument, 0, O_CORS}, {"max-body", required_argument, 0, O_MAX_BODY},
        {"board-name", required_argument, 0, O_BOARD}, {"admin-key", required_argument, 0, O_ADMIN_KEY},
        {"drain-timeout", required_argument, 0, O_DRAIN_TIMEOUT},
        {"max-prompt-tokens", required_argument, 0, O_MAX_PROMPT}, {"max-tokens", required_argument, 0, O_MAX_TOKENS},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"max-connections", required_argument, 0, O_MAX_CONN},
        {"cache-type-k", required_argument, 0, O_CACHE_TYPE_K}, {"ctk", required_argument, 0, O_CACHE_TYPE_K},
        {"cache-type-v", required_argument, 0, O_CACHE_TYPE_V}, {"ctv", required_argument, 0, O_CACHE_TYPE_V},
        {"embedding-model", required_argument, 0, O_EMBED_MODEL},
        {"embedding-ctx", required_argument, 0, O_EMBED_CTX},
        {"semantic-cache", no_argument, 0, O_RC}, {"semantic-cache-db", required_argument, 0, O_RC_DB},
        {"semantic-cache-ttl", required_argument, 0, O_RC_TTL},
        {"semantic-cache-max-entries", required_argument, 0, O_RC_MAX},
        {"tool-choice", required_argument, 0, O_TOOL_CHOICE},
        {"reasoning-budget", required_argument, 0, O_REASONING_BUDGET},
        {"semantic-cache-max-bytes", required_argument, 0, O_RC_MAX_BYTES},
        {"semantic-cache-threshold", required_argument, 0, O_RC_THRESHOLD},
        {"semantic-cache-max-temp", required_argument, 0, O_RC_MAX_TEMP},
        {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    struct server_config c = {
        .host = "127.0.0.1", .port = 8080, .parallel = 4, .queue = 64, .n_batch = 256,
        .max_body = 1 << 20, .max_tokens = 4096, .keep_alive = -1, .timeout = 30, .max_connections = 64,
        .drain_timeout = 300,
        .response_cache_max_temp = 1.0, .reasoning_budget = -1,
    };
    const char *model = NULL;
    int o, rc = 2;
    bool ok = true;
    optind = 1;
    while (ok && (o = getopt_long_only(argc, argv, "m:c:b:t:vh", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case O_ALIAS: c.model_id = optarg; break;
        case O_HOST: c.host = optarg; break;
        case O_PORT: ok = parse_int(optarg, 0, 65535, &c.port); break;
        case O_PARALLEL: ok = parse_int(optarg, 1, 256, &c.parallel); break;
        case O_QUEUE: ok = parse_int(optarg, 0, 100000, &c.queue); break;
        case 'c': ok = parse_int(optarg, 0, 1 << 22, &c.n_ctx); break;
        case 'b': ok = parse_int(optarg, 1, 1 << 16, &c.n_batch); break;
        case 't': ok = parse_int(optarg, 0, 4096, &c.n_threads); break;
        case O_KV_BLOCK: ok = parse_int(optarg, 1, 4096, &c.kv_block); break;
        case O_MLOCK: c.mlock = true; break;
        case O_NO_REPACK: c.no_repack = true; break;
        case O_NO_PREFIX: c.no_prefix_cache = true; break;
        case O_NO_COALESCE: c.no_coalesce = true; break;
        case O_TEMPLATE: c.chat_template = optarg; break;
        case O_KEEP_ALIVE:
            if (!(ok = server_parse_duration(optarg, &c.keep_alive)))
                fprintf(stderr, "error: bad --keep-alive '%s' (5m, 30s, 1h30m, 0, -1)\n", optarg);
            break;
        case O_CACHE_DIR: c.cache_dir = optarg; break;
        case O_CACHE_HIGH:
            if (!(ok = cli_parse_bytes(optarg, &c.cache_high) && c.cache_high > 0))
                fprintf(stderr, "error: bad --cache-high '%s' (e.g. 512M, 2G)\n", optarg);
            break;
        case O_WARM_PROMPTS:
            c.warm_prompts = optarg;
            if (!(ok = access(optarg, R_OK) == 0))
                fprintf(stderr, "error: --warm-prompts %s: %s\n", optarg, strerror(errno));
            break;
        case O_CACHE_TYPE_K:
        case O_CACHE_TYPE_V:
            if (!(ok = infer_kv_type_from_name(optarg, o == O_CACHE_TYPE_K ? &c.kv_type_k : &c.kv_type_v)))
                fprintf(stderr, "error: KV cache type '%s': f16 or q8_0\n", optarg);
            break;
        case O_API_KEY: ok = add_key(&c, optarg); break;
        case O_API_KEY_FILE: ok = read_keys(&c, optarg); break;
        case O_CORS: c.cors_origin = optarg; break;
        case O_BOARD: c.board_name = optarg; break;
        case O_ADMIN_KEY: c.admin_key = optarg; break;
        case O_DRAIN_TIMEOUT:
            if (!(ok = server_parse_duration(optarg, &c.drain_timeout) && c.drain_timeout >= 0))
                fprintf(stderr, "error: bad --drain-timeout '%s' (5m, 30s, 0)\n", optarg);
            break;
        case O_EMBED_MODEL: c.embedding_model_path = optarg; break;
        case O_EMBED_CTX: ok = parse_int(optarg, 2, 1 << 20, &c.embedding_ctx); break;
        case O_RC: c.response_cache = true; break;
        case O_RC_DB: c.response_cache_db = optarg; c.response_cache = true; break;
        case O_RC_TTL:
            ok = server_parse_duration(optarg, &c.response_cache_ttl) && c.response_cache_ttl > 0;
            if (!ok)
                fprintf(stderr, "error: --semantic-cache-ttl: '%s' is not a positive duration (30s, 5m, 24h)\n", optarg);
            break;
        case O_RC_MAX: {
            int v;
            ok = parse_int(optarg, 1, 1 << 30, &v);
            c.response_cache_max_entries = v;
            break;
        }
        case O_TOOL_CHOICE:
            if (!strcmp(optarg, "auto"))
                c.tool_choice = TOOL_CHOICE_AUTO;
            else if (!strcmp(optarg, "required"))
                c.tool_choice = TOOL_CHOICE_REQUIRED;
            else {
                fprintf(stderr, "error: --tool-choice '%s': auto or required\n", optarg);
                ok = false;
            }
            break;
        case O_REASONING_BUDGET:
            ok = parse_int(optarg, -1, 0, &c.reasoning_budget); /* the values llama.cpp has */
            break;
        case O_RC_MAX_BYTES: {
            size_t v;
            ok = parse_size(optarg, &v);
            c.response_cache_max_bytes = v;
            break;
        }
        case O_RC_THRESHOLD:
        case O_RC_MAX_TEMP: {
            char *end;
            double v = strtod(optarg, &end);
            ok = end != optarg && !*end && v >= 0 && v <= (o == O_RC_THRESHOLD ? 1.0 : 2.0) && (o != O_RC_THRESHOLD || v > 0);
            if (!ok)
                fprintf(stderr, "error: --%s: '%s' is not a number in %s\n",
                        o == O_RC_THRESHOLD ? "semantic-cache-threshold" : "semantic-cache-max-temp", optarg,
                        o == O_RC_THRESHOLD ? "(0, 1]" : "[0, 2]");
            else if (o == O_RC_THRESHOLD)
                c.response_cache_threshold = v;
            else
                c.response_cache_max_temp = v;
            break;
        }
        case O_MAX_BODY: ok = parse_size(optarg, &c.max_body); break;
        case O_MAX_PROMPT: ok = parse_int(optarg, 1, 1 << 22, &c.max_prompt_tokens); break;
        case O_MAX_TOKENS: ok = parse_int(optarg, 1, 1 << 22, &c.max_tokens); break;
        case O_TIMEOUT: ok = parse_int(optarg, 1, 86400, &c.timeout); break;
        case O_MAX_CONN: ok = parse_int(optarg, 1, 4096, &c.max_connections); break;
        case 'v': c.verbose = true; break;
        case 'h': printf("%s", help); rc = 0; goto out;
        default: ok = false;
        }
    }
    if (!ok)
        goto out;
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s' (see infer serve --help)\n", argv[optind]);
        goto out;
    }
    const char *env_key = getenv("INFER_API_KEY");
    if (env_key && !add_key(&c, env_key))
        goto out;
    if (!(c.model_path = cli_model_path(model))) {
        rc = 1;
        goto out;
    }
    rc = server_run(&c);
out:
    for (int i = 0; i < c.n_api_keys; i++)
        free(c.api_keys[i]);
    free(c.api_keys);
    return rc;
}
