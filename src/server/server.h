/*
 * server.h - `infer serve`: an OpenAI-compatible HTTP server (internal header).
 *
 * The server lives in the `infer` binary and uses only include/infer.h.  It is
 * four pieces around one mutex:
 *
 *   http.c     libmicrohttpd, one thread per connection: routing, API keys,
 *              CORS, body limits, SSE streaming, error responses
 *   api.c      JSON (jansson): request parsing and validation into a
 *              struct gen_request, response and chunk building
 *   sched.c    the engine thread: it alone touches the model and its
 *              infer_engine; it admits jobs (template, tokenize, validate),
 *              advances every running sequence with one batched
 *              infer_engine_step() per step, unloads after --keep-alive and
 *              reloads
 *   metrics.c  counters and histograms, rendered as Prometheus text
 *
 * A request becomes a `struct job`, shared by its connection thread and the
 * engine thread (reference counted).  The engine appends generated text to
 * the job and signals its condition variable; the connection thread turns
 * the text into SSE chunks or one JSON body.  A connection thread that sees
 * its client gone sets job->cancelled, and the engine drops the sequence
 * before its next step.
 */
#ifndef INFER_SERVER_H
#define INFER_SERVER_H

#include "infer.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* ------------------------------------------------------------ configuration */

/* Tool calls (api_tools.c). */
enum tool_choice { TOOL_CHOICE_DEFAULT, TOOL_CHOICE_AUTO, TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NAMED };
enum tool_format { TOOL_FMT_GENERIC, TOOL_FMT_HERMES, TOOL_FMT_LLAMA3, TOOL_FMT_MISTRAL };

struct server_config {
    const char *model_path;
    const char *model_id;      /* name in /v1/models and the "model" field (default: file name) */
    const char *host;          /* "127.0.0.1" */
    int port;                  /* 0: any free port (printed) */
    int parallel;              /* running sequences at most */
    int queue;                 /* admitted-but-waiting requests at most; more get 503 */
    int n_ctx;                 /* context per sequence (0: min(model, 4096)) */
    int n_batch;               /* tokens per forward pass (decode tokens + prompt chunks) */
    int n_threads;             /* 0: physical cores */
    int kv_block;              /* 0: library default */
    bool mlock;
    bool no_repack; /* --no-repack */
    bool no_prefix_cache;      /* every request from scratch (benchmark baseline) */
    bool no_coalesce;          /* never wait for a concurrent prefill of the same prefix */
    infer_kv_type kv_type_k, kv_type_v; /* KV cache element types */
    const char *chat_template; /* NULL: from the model */
    size_t max_body;           /* bytes */
    int max_prompt_tokens;     /* 0: the context */
    int max_tokens;            /* largest max_tokens accepted and the default */
    double keep_alive;         /* seconds idle before unloading; < 0: forever; 0: after each request */
    const char *cache_dir;     /* disk tier of the prefix cache (survives unloads, restarts) */
    uint64_t cache_high;       /* --cache-high: KV budget in bytes (0: from RAM) */
    const char *warm_prompts;  /* --warm-prompts FILE: prompts prefilled after the first load (warm.c) */
    char **api_keys;           /* n_api_keys keys; none: no authentication */
    int n_api_keys;
    const char *cors_origin;   /* NULL: no CORS headers */
    const char *board_name;    /* X-Infer-Board (NULL: the host name) */
    const char *admin_key;     /* POST /admin/drain needs 'Authorization: Bearer KEY' (NULL: refused) */
    double drain_timeout;      /* seconds a drain may take before the server exits anyway */
    int timeout;               /* seconds of connection inactivity */
    int max_connections;
    bool verbose;
    const char *embedding_model_path; /* --embedding-model: serve POST /v1/embeddings (NULL: 501) */
    int embedding_ctx;         /* tokens per input before truncation (0: the model's maximum) */
    bool response_cache;       /* --semantic-cache: tier 1 (exact) of the response cache */
    const char *response_cache_db; /* NULL: $XDG_CACHE_HOME/infer/responses.sqlite or ~/.cache/infer/... */
    double response_cache_ttl; /* seconds from creation (0: 24 h) */
    int64_t response_cache_max_entries;
    enum tool_choice tool_choice; /* --tool-choice: for requests with tools and no tool_choice (auto) */
    int reasoning_budget;         /* --reasoning-budget: -1 thinking as the model likes, 0 asked not to think */
    uint64_t response_cache_max_bytes;  /* answer bytes (0: 256 MiB) */
    double response_cache_threshold;    /* tier 2's default cosine (0: the embedding model's calibrated one) */
    double response_cache_max_temp;     /* tier 2 only at or below this temperature */
};

/* Parse ollama's keep-alive syntax: "-1" (or any negative) forever, "0",
 * a number of seconds, or a Go duration ("300ms", "30s", "5m", "1h30m").
 * Returns false for anything else. */
bool server_parse_duration(const char *s, double *seconds);

/* Run until SIGINT/SIGTERM.  Returns the process exit status (0 after a clean
 * shutdown; 1 when the model cannot be loaded or the socket bound). */
int server_run(const struct server_config *cfg);

/* ------------------------------------------------------------- requests */

enum gen_kind { GEN_CHAT, GEN_COMPLETION };

#define GEN_MAX_STOP 16
#define GEN_MAX_STOP_LEN 256
#define GEN_MAX_SALT_LEN 256

/* A validated generation request (api.c owns parsing and freeing). */
struct gen_request {
    enum gen_kind kind;
    char *model;               /* as given (NULL: not given) */
    infer_chat_msg *msgs;      /* chat: role/content strings owned here */
    size_t n_msgs;
    char *prompt;              /* completion, text form */
    int32_t *prompt_ids;       /* completion, token form (n_prompt_ids) */
    size_t n_prompt_ids;
    int64_t max_tokens;        /* -1: not given */
    infer_sampler_params sp;
    char *stop[GEN_MAX_STOP];
    int n_stop;
    bool stream;
    bool include_usage;
    char *cache_salt;          /* NULL: none */
    infer_grammar *grammar;    /* structured output / forced tool call (NULL: free text) */
    char *format_key;          /* canonical text of the constraint, for the response cache (NULL: none) */
    /* tools: the request's tools array and messages as sent (rendered at
     * admission, when the model's family is known), NULL without tools or
     * tool turns */
    json_t *tools, *raw_msgs;
    enum tool_choice tool_choice;     /* as asked */
    char *tool_name;                  /* TOOL_CHOICE_NAMED */
    enum tool_choice tool_choice_eff; /* at admission: the default applied (NONE without tools) */
    enum tool_format tool_format;     /* at admission: the family's */
    /* Ollama's /api/chat and /api/generate (api_ollama.c); zero for OpenAI requests */
    enum ollama_api { OLLAMA_NONE, OLLAMA_CHAT, OLLAMA_GENERATE } ollama;
    bool load_only;            /* no prompt/messages: load (or unload) the model, generate nothing */
    int think;                 /* -1 not given, 0 false (no thinking: the template's no-thinking prompt where
                                  it has one; Ollama drops any reasoning), 1 true (reasoning required);
                                  Ollama's think, OpenAI's chat_template_kwargs.enable_thinking */
    bool keep_alive_set;       /* keep_alive given: the model's idle timeout from this request on */
    double keep_alive;         /* seconds, < 0 forever (server_parse_duration) */
    int64_t n_ctx_limit;       /* options.num_ctx: prompt + answer at most this (0: the context) */
};

/* The request asks the model not to think: think false (Ollama), or
 * chat_template_kwargs.enable_thinking false, or neither and the server's
 * --reasoning-budget 0 (the prompt ends with the template's no-thinking
 * text where it has one: infer_chat_reasoning_off). */
static inline bool gen_no_think(const struct gen_request *r, int reasoning_budget)
{
    return r->think == 0 || (r->think < 0 && reasoning_budget == 0);
}

/* An OpenAI-shaped error: HTTP status, message, type and code. */
struct api_error {
    int status;
    const char *type;          /* "invalid_request_error", "authentication_error", ... */
    const char *code;          /* may be NULL */
    char message[512];
};

void api_error_set(struct api_error *e, int status, const char *type, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* {"error": {"message", "type", "code", "param"}} as a NUL-terminated string (caller frees). */
char *api_error_json(const struct api_error *e);

/* The body as a JSON object; NULL with e set (400: not JSON, or not an object). */
json_t *api_load_object(const char *body, size_t len, struct api_error *e);
/* Parse a request body into r.  On error returns false with e filled in
 * (400 for malformed JSON and wrong types or values) and r freed. */
bool api_parse_request(enum gen_kind kind, const char *body, size_t len, struct gen_request *r,
                       struct api_error *e);
void gen_request_free(struct gen_request *r);

/* ------------------------------------------------------ structured outputs */

/* A grammar for a `format`-like field (api_format.c): the string "json" (any
 * JSON object) or a JSON schema.  NULL with e set: 400 naming the schema
 * keyword that cannot be enforced (`what` names the field), 500 when out of
 * memory.  For the Ollama API's "format" as for OpenAI's response_format. */
infer_grammar *api_grammar_from_json(const json_t *format, struct api_error *e, const char *what);
/* OpenAI's response_format of a request body: text, json_object, or
 * json_schema (with strict): sets r->grammar and r->format_key. */
bool api_parse_response_format(json_t *root, struct gen_request *r, struct api_error *e);

/* -------------------------------------------------------------- tool calls */

enum tool_format api_tool_format(infer_chat_family f);
const char *api_tool_format_name(enum tool_format f);
/* tools and tool_choice of a body, and whether the messages hold tool turns
 * (then they are kept in r->raw_msgs).  false with e (400) set. */
bool api_parse_tools(json_t *root, struct gen_request *r, struct api_error *e);
/* At admission: r->msgs rendered for family fam (catalogue in the system
 * turn, assistant tool_calls and role "tool" results in the family's
 * format), tool_choice_eff settled (dflt when tools came without a
 * tool_choice; a dflt of required gives none when the last message is a
 * tool result), and for required / a named function r->grammar set to the
 * call's grammar.  false with e set (400 for parameters the schema compiler
 * refuses). */
bool api_tools_render(struct gen_request *r, infer_chat_family fam, enum tool_choice dflt, struct api_error *e);
/* The calls in a finished answer: [{"name", "arguments": {...}}] (NULL:
 * none, or tools off); *content gets the text around them (malloc'ed, NULL
 * when none). */
json_t *api_tools_parse(const struct gen_request *r, const char *text, size_t len, char **content);
/* How many bytes of a tools request's answer so far, text[0..len), are
 * content for sure and may be streamed before the answer is complete: 0
 * while the answer past leading white space is empty, starts with '{' or
 * '[' (a whole-answer call) or could still become "<tool_call>"; else the
 * text up to its first "<tool_call>", or up to a tail that could begin
 * one.  Never shrinks as the text grows (same prefix, more bytes). */
size_t api_tools_stream_len(const char *text, size_t len);
/* Calls in OpenAI's shape (id "call_<id_base>_<i>", function.arguments as a
 * JSON string); with_index for streamed deltas. */
json_t *api_tool_calls_openai(const json_t *calls, const char *id_base, bool with_index);
/* Calls in Ollama's shape: [{"id": "call_<id_base>_<i>", "function":
 * {"index": i, "name", "arguments": {...}}}] (arguments an object). */
json_t *api_tool_calls_ollama(const json_t *calls, const char *id_base);

/* ------------------------------------------------------------ embeddings */

#define EMBED_MAX_INPUTS 2048 /* items of one request's "input" (OpenAI's limit) */

/* A validated POST /v1/embeddings body (api_embed.c). */
struct embed_request {
    json_t *root;              /* the parsed body: inputs point into it */
    char *model;               /* as given (NULL: not given) */
    const char **inputs;       /* n texts, lens[i] bytes each */
    size_t *lens;
    size_t n;
    bool base64;               /* encoding_format */
};

/* Parse a body; on error returns false with e filled in (400) and r freed. */
bool api_parse_embed_request(const char *body, size_t len, int n_embd, struct embed_request *r,
                             struct api_error *e);
void embed_request_free(struct embed_request *r);
/* The response object for n_embd-float rows vec (one per input). */
json_t *api_embed_response(const struct embed_request *r, const float *vec, int n_embd,
                           const infer_embed_info *info, const char *model_id);

/* -------------------------------------------------------- response cache */

struct job;
struct server;
struct MHD_Connection;

/* Per-request cache controls: Cache-Control: no-cache / no-store, or the
 * body's "cache": {"no-cache": true, "no-store": true, "threshold": x}
 * (rcache.c); sem_bypass names what keeps tier 2 out (n > 1, logprobs,
 * tools), or NULL. */
struct rc_control {
    bool no_cache, no_store;
    double threshold;          /* 0: not given */
    const char *sem_bypass;
};
void rc_control_parse(struct MHD_Connection *c, const char *body, size_t len, struct rc_control *out);
/* The exact tier's key of a validated job; false when the request bypasses
 * it (sampled without a fixed seed). */
bool rc_request_key(const struct server *srv, const struct job *j, uint8_t key[32]);
/* The semantic tier's bucket of a job: NULL and bucket set, or the reason
 * tier 2 does not apply. */
const char *rc_semantic_bucket(const struct server *srv, const struct job *j, const struct rc_control *ctl,
                               uint8_t bucket[32]);
/* The calibrated threshold of an embedding model (by file sha256); *known
 * false: not calibrated, a conservative default. */
float rc_default_threshold(const char *sha256, bool *known);
/* A stored answer made into this request's response (fresh id and created). */
json_t *rc_replay(const char *answer, size_t len, const char *id, int64_t created, double *saved_seconds);
/* A stored chat.completion / text_completion replayed as SSE: role chunk,
 * the text in small pieces, the final chunk with finish_reason, the usage
 * chunk (include_usage) and [DONE].  malloc'ed (NUL-terminated), or NULL. */
char *rc_replay_sse(const json_t *o, bool include_usage, size_t *len);

/* One request's passage through the cache: what was looked up, the headers
 * to send, and what to store once the answer is complete. */
struct rc_pending {
    struct rc_control ctl;
    const char *state;         /* X-Infer-Cache: hit-exact, hit-semantic, miss, bypass */
    const char *sem_bypass;    /* why tier 2 did not apply, or NULL */
    bool have_key, sem;
    uint8_t key[32], bucket[32];
    char *question;            /* normalised last user message (tier 2) */
    float *emb;                /* its embedding */
    char tenant[20];
    char sim[16], gate[112], age[24]; /* header values, "" when not sent */
};
/* Both tiers; a hit returns the response (p->state says which), a miss
 * NULL with p ready for rc_store.  Counts lookups in srv->metrics. */
json_t *rc_lookup(struct server *srv, struct MHD_Connection *c, const char *body, size_t len, const struct job *j,
                  const char *tenant, struct rc_pending *p);
/* After a generation: store o (the non-streamed response) when the job
 * ended complete (finish stop, no error, not cancelled) and no-store was
 * not asked; counts stores and skips by reason. */
void rc_store(struct server *srv, struct rc_pending *p, const struct job *j, const json_t *o);
/* Header name/value pairs of p into h (at least 9 slots), NULL-terminated. */
void rc_headers(const struct rc_pending *p, const char **h);
void rc_pending_free(struct rc_pending *p);

/* ----------------------------------------------------------------- jobs */

enum finish_reason { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_ERROR, FINISH_TOOL_CALLS };

enum job_state {
    JOB_NEW,        /* in the inbox, not yet looked at by the engine */
    JOB_WAITING,    /* admitted (tokenized, valid), waiting for a free sequence */
    JOB_RUNNING,    /* prefill or decode */
    JOB_DONE,       /* finished (finish says how), or failed (err.status != 0) */
};

/* The path of a generation request: the layers it hit (DESIGN.md: every
 * response is labelled with them).  Model: was it mapped when the request
 * came (warm), loaded for it at start (load), or loaded again after
 * --keep-alive unloaded it (reload).  Prefix: tokens taken from the prefix
 * cache in RAM, read from its disk tier, or none (miss).  The class is
 * "<model>+<prefix>", e.g. "warm+ram"; /metrics has a TTFT histogram each. */
enum path_model { PATH_MODEL_WARM, PATH_MODEL_LOAD, PATH_MODEL_RELOAD, PATH_MODEL_N };
enum path_prefix { PATH_PREFIX_MISS, PATH_PREFIX_RAM, PATH_PREFIX_DISK, PATH_PREFIX_N };
#define PATH_N_CLASSES (PATH_MODEL_N * PATH_PREFIX_N)
const char *path_model_name(int model);
const char *path_prefix_name(int prefix);

/* Figures reported in `usage` and `timings`. */
struct job_stats {
    int path_model;            /* enum path_model */
    double load_ms;            /* the model load this request waited for (load, reload) */
    int64_t disk_tokens;       /* of cached_tokens, read from the disk tier (whole blocks) */
    int64_t prompt_tokens;
    int64_t cached_tokens;     /* of prompt_tokens, taken from the prefix cache */
    int64_t coalesced_tokens;  /* of cached_tokens (RAM), attached from a concurrent request's prefill */
    int64_t completion_tokens;
    double prompt_ms;          /* evaluating the uncached prompt tokens */
    double predicted_ms;       /* first token to last */
    double ttft_ms;            /* arrival to first generated token */
};

struct job {
    /* fixed at creation */
    struct gen_request req;
    char id[40];               /* "chatcmpl-..." */
    int64_t created;           /* unix time */
    double t_arrival;          /* infer_now_seconds() */
    char salt[80];             /* tenant salt (API key) + "/" + cache_salt hash, "" if none */

    /* below: under server.mu */
    int refs;
    enum job_state state;
    bool cancelled;            /* client gone: engine drops it */
    pthread_cond_t cv;         /* signalled on new text, state change */
    char *text;                /* generated text released so far */
    size_t text_len, text_cap;
    enum finish_reason finish;
    struct api_error err;      /* err.status != 0: failed */
    struct job_stats stats;
    double t_done;             /* infer_now_seconds() when it finished */
    struct job *next;          /* inbox / waiting list link */

    /* engine thread only, from admission on (the markers are read by the
     * connection once text or the end shows, under mu) */
    const char *think_open, *think_close; /* a thinking model's reasoning markers (chat), or NULL */
    bool think_forced;                    /* the prompt opened the reasoning (the template does) */
    bool think_closed;                    /* the prompt closed it (asked not to think: gen_no_think) */
    int32_t *tokens;           /* the prompt, tokenized (n_tokens) */
    int64_t n_tokens;
    int64_t max_gen;           /* completion tokens allowed */
    bool admitted;
};

/* ---------------------------------------------------------------- metrics */

#define HIST_MAX_BUCKETS 16

struct histogram {
    const double *bounds;      /* upper bounds, ascending (n) */
    int n;
    uint64_t counts[HIST_MAX_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t count;
};

#define METRICS_MAX_REQ 64

struct server_metrics {
    struct {
        char endpoint[24];
        int code;
        uint64_t n;
    } req[METRICS_MAX_REQ];
    int n_req;
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    uint64_t rejected_queue_full, disconnects;
    uint64_t model_loads, model_unloads;
    double model_load_seconds;             /* last load */
    uint64_t embed_inputs, embed_tokens, embed_truncated;
    double embed_seconds;
    uint64_t rc_hits, rc_hits_semantic, rc_misses, rc_bypass, rc_stores, rc_store_errors;
    uint64_t rc_skip_no_store, rc_skip_not_stop, rc_skip_error; /* answers not stored, by reason */
    double rc_seconds_saved;                     /* generation time of the answers replayed */
    uint64_t rc_prompt_tokens_saved, rc_completion_tokens_saved;
    uint64_t rc_embeds, rc_searches;             /* tier 2: questions embedded, buckets searched */
    double rc_embed_seconds, rc_search_seconds;
    struct histogram rc_similarity;              /* nearest similarity of every tier-2 lookup */
    struct histogram ttft, decode_rate, duration, prompt_rate;
    struct histogram ttft_path[PATH_N_CLASSES]; /* by class: model * PATH_PREFIX_N + prefix */
};

void metrics_init(struct server_metrics *m);
void metrics_count_request(struct server_metrics *m, const char *endpoint, int code);
void hist_observe(struct histogram *h, double v);

/* Gauges sampled at scrape time. */
struct server_gauges {
    int running, queued, parallel, queue_cap;
    int model_state;               /* 0 unloaded, 1 loading, 2 loaded, 3 failed */
    uint64_t model_bytes, model_resident_bytes;
    infer_cache_metrics cache;      /* the engine's (zero while unloaded) */
    infer_cache_metrics cache_base; /* counters of engines freed by unloads */
    const uint64_t *experts;        /* MoE: tokens routed per (layer, expert), valid under mu */
    size_t n_experts_total;
    int n_experts;
    bool prefix_cache;
    double keep_alive;
    double idle_seconds;
    bool rc_on;                     /* the response cache's store figures below are valid */
    infer_respcache_stats rc;
};

/* Prometheus text exposition format 0.0.4 (caller frees). */
char *metrics_render(const struct server_metrics *m, const struct server_gauges *g);

/* ---------------------------------------------------------------- engine */

struct sched;

struct server {
    const struct server_config *cfg;
    pthread_mutex_t mu;            /* jobs, queues, metrics, state */
    struct server_metrics metrics;
    struct sched *sched;
    char model_id[128];
    char board[128];           /* X-Infer-Board: --board-name or the host name */
    int64_t model_created;
    volatile int stop;
    infer_embedder *embedder;      /* --embedding-model, loaded at start (read-only, thread-safe) */
    pthread_mutex_t embed_mu;      /* one embedding batch at a time: they use every core */
    char embed_id[128];
    int64_t embed_created;
    infer_respcache *rcache;       /* --semantic-cache, or NULL */
    volatile int draining;         /* after SIGTERM or POST /admin/drain: /health 503, still serving */
    double drain_start;            /* when it began (infer_now_seconds) */
    char embed_sha[65];            /* sha256 of the embedding model's file (its identity) */
    float rc_threshold;            /* the semantic tier's default threshold */
    bool rc_semantic;              /* tier 2 is on (cache, embedding model and its index) */
    infer_embedder *rc_embedder;   /* the same model on one thread, for tier 2's one-question
                                    * embeddings (no wait for embed_mu, no spinning threads) */
    struct ollama_model *ollama_models; /* the chat model, then the embedding model if any (http_ollama.c) */
    int n_ollama_models;
    pthread_mutex_t digest_mu;     /* computing their sha256 digests (once, on first use) */
};

/* Start the engine thread, which loads the model at once (sched_model_state
 * says when it is done).  Returns 0, or -1 with a message on stderr. */
int sched_start(struct server *srv);
/* Stop the engine thread: in-flight jobs finish with an error (503), the
 * model is freed.  New submissions are refused from then on. */
void sched_stop(struct server *srv);
/* Free what sched_stop left (after no connection thread can touch it). */
void sched_free(struct server *srv);
/* Hand a job to the engine (takes a reference).  Returns false (job
 * untouched) when the queue is full. Caller holds srv->mu. */
bool sched_submit(struct server *srv, struct job *j);
/* Wake the engine (a job was cancelled).  Caller holds srv->mu. */
void sched_kick(struct server *srv);
/* Snapshot of the engine's gauges; caller holds srv->mu. */
void sched_gauges(struct server *srv, struct server_gauges *g);
/* 0 unloaded, 1 loading, 2 loaded, 3 failed; caller holds srv->mu. */
int sched_model_state(struct server *srv);

/* pthread_cond_init on CLOCK_MONOTONIC; wait at most `seconds` (mu held). */
void cond_init_monotonic(pthread_cond_t *cv);
void cond_wait_for(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds);

struct job *job_new(void);
/* Drop a reference; caller holds srv->mu.  The last one frees the job. */
void job_unref(struct job *j);
/* Append generated text (caller holds srv->mu).  false when out of memory. */
bool job_append_text(struct job *j, const char *s, size_t n);

/* --------------------------------------------------- response building */

const char *finish_reason_name(enum finish_reason f);
/* A whole non-streamed response (chat.completion or text_completion). */
json_t *api_response(const struct job *j, const char *model_id);
/* One SSE chunk: text delta (may be empty); first adds the assistant role
 * (chat); finish != FINISH_NONE adds finish_reason and timings. */
json_t *api_chunk(const struct job *j, const char *model_id, const char *text, size_t len, const char *reasoning,
                  size_t n_reasoning, bool first,
                  enum finish_reason finish);
/* The chunk of a finished answer's tool calls (delta.tool_calls, and as
 * content the text around them), NULL when the answer is not tool calls.
 * Only j->text from byte `from` on is looked at: what was streamed already
 * as content (api_tools_stream_len) is not sent again. */
json_t *api_tool_calls_chunk(const struct job *j, const char *model_id, size_t from);
/* The splitter of a chat job's output into reasoning and answer, in the
 * state the prompt left it in (opened, closed, or neither); NULL when out of
 * memory. */
infer_reasoning *job_reasoning_new(const struct job *j);

/* Where the answer of a finished chat job starts in j->text: after a thinking
 * model's reasoning, which is split off as the reasoning splitter does (0
 * without markers; j->text_len when the text ends inside the reasoning).
 * *reasoning (may be NULL) gets the reasoning, malloc'ed, or NULL when there
 * is none (or no memory).  Tool calls are looked for in the answer only. */
size_t api_answer_start(const struct job *j, char **reasoning);
/* The final usage-only chunk of stream_options.include_usage. */
json_t *api_usage_chunk(const struct job *j, const char *model_id);
json_t *api_usage(const struct job_stats *s);
json_t *api_timings(const struct job_stats *s);
/* The path class of a finished request (enum path_prefix from its stats). */
int api_path_prefix(const struct job_stats *s);
/* X-Infer-Path: "class=warm+ram; model=warm; ram=N; disk=N; computed=N" into buf. */
const char *api_path_header(const struct job_stats *s, char *buf, size_t n);

/* --warm-prompts (warm.c): prefill the prompts of cfg->warm_prompts into
 * engine e (one per line: a JSON string, a raw prompt, or an object with
 * "messages" rendered by the chat template, or "prompt").  Lines that fail
 * are reported and skipped; returns the number prefilled. */
int warm_prompts_run(const struct server_config *cfg, infer_model *m, infer_engine *e, infer_chat_family fam);

/* ------------------------------------------------------------ Ollama API */

/* api.c's field checks, shared with api_ollama.c (same contracts as the
 * OpenAI parser: absent or null leaves *out alone; false with e set). */
json_t *api_field(json_t *o, const char *key); /* NULL when absent or null */
/* A 400 invalid_value with fmt's one %s filled by key; returns false. */
bool api_bad(struct api_error *e, const char *fmt, const char *key);
bool api_get_real(json_t *o, const char *key, double lo, double hi, float *out, struct api_error *e);
bool api_get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, struct api_error *e);
bool api_get_bool(json_t *o, const char *key, bool *out, struct api_error *e);
bool api_get_string(json_t *o, const char *key, size_t max_len, char **out, struct api_error *e);
bool api_parse_stop(json_t *o, struct gen_request *r, struct api_error *e);
bool api_parse_messages(json_t *o, struct gen_request *r, struct api_error *e);

/* The version /api/version reports: the Ollama API release whose shapes
 * api_ollama.c follows (clients compare it), not infer's own version. */
#define OLLAMA_API_VERSION "0.12.0"

/* Parse the body of POST /api/chat or /api/generate into r (api_ollama.c).
 * On error returns false with e filled in (400 for malformed JSON, wrong
 * types, unknown or unsupported options) and r freed. */
bool ollama_parse_request(enum ollama_api api, const char *body, size_t len, struct gen_request *r,
                          struct api_error *e);
/* {"error": message} (caller frees). */
char *ollama_error_json(const struct api_error *e);
/* One streamed line (done: false) with this text and reasoning. */
json_t *ollama_chunk(const struct job *j, const char *model, const char *text, size_t len, const char *reasoning,
                     size_t n_reasoning);
/* The last streamed line: done, done_reason and the measured durations. */
json_t *ollama_final(const struct job *j, const char *model);
/* The whole answer of "stream": false (message.tool_calls when the answer
 * is tool calls; done_reason "stop" then, as Ollama says). */
json_t *ollama_response(const struct job *j, const char *model);
/* A finished tools answer, streamed: the line (done: false) carrying
 * message.tool_calls, or NULL when the answer is not tool calls.  Only
 * j->text from byte `from` on is looked at (what was streamed already as
 * content, api_tools_stream_len, is not sent again). */
json_t *ollama_tool_calls_chunk(const struct job *j, const char *model, size_t from);
/* RFC 3339 UTC time with nanoseconds (Go's time.Time JSON) of unix time t into buf. */
void ollama_time(double t, char buf[40]);

/* A GGUF file served under an Ollama name: what /api/tags, /api/show and
 * /api/ps say about it, read once from its metadata at start. */
struct ollama_model {
    char name[144];            /* "ALIAS:latest" (or ALIAS when it has a tag already) */
    const char *path;
    int64_t size, mtime;
    char family[64], parameter_size[32], quantization_level[32];
    int64_t context_length;
    bool embedding, thinking;
    char *template_text;       /* tokenizer.chat_template, or NULL */
    json_t *model_info;        /* the scalar metadata, for /api/show */
    char digest[72];           /* "sha256:..." once computed ("" until then) */
};
/* Read path's metadata into m (name from id).  A file that does not parse is
 * described by its name, size and time alone (the engine's load reports why);
 * false only when out of memory. */
bool ollama_model_init(struct ollama_model *m, const char *path, const char *id, bool embedding);
void ollama_model_free(struct ollama_model *m);
/* Does name ("x", "x:latest") name the model with id / file path? */
bool ollama_name_matches(const char *name, const char *id, const char *path);
json_t *ollama_details(const struct ollama_model *m);
json_t *ollama_show(const struct ollama_model *m);
/* The body of a request naming a model ("model", or the older "name"):
 * the name (a copy; caller frees) or NULL with e set (400). */
char *ollama_request_model(const char *body, size_t len, struct api_error *e);

/* http_ollama.c: the routes under /api/ and GET / */
enum ollama_route {
    OR_NONE, OR_CHAT, OR_GENERATE, OR_TAGS, OR_SHOW, OR_PS, OR_VERSION, OR_EMBED, OR_EMBEDDINGS,
    OR_UNSUPPORTED, OR_ROOT,
};
/* The route of method + url; OR_NONE with *endpoint set to a label when the
 * path is Ollama's but the method is not (405), left alone otherwise. */
enum ollama_route ollama_route_of(const char *method, const char *url, const char **endpoint);
struct conn_ctx;
/* Answer a whole request of one of the non-generating routes (an MHD_Result). */
int ollama_handle(struct conn_ctx *ctx, enum ollama_route route);
/* The served models' descriptions, read at start.  false: the server cannot start. */
bool ollama_init(struct server *srv);
void ollama_free(struct server *srv);

/* http.c, for http_ollama.c (MHD_Result as int) */
struct server *http_server(const struct conn_ctx *ctx);
const char *http_body(const struct conn_ctx *ctx, size_t *len);
int http_respond_json(struct conn_ctx *ctx, int status, json_t *o);
int http_respond_error(struct conn_ctx *ctx, const struct api_error *e);
int http_respond_text(struct conn_ctx *ctx, int status, const char *ctype, const char *text);
/* Embed r's inputs with the server's embedder (one batch at a time) and
 * count them in the metrics.  vec (n x n_embd) and info are the caller's to
 * free.  false with e set (and nothing to free) on failure. */
bool server_embed_run(struct server *srv, const struct embed_request *r, float **vec, infer_embed_info **info,
                      double *seconds, struct api_error *e);

#endif
