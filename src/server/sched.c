/*
 * sched.c - the engine thread of `infer serve`: the only thread that touches
 * the model.
 *
 * Jobs arrive in an inbox (sched_submit, from connection threads).  Between
 * two steps the engine
 *
 *   1. loads the model if it is not loaded (after --keep-alive unloaded it),
 *   2. admits the inbox: renders the chat template, tokenizes, checks the
 *      prompt against the context and max_tokens; a bad job is finished with
 *      its 400, a good one joins the waiting list (bounded by --queue),
 *   3. drops cancelled jobs (client gone) and frees their sequences,
 *   4. moves waiting jobs into free sequence slots (at most --parallel),
 *   5. runs one step (backend_step) over every running slot, outside the
 *      lock, then publishes the text each produced and finishes the jobs
 *      that ended (EOG, stop sequence, max_tokens, context full).
 *
 * All sequences live in one infer_engine: one KV arena, one prefix cache.
 * A job gets a session of its own (salted with its tenant's salt) when it
 * starts and loses it when it ends or its client leaves, so its blocks are
 * unpinned at once and stay cached for the next request with the same
 * prefix.  backend_step() is the one place that decides how sequences share
 * a forward pass: one infer_engine_step() per step evaluates the next token
 * of every decoding sequence and, in the rest of the --batch-size budget,
 * chunks of pending prompts (continuous batching).
 *
 * When idle for --keep-alive the engine and the model are freed (the
 * weights unmapped, the prefix cache written to --cache-dir if given); the
 * next request loads them again.
 */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MODEL_UNLOADED = 0, MODEL_LOADING = 1, MODEL_LOADED = 2, MODEL_FAILED = 3 };

/* A running sequence: one job and its session in the shared engine. */
struct slot {
    struct job *job;           /* NULL: free */
    infer_session *sess;       /* created for the job, freed when it ends */
    infer_sampler *smp;
    infer_detok *detok;
    int64_t n_prompt, n_cached, n_gen;
    bool prefilled;            /* the prompt is evaluated (first logits seen) */
    bool coalescing;           /* the session waits for another's prefill of its prefix: the job
                                  stays JOB_WAITING (its stream headers carry the cached tokens) */
    double t_prefill, t_prompt_end, t_first;
    char *gen;                 /* generated text (gen_len); [0, emitted) may be published */
    size_t gen_len, gen_cap, emitted, published;
    bool stop_hit;             /* a stop sequence ended the text */
    enum finish_reason finish;
    struct api_error err;
};

struct sched {
    struct server *srv;
    pthread_t thread;
    bool started;
    pthread_cond_t cv;         /* wakes the engine */
    struct job *inbox, *inbox_tail;
    struct job *waiting, *waiting_tail;
    int n_inbox, n_waiting, n_running;
    int model_state;
    bool warmed;               /* --warm-prompts done (after the first load only) */
    double idle_since;         /* last time the engine became idle */
    double keep_alive;         /* idle seconds before unloading (< 0: never): --keep-alive, or the
                                  keep_alive of the last request that gave one (ollama's rule) */
    infer_cache_metrics cm;    /* engine figures, copied after every step (under mu) */
    infer_cache_metrics base;  /* counters of engines already freed (unloads) */
    uint64_t model_bytes;
    /* MoE models: tokens routed to each expert (layer-major), base + the
     * engine's, copied with cm (under mu); experts_base: engines freed */
    uint64_t *experts, *experts_base;
    size_t n_experts_total;
    int n_experts;

    /* engine thread only */
    infer_model *model;
    infer_engine *engine;
    infer_chat_family fam;
    const char *think_open, *think_close; /* reasoning markers, NULL when the model has none */
    bool think_forced; /* the template's generation prompt opens the reasoning */
    char think_off[64]; /* what ends the prompt of a turn asked not to think ("": no such switch) */
    int n_vocab, n_ctx;
    struct slot *slots;
    int n_slots;
    infer_session **step_sess; /* (n_slots) scratch for infer_engine_step */
    infer_status *step_status;
    int *step_slot;
};

/* ------------------------------------------------------------ utilities */

void cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

void cond_wait_for(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (seconds > 1e6)
        seconds = 1e6;
    long long ns = ts.tv_nsec + (long long)(seconds * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(cv, mu, &ts);
}

struct job *job_new(void)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->refs = 1;
    cond_init_monotonic(&j->cv);
    return j;
}

void job_unref(struct job *j)
{
    if (!j || --j->refs > 0)
        return;
    gen_request_free(&j->req);
    pthread_cond_destroy(&j->cv);
    free(j->text);
    free(j->tokens);
    free(j);
}

bool job_append_text(struct job *j, const char *s, size_t n)
{
    if (j->text_len + n + 1 > j->text_cap) {
        size_t cap = (j->text_len + n + 1) * 2;
        char *t = realloc(j->text, cap);
        if (!t)
            return false;
        j->text = t;
        j->text_cap = cap;
    }
    memcpy(j->text + j->text_len, s, n);
    j->text_len += n;
    j->text[j->text_len] = '\0';
    return true;
}

static bool buf_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = (*len + n + 1) * 2;
        char *b = realloc(*buf, c);
        if (!b)
            return false;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return true;
}

/* Finish a job (caller holds mu): it leaves every list; the engine's reference is dropped. */
static void job_finish(struct server *srv, struct job *j)
{
    (void)srv;
    j->state = JOB_DONE;
    j->t_done = infer_now_seconds();
    pthread_cond_broadcast(&j->cv);
    job_unref(j);
}

static void job_fail(struct server *srv, struct job *j, int status, const char *type, const char *code,
                     const char *msg)
{
    api_error_set(&j->err, status, type, code, "%s", msg);
    j->finish = FINISH_ERROR;
    job_finish(srv, j);
}

/* ------------------------------------------------------ model lifetime */

static void engine_log(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "serve: engine: %s\n", msg);
}

/* Counters survive unloads: what a freed engine counted moves to base. */
static void metrics_fold(infer_cache_metrics *base, const infer_cache_metrics *m)
{
    base->queries += m->queries;
    base->hits += m->hits;
    base->query_tokens += m->query_tokens;
    base->hit_tokens += m->hit_tokens;
    base->hit_blocks += m->hit_blocks;
    base->reused_tokens += m->reused_tokens;
    base->prefill_tokens += m->prefill_tokens;
    base->prefill_seconds += m->prefill_seconds;
    base->decode_tokens += m->decode_tokens;
    base->decode_seconds += m->decode_seconds;
    base->evictions += m->evictions;
    base->disk_reads += m->disk_reads;
    base->disk_writes += m->disk_writes;
    base->disk_read_bytes += m->disk_read_bytes;
    base->disk_write_bytes += m->disk_write_bytes;
    base->disk_errors += m->disk_errors;
    base->disk_write_errors += m->disk_write_errors;
    base->coalesced_requests += m->coalesced_requests;
    base->coalesced_tokens += m->coalesced_tokens;
    base->coalesce_fallbacks += m->coalesce_fallbacks;
}

/* Free the engine (its cache goes to --cache-dir if there is one) and the
 * model (the weights are unmapped).  No slot may be in use. */
/* s->experts = the freed engines' counts + the current engine's (under mu). */
static void experts_copy(struct sched *s)
{
    const size_t n = s->engine ? infer_engine_expert_counts(s->engine, NULL, 0) : 0;
    if (n == 0)
        return;
    if (n != s->n_experts_total) { /* first load, or another model shape: start over */
        uint64_t *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
        if (!a || !b) {
            free(a);
            free(b);
            return;
        }
        free(s->experts);
        free(s->experts_base);
        s->experts = a;
        s->experts_base = b;
        s->n_experts_total = n;
        s->n_experts = infer_model_n_experts(s->model);
    }
    infer_engine_expert_counts(s->engine, s->experts, n);
    for (size_t i = 0; i < n; i++)
        s->experts[i] += s->experts_base[i];
}

static void model_unload(struct sched *s)
{
    if (s->engine) {
        infer_cache_metrics m;
        infer_engine_get_metrics(s->engine, &m);
        pthread_mutex_lock(&s->srv->mu);
        metrics_fold(&s->base, &m);
        memset(&s->cm, 0, sizeof(s->cm));
        experts_copy(s);
        if (s->experts)
            memcpy(s->experts_base, s->experts, s->n_experts_total * sizeof(*s->experts));
        pthread_mutex_unlock(&s->srv->mu);
    }
    infer_engine_free(s->engine);
    s->engine = NULL;
    infer_model_free(s->model);
    s->model = NULL;
}

/* Load the model and make the engine.  Runs without the lock. */
static bool model_load(struct sched *s, char *err, size_t err_len)
{
    const struct server_config *cfg = s->srv->cfg;
    infer_model_params mp = {.flags = (cfg->mlock ? INFER_GGUF_OPEN_MLOCK : 0) |
                                      (cfg->no_repack ? INFER_MODEL_NO_REPACK : 0)};
    double t0 = infer_now_seconds();
    /* Test hook: stay "loading" this long, so that the tests can watch
     * /health answer 503 while a (normally quick) mmap load is under way. */
    const char *delay = getenv("INFER_TEST_LOAD_DELAY_MS");
    if (delay) {
        long ms = strtol(delay, NULL, 10);
        if (ms > 0 && ms <= 60000)
            nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
    }
    if (infer_model_load(&s->model, cfg->model_path, &mp) != INFER_OK) {
        snprintf(err, err_len, "loading %s: %s", cfg->model_path, infer_last_error());
        return false;
    }
    bool warned = false;
    s->fam = infer_chat_detect(infer_model_gguf(s->model), cfg->chat_template, &warned);
    if (warned && cfg->verbose)
        fprintf(stderr, "serve: chat template: %s\n", infer_last_error());
    for (const char *const *mk = infer_chat_eot_markers(s->fam); mk && *mk; mk++)
        infer_model_add_eog(s->model, *mk);
    s->think_open = s->think_close = NULL;
    infer_chat_reasoning_markers(infer_model_gguf(s->model), &s->think_open, &s->think_close);
    s->think_forced =
        s->think_open && infer_chat_reasoning_forced(infer_model_gguf(s->model), cfg->chat_template, s->think_open);
    if (!s->think_open || !infer_chat_reasoning_off(infer_model_gguf(s->model), cfg->chat_template, s->think_open,
                                                    s->think_close, s->think_forced, s->think_off,
                                                    sizeof(s->think_off)))
        s->think_off[0] = '\0';
    s->n_vocab = infer_model_n_vocab(s->model);
    infer_engine_params ep;
    infer_engine_params_default(&ep);
    ep.n_ctx = cfg->n_ctx;
    ep.n_batch = cfg->n_batch;
    ep.n_threads = cfg->n_threads;
    ep.kv_block = cfg->kv_block;
    ep.n_seq = s->n_slots;
    ep.cache_dir = cfg->cache_dir;
    ep.cache_high = cfg->cache_high;
    ep.no_prefix_cache = cfg->no_prefix_cache;
    ep.no_coalesce = cfg->no_coalesce;
    ep.kv_type_k = cfg->kv_type_k;
    ep.kv_type_v = cfg->kv_type_v;
    ep.log = engine_log;
    infer_session *probe = NULL;
    if (infer_engine_new(&s->engine, s->model, &ep) != INFER_OK ||
        infer_session_new_in(&probe, s->engine, NULL) != INFER_OK) {
        snprintf(err, err_len, "creating the engine: %s", infer_last_error());
        model_unload(s);
        return false;
    }
    s->n_ctx = infer_session_n_ctx(probe);
    infer_session_free(probe);
    infer_residency r;
    char note[1024];
    if (infer_gguf_probe_pages(infer_model_gguf(s->model), &r) == INFER_OK) {
        s->model_bytes = r.bytes_total;
        if (infer_residency_small_pages(&r))
            fprintf(stderr, "serve: %s\n", infer_small_pages_note(cfg->model_path, note, sizeof(note)));
    }
    infer_repack_info ri;
    infer_model_repack_info(s->model, &ri);
    if (strcmp(ri.state, "none") != 0)
        fprintf(stderr, "serve: %s\n", infer_model_repack_summary(s->model));
    double dt = infer_now_seconds() - t0;
    pthread_mutex_lock(&s->srv->mu);
    s->srv->metrics.model_loads++;
    s->srv->metrics.model_load_seconds = dt;
    infer_engine_get_metrics(s->engine, &s->cm);
    experts_copy(s);
    pthread_mutex_unlock(&s->srv->mu);
    fprintf(stderr,
            "serve: model %s loaded in %.0f ms (%s, chat template %s, %d sequences of %d tokens, KV %s/%s, prefix "
            "cache %s)\n",
            s->srv->model_id, dt * 1e3, infer_model_arch(s->model), infer_chat_family_name(s->fam), s->n_slots,
            s->n_ctx, infer_kv_type_name(cfg->kv_type_k), infer_kv_type_name(cfg->kv_type_v),
            cfg->no_prefix_cache ? "off" : "on");
    return true;
}

/* ------------------------------------------------------------ admission */

static int64_t tokenize(const infer_model *m, const char *text, int32_t **out)
{
    size_t len = strlen(text);
    int64_t cap = (int64_t)len + 16;
    *out = malloc((size_t)cap * sizeof(int32_t));
    if (!*out)
        return INFER_ERR_NOMEM;
    int64_t n = infer_model_tokenize(m, text, len, true, true, *out, cap);
    if (n > cap) {
        int32_t *t = realloc(*out, (size_t)n * sizeof(int32_t));
        if (!t)
            return INFER_ERR_NOMEM;
        *out = t;
        n = infer_model_tokenize(m, text, len, true, true, *out, n);
    }
    return n;
}

/* Template, tokenize, check limits.  false with j->err set. */
static bool admit(struct sched *s, struct job *j)
{
    const struct server_config *cfg = s->srv->cfg;
    const struct gen_request *r = &j->req;
    struct api_error *e = &j->err;
    int64_t n;
    if (r->think == 1 && r->ollama && r->kind == GEN_CHAT && !s->think_open) { /* Ollama's answer */
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "\"%s\" does not support thinking",
                      r->model ? r->model : s->srv->model_id);
        return false;
    }
    if (r->load_only) /* ollama's load/unload request: nothing to evaluate */
        return true;
    if (r->kind == GEN_CHAT) {
        j->think_open = s->think_open;
        j->think_close = s->think_close;
        j->think_forced = s->think_forced;
        /* an assistant turn sent back whole (a client that knows nothing of
         * reasoning_content): its reasoning is dropped, as the model's own
         * template does, so the prompt is the one its answer alone gives
         * (and its cached prefix).  The strings are the request's own. */
        for (size_t i = 0; s->think_close && i < r->n_msgs; i++)
            if (!strcmp(r->msgs[i].role, "assistant")) {
                char *c = (char *)r->msgs[i].content;
                const char *answer = infer_reasoning_answer(c, s->think_close);
                if (answer != c)
                    memmove(c, answer, strlen(answer) + 1);
            }
        /* tools and tool turns: rendered in the family's format */
        if (!api_tools_render(&j->req, s->fam, cfg->tool_choice == TOOL_CHOICE_REQUIRED ? TOOL_CHOICE_REQUIRED
                                                                                        : TOOL_CHOICE_AUTO,
                              e))
            return false;
        n = infer_model_tokenize_chat(s->model, s->fam, r->msgs, r->n_msgs, true, &j->tokens);
        if (n == INFER_ERR_INVALID) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value", "messages: %s", infer_last_error());
            return false;
        }
        if (n > 0 && s->think_off[0] && gen_no_think(r, cfg->reasoning_budget)) {
            /* asked not to think: the template's no-thinking prompt (the
             * reasoning closed before it starts, as llama.cpp renders it) */
            n = infer_model_tokenize_append(s->model, s->think_off, &j->tokens, n);
            j->think_forced = false;
            j->think_closed = true;
        } else if (n > 0 && s->think_forced) { /* as the template: the answer starts inside the reasoning */
            char open_nl[40];
            snprintf(open_nl, sizeof(open_nl), "%s\n", s->think_open);
            n = infer_model_tokenize_append(s->model, open_nl, &j->tokens, n);
        }
    } else if (r->prompt) {
        n = tokenize(s->model, r->prompt, &j->tokens);
    } else {
        for (size_t i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] >= s->n_vocab) {
                api_error_set(e, 400, "invalid_request_error", "invalid_value",
                              "prompt[%zu]: token id %d is outside the vocabulary of %d", i, r->prompt_ids[i],
                              s->n_vocab);
                return false;
            }
        n = (int64_t)r->n_prompt_ids;
        j->tokens = malloc((size_t)n * sizeof(int32_t));
        if (j->tokens)
            memcpy(j->tokens, r->prompt_ids, (size_t)n * sizeof(int32_t));
        else
            n = INFER_ERR_NOMEM;
    }
    if (n < 0) {
        api_error_set(e, n == INFER_ERR_NOMEM ? 500 : 400, n == INFER_ERR_NOMEM ? "server_error"
                                                                               : "invalid_request_error",
                      NULL, "tokenizing the prompt: %s", infer_last_error());
        return false;
    }
    j->n_tokens = n;
    if (n == 0) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "the prompt is empty");
        return false;
    }
    /* the context of this request: the sequence's, or less (ollama's num_ctx) */
    const int n_ctx = r->n_ctx_limit > 1 && r->n_ctx_limit < s->n_ctx ? (int)r->n_ctx_limit : s->n_ctx;
    int64_t limit = n_ctx - 1;
    if (cfg->max_prompt_tokens > 0 && cfg->max_prompt_tokens < limit)
        limit = cfg->max_prompt_tokens;
    if (n > limit) {
        api_error_set(e, 400, "invalid_request_error", "context_length_exceeded",
                      "the prompt has %lld tokens, more than the %lld allowed (context of %d tokens)", (long long)n,
                      (long long)limit, n_ctx);
        return false;
    }
    if (r->max_tokens > 0 && n + r->max_tokens > n_ctx && !r->ollama) { /* ollama's num_predict: up to the end */
        api_error_set(e, 400, "invalid_request_error", "context_length_exceeded",
                      "this model's context is %d tokens, but %lld were requested (%lld in the prompt, %lld in "
                      "the completion)",
                      n_ctx, (long long)(n + r->max_tokens), (long long)n, (long long)r->max_tokens);
        return false;
    }
    j->max_gen = r->max_tokens > 0 ? r->max_tokens : cfg->max_tokens;
    if (j->max_gen > n_ctx - n)
        j->max_gen = n_ctx - n;
    j->stats.prompt_tokens = n;
    return true;
}

/* ----------------------------------------------------------------- slots */

static int slot_free_index(struct sched *s)
{
    for (int i = 0; i < s->n_slots; i++)
        if (!s->slots[i].job)
            return i;
    return -1;
}

/* Free the job's sequence at once: its blocks stay in the prefix cache. */
static void slot_release(struct slot *sl)
{
    infer_sampler_free(sl->smp);
    infer_detok_free(sl->detok);
    infer_session_free(sl->sess);
    sl->smp = NULL;
    sl->detok = NULL;
    sl->sess = NULL;
    sl->job = NULL;
}

/* Attach job j to slot sl: a session in the engine (with the job's tenant
 * salt), the prompt's cached prefix attached and the rest queued. */
static bool slot_attach(struct sched *s, struct slot *sl, struct job *j)
{
    memset(&sl->err, 0, sizeof(sl->err));
    sl->finish = FINISH_NONE;
    sl->job = j;
    infer_session_params sp;
    infer_session_params_default(&sp);
    sp.cache_salt = j->salt[0] ? j->salt : NULL;
    int64_t reused = 0;
    infer_status st;
    infer_cache_metrics m0, m1;
    infer_engine_get_metrics(s->engine, &m0);
    if ((st = infer_session_new_in(&sl->sess, s->engine, &sp)) != INFER_OK ||
        (st = infer_session_prepare(sl->sess, j->tokens, j->n_tokens, &reused)) != INFER_OK) {
        if (st == INFER_ERR_FULL || st == INFER_ERR_NOMEM)
            api_error_set(&sl->err, 503, "server_error", "kv_cache_full", "no KV memory for the prompt: %s",
                          infer_last_error());
        else
            api_error_set(&sl->err, 500, "server_error", NULL, "%s", infer_last_error());
        return false;
    }
    if (infer_sampler_new(&sl->smp, &j->req.sp) != INFER_OK || !(sl->detok = infer_detok_new(s->model)) ||
        (j->req.grammar && infer_sampler_set_grammar(sl->smp, s->model, j->req.grammar) != INFER_OK)) {
        api_error_set(&sl->err, 500, "server_error", NULL, "out of memory");
        return false;
    }
    sl->n_prompt = j->n_tokens;
    sl->n_cached = reused;
    sl->n_gen = 0;
    sl->prefilled = false;
    sl->gen_len = sl->emitted = sl->published = 0;
    sl->stop_hit = false;
    sl->t_prefill = infer_now_seconds();
    sl->t_prompt_end = sl->t_first = 0;
    sl->coalescing = infer_session_waiting(sl->sess);
    j->stats.cached_tokens = reused;
    j->stats.coalesced_tokens = 0;
    /* blocks the disk tier supplied (a partly used last block counts whole) */
    infer_engine_get_metrics(s->engine, &m1);
    int64_t disk = (m1.disk_reads - m0.disk_reads) * m1.block_tokens;
    j->stats.disk_tokens = disk < reused ? disk : reused;
    return true;
}

/* How many trailing bytes of text could still become a stop sequence. */
static size_t stop_holdback(const struct gen_request *r, const char *text, size_t len)
{
    size_t hold = 0;
    for (int i = 0; i < r->n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--)
            if (!memcmp(text + len - k, r->stop[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* Add a piece of generated text; true when a stop sequence ended it. */
static bool slot_add_text(struct slot *sl, const char *piece, size_t n)
{
    const struct gen_request *r = &sl->job->req;
    size_t before = sl->gen_len;
    if (!buf_append(&sl->gen, &sl->gen_len, &sl->gen_cap, piece, n)) {
        api_error_set(&sl->err, 500, "server_error", NULL, "out of memory");
        sl->finish = FINISH_ERROR;
        return true;
    }
    size_t cut = SIZE_MAX;
    for (int i = 0; i < r->n_stop; i++) {
        size_t stl = strlen(r->stop[i]);
        size_t from = before >= stl ? before - stl + 1 : 0;
        const char *hit = memmem(sl->gen + from, sl->gen_len - from, r->stop[i], stl);
        if (hit && (size_t)(hit - sl->gen) < cut)
            cut = (size_t)(hit - sl->gen);
    }
    if (cut != SIZE_MAX) {
        sl->stop_hit = true;
        sl->gen_len = cut;
        sl->gen[cut] = '\0';
        sl->emitted = cut;
        return true;
    }
    sl->emitted = sl->gen_len - stop_holdback(r, sl->gen, sl->gen_len);
    return false;
}

/* Sample the next token from the slot's logits and decide whether it goes on. */
static void slot_sample(struct sched *s, struct slot *sl)
{
    const float *logits = infer_session_logits(sl->sess);
    const infer_sampler_params *sp = &sl->job->req.sp;
    int32_t id = -1;
    if (logits && sp->temp <= 0.0f && sp->repeat_penalty == 1.0f && !sl->job->req.grammar) {
        /* greedy: the first largest logit, as the sampler picks it, without
         * its copy of the whole vocabulary (1.3 ms for 262k tokens, per
         * token and sequence, on the engine thread) */
        id = infer_argmax(logits, s->n_vocab);
    } else if (logits) {
        id = infer_sampler_sample(sl->smp, logits, s->n_vocab);
    }
    double now = infer_now_seconds();
    if (sl->n_gen == 0)
        sl->t_first = now;
    if (id < 0) {
        api_error_set(&sl->err, 500, "server_error", NULL, "sampling failed");
        sl->finish = FINISH_ERROR;
        return;
    }
    infer_sampler_accept(sl->smp, id);
    if (infer_model_is_eog(s->model, id)) {
        sl->finish = FINISH_STOP;
        return;
    }
    sl->n_gen++;
    char piece[256];
    size_t k = infer_detok_push(sl->detok, id, piece, sizeof(piece));
    if (slot_add_text(sl, piece, k)) {
        if (sl->finish == FINISH_NONE)
            sl->finish = FINISH_STOP;
        return;
    }
    if (infer_sampler_grammar_state(sl->smp) == INFER_GRAMMAR_DONE) { /* nothing may follow: no EOS step */
        sl->finish = FINISH_STOP;
        return;
    }
    if (sl->n_gen >= sl->job->max_gen || infer_session_n_tokens(sl->sess) + 1 > s->n_ctx ||
        infer_session_push(sl->sess, &id, 1) != INFER_OK)
        sl->finish = FINISH_LENGTH;
}

/* The end of a generation: flush the detokenizer (unless a stop sequence
 * cut the text) and release the held-back text. */
static void slot_flush(struct slot *sl)
{
    if (sl->finish == FINISH_ERROR)
        return;
    if (!sl->stop_hit && sl->detok && sl->smp && infer_sampler_grammar_state(sl->smp) == INFER_GRAMMAR_OPEN) {
        /* cut by max_tokens or the context: close the JSON with the grammar's
         * shortest ending, so that the answer still parses and validates
         * (finish_reason stays "length") */
        size_t n = infer_sampler_grammar_close(sl->smp, NULL, 0);
        char *tail = malloc(n + 1), *piece = malloc(n + 512);
        if (tail && piece) {
            infer_sampler_grammar_close(sl->smp, tail, n);
            size_t k = infer_detok_push_text(sl->detok, tail, n, piece, n + 512);
            slot_add_text(sl, piece, k);
        }
        free(tail);
        free(piece);
    }
    if (!sl->stop_hit && sl->detok) {
        char piece[256];
        size_t k = infer_detok_flush(sl->detok, piece, sizeof(piece));
        if (k && slot_add_text(sl, piece, k) && sl->finish == FINISH_LENGTH)
            sl->finish = FINISH_STOP;
    }
    if (sl->finish != FINISH_ERROR)
        sl->emitted = sl->gen_len;
}

/* ------------------------------------------------------------------ step */

/* One forward pass over every running sequence (infer_engine_step): each
 * decoding sequence gets its next token and the rest of the --batch-size
 * budget goes to prompt chunks, so prefill interleaves with decoding.
 * Sequences whose queue emptied have logits: sample them.  Runs without the
 * lock. */
static void backend_step(struct sched *s)
{
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->job && sl->finish == FINISH_NONE && infer_session_n_pending(sl->sess) > 0) {
            s->step_sess[n] = sl->sess;
            s->step_slot[n] = i;
            n++;
        }
    }
    if (n == 0)
        return;
    int64_t n_tok = 0;
    infer_status st = infer_engine_step(s->engine, s->step_sess, n, s->step_status, &n_tok);
    for (int k = 0; k < n; k++) {
        struct slot *sl = &s->slots[s->step_slot[k]];
        if (st != INFER_OK) {
            api_error_set(&sl->err, 500, "server_error", NULL, "evaluation failed: %s", infer_last_error());
            sl->finish = FINISH_ERROR;
        } else if (s->step_status[k] == INFER_ERR_FULL && n_tok == 0) {
            /* no KV block for anyone, even after eviction: fail rather than spin */
            if (sl->prefilled) {
                sl->finish = FINISH_LENGTH;
            } else {
                api_error_set(&sl->err, 503, "server_error", "kv_cache_full",
                              "the KV cache is full; retry later or lower --parallel");
                sl->finish = FINISH_ERROR;
            }
        } else if (s->step_status[k] != INFER_OK && s->step_status[k] != INFER_ERR_FULL) {
            api_error_set(&sl->err, 500, "server_error", NULL, "evaluation failed");
            sl->finish = FINISH_ERROR;
        } else if (infer_session_n_pending(sl->sess) == 0) {
            if (!sl->prefilled) {
                sl->prefilled = true;
                sl->t_prompt_end = infer_now_seconds();
            }
            slot_sample(s, sl);
        }
        if (sl->finish != FINISH_NONE)
            slot_flush(sl);
    }
}

/* ---------------------------------------------------------- engine loop */

/* Publish new text and finish ended jobs (caller holds mu). */
static void publish(struct sched *s)
{
    struct server *srv = s->srv;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        struct job *j = sl->job;
        if (!j)
            continue;
        if (sl->coalescing && !infer_session_waiting(sl->sess)) {
            /* the wait for another request's prefill ended: the tokens it
             * supplied count as RAM hits, the prompt time starts now */
            infer_session_stats ss;
            infer_session_get_stats(sl->sess, &ss);
            sl->coalescing = false;
            sl->n_cached += ss.last_coalesced_tokens;
            sl->t_prefill = infer_now_seconds();
            j->stats.cached_tokens += ss.last_coalesced_tokens;
            j->stats.coalesced_tokens = ss.last_coalesced_tokens;
            j->state = JOB_RUNNING;
            pthread_cond_broadcast(&j->cv);
        }
        if (sl->emitted > sl->published) {
            if (!job_append_text(j, sl->gen + sl->published, sl->emitted - sl->published)) {
                api_error_set(&sl->err, 500, "server_error", NULL, "out of memory");
                sl->finish = FINISH_ERROR;
            }
            sl->published = sl->emitted;
            pthread_cond_broadcast(&j->cv);
        }
        if (sl->finish == FINISH_NONE && !j->cancelled)
            continue;
        double now = infer_now_seconds();
        struct job_stats *st = &j->stats;
        st->completion_tokens = sl->n_gen;
        double t_pe = sl->t_prompt_end > 0 ? sl->t_prompt_end : now;
        st->prompt_ms = (t_pe - sl->t_prefill) * 1e3;
        st->predicted_ms = sl->t_prompt_end > 0 ? (now - sl->t_prompt_end) * 1e3 : 0;
        st->ttft_ms = sl->t_first > 0 ? (sl->t_first - j->t_arrival) * 1e3 : 0;
        struct server_metrics *m = &srv->metrics;
        m->prompt_tokens += (uint64_t)st->prompt_tokens;
        m->cached_tokens += (uint64_t)st->cached_tokens;
        m->generated_tokens += (uint64_t)st->completion_tokens;
        if (sl->t_first > 0) {
            hist_observe(&m->ttft, st->ttft_ms / 1e3);
            int pm = st->path_model, pp = api_path_prefix(st);
            hist_observe(&m->ttft_path[pm * PATH_PREFIX_N + pp], st->ttft_ms / 1e3);
            fprintf(stderr, "serve: %s %s+%s ttft=%.1fms prompt=%lld (ram %lld, disk %lld, computed %lld) gen=%lld%s\n",
                    j->id, path_model_name(pm), path_prefix_name(pp), st->ttft_ms, (long long)st->prompt_tokens,
                    (long long)(st->cached_tokens - st->disk_tokens), (long long)st->disk_tokens,
                    (long long)(st->prompt_tokens - st->cached_tokens), (long long)st->completion_tokens,
                    st->path_model != PATH_MODEL_WARM ? " (waited for the model load)" : "");
        }
        if (sl->n_gen > 1 && now > sl->t_first)
            hist_observe(&m->decode_rate, (double)(sl->n_gen - 1) / (now - sl->t_first));
        if (st->prompt_ms > 0 && sl->t_prompt_end > 0)
            hist_observe(&m->prompt_rate, (double)(st->prompt_tokens - st->cached_tokens) * 1e3 / st->prompt_ms);
        hist_observe(&m->duration, now - j->t_arrival);
        j->finish = sl->finish == FINISH_NONE ? FINISH_ERROR : sl->finish;
        if (sl->finish == FINISH_ERROR)
            j->err = sl->err;
        if (j->req.keep_alive_set)
            s->keep_alive = j->req.keep_alive;
        slot_release(sl);
        s->n_running--;
        job_finish(srv, j);
    }
    if (s->engine) {
        infer_engine_get_metrics(s->engine, &s->cm);
        experts_copy(s);
    }
}

static void fail_all(struct sched *s, struct job **list, struct job **tail, int *count, int status,
                     const char *msg)
{
    while (*list) {
        struct job *j = *list;
        *list = j->next;
        job_fail(s->srv, j, status, "server_error", NULL, msg);
    }
    *tail = NULL;
    *count = 0;
}

static void list_push(struct job **head, struct job **tail, struct job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static void *engine_main(void *arg)
{
    struct sched *s = arg;
    struct server *srv = s->srv;
    const struct server_config *cfg = srv->cfg;
    pthread_mutex_lock(&srv->mu);
    while (!srv->stop) {
        /* 1. load when there is work (or at start) */
        if (s->model_state != MODEL_LOADED && (s->n_inbox > 0 || s->model_state == MODEL_LOADING)) {
            s->model_state = MODEL_LOADING;
            pthread_mutex_unlock(&srv->mu);
            char err[512];
            double t_load = infer_now_seconds();
            bool ok = model_load(s, err, sizeof(err));
            if (ok && cfg->warm_prompts && !s->warmed) {
                warm_prompts_run(cfg, s->model, s->engine, s->fam);
                s->warmed = true;
            }
            t_load = infer_now_seconds() - t_load;
            pthread_mutex_lock(&srv->mu);
            s->model_state = ok ? MODEL_LOADED : MODEL_FAILED;
            if (!ok) {
                fprintf(stderr, "serve: error: %s\n", err);
                fail_all(s, &s->inbox, &s->inbox_tail, &s->n_inbox, 503, err);
            }
            /* the requests that waited for this load: its own class (and Ollama's load_duration) */
            for (struct job *j = s->inbox; ok && j; j = j->next) {
                j->stats.path_model = srv->metrics.model_loads > 1 ? PATH_MODEL_RELOAD : PATH_MODEL_LOAD;
                j->stats.load_ms = t_load * 1e3;
            }
            s->idle_since = infer_now_seconds();
            continue;
        }
        /* 2. admit the inbox */
        if (s->n_inbox > 0) {
            struct job *list = s->inbox;
            s->inbox = s->inbox_tail = NULL;
            s->n_inbox = 0;
            pthread_mutex_unlock(&srv->mu);
            for (struct job *j = list; j; j = j->next)
                j->admitted = admit(s, j);
            pthread_mutex_lock(&srv->mu);
            while (list) {
                struct job *j = list;
                list = j->next;
                if (!j->admitted) {
                    j->finish = FINISH_ERROR;
                    job_finish(srv, j);
                } else if (j->req.load_only) { /* loaded: done; its keep_alive starts now */
                    if (j->req.keep_alive_set)
                        s->keep_alive = j->req.keep_alive;
                    if (s->n_running == 0)
                        s->idle_since = infer_now_seconds();
                    j->finish = FINISH_STOP;
                    job_finish(srv, j);
                } else {
                    j->state = JOB_WAITING;
                    list_push(&s->waiting, &s->waiting_tail, j);
                    s->n_waiting++;
                    pthread_cond_broadcast(&j->cv);
                }
            }
        }
        /* 3. drop cancelled waiting jobs */
        for (struct job **pp = &s->waiting, *prev = NULL; *pp;) {
            struct job *j = *pp;
            if (j->cancelled) {
                *pp = j->next;
                if (s->waiting_tail == j)
                    s->waiting_tail = prev;
                s->n_waiting--;
                j->finish = FINISH_ERROR;
                job_finish(srv, j);
            } else {
                prev = j;
                pp = &j->next;
            }
        }
        /* 4. fill free slots, first come first served */
        while (s->waiting && s->model_state == MODEL_LOADED) {
            struct job *j = s->waiting;
            int si = slot_free_index(s);
            if (si < 0)
                break;
            s->waiting = j->next;
            if (!s->waiting)
                s->waiting_tail = NULL;
            s->n_waiting--;
            struct slot *sl = &s->slots[si];
            if (!slot_attach(s, sl, j)) {
                j->err = sl->err;
                slot_release(sl);
                j->finish = FINISH_ERROR;
                job_finish(srv, j);
                continue;
            }
            /* a coalescing job stays JOB_WAITING until its wait ends (publish) */
            j->state = sl->coalescing ? JOB_WAITING : JOB_RUNNING;
            s->n_running++;
            pthread_cond_broadcast(&j->cv);
        }
        /* 5. step, or wait */
        if (s->n_running > 0) {
            publish(s); /* cancelled jobs leave before the step */
            pthread_mutex_unlock(&srv->mu);
            backend_step(s);
            pthread_mutex_lock(&srv->mu);
            publish(s);
            if (s->n_running == 0 && !s->waiting && !s->inbox)
                s->idle_since = infer_now_seconds();
            continue;
        }
        if (s->n_inbox > 0 || s->waiting)
            continue;
        double wait = 3600;
        if (s->model_state == MODEL_LOADED && s->keep_alive >= 0) {
            double left = s->idle_since + s->keep_alive - infer_now_seconds();
            if (left <= 0) {
                pthread_mutex_unlock(&srv->mu);
                model_unload(s);
                pthread_mutex_lock(&srv->mu);
                s->model_state = MODEL_UNLOADED;
                srv->metrics.model_unloads++;
                    if (cfg->verbose)
                    fprintf(stderr, "serve: idle for %.0f s: model unloaded\n", s->keep_alive);
                continue;
            }
            wait = left;
        }
        cond_wait_for(&s->cv, &srv->mu, wait);
    }
    /* shutting down: everything still in flight ends with an error */
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->job) {
            struct job *j = sl->job;
            slot_release(sl);
            job_fail(srv, j, 503, "server_error", NULL, "the server is shutting down");
        }
    }
    s->n_running = 0;
    fail_all(s, &s->inbox, &s->inbox_tail, &s->n_inbox, 503, "the server is shutting down");
    fail_all(s, &s->waiting, &s->waiting_tail, &s->n_waiting, 503, "the server is shutting down");
    pthread_mutex_unlock(&srv->mu);
    model_unload(s);
    return NULL;
}

/* ------------------------------------------------------------ interface */

int sched_start(struct server *srv)
{
    struct sched *s = calloc(1, sizeof(*s));
    if (!s)
        return -1;
    s->srv = srv;
    s->n_slots = srv->cfg->parallel > 0 ? srv->cfg->parallel : 1;
    s->slots = calloc((size_t)s->n_slots, sizeof(*s->slots));
    s->step_sess = calloc((size_t)s->n_slots, sizeof(*s->step_sess));
    s->step_status = calloc((size_t)s->n_slots, sizeof(*s->step_status));
    s->step_slot = calloc((size_t)s->n_slots, sizeof(*s->step_slot));
    if (!s->slots || !s->step_sess || !s->step_status || !s->step_slot) {
        free(s->slots);
        free(s->step_sess);
        free(s->experts);
        free(s->experts_base);
        free(s->step_status);
        free(s->step_slot);
        free(s);
        return -1;
    }
    cond_init_monotonic(&s->cv);
    s->model_state = MODEL_LOADING;
    s->keep_alive = srv->cfg->keep_alive;
    srv->sched = s;
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0) {
        fprintf(stderr, "serve: error: cannot start the engine thread: %s\n", strerror(errno));
        srv->sched = NULL;
        free(s->slots);
        free(s->step_sess);
        free(s->experts);
        free(s->experts_base);
        free(s->step_status);
        free(s->step_slot);
        free(s);
        return -1;
    }
    s->started = true;
    return 0;
}

void sched_stop(struct server *srv)
{
    struct sched *s = srv->sched;
    if (!s)
        return;
    pthread_mutex_lock(&srv->mu);
    srv->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&srv->mu);
    if (s->started)
        pthread_join(s->thread, NULL);
    s->started = false;
}

void sched_free(struct server *srv)
{
    struct sched *s = srv->sched;
    if (!s)
        return;
    for (int i = 0; i < s->n_slots; i++) {
        free(s->slots[i].gen);
    }
    free(s->slots);
    free(s->step_sess);
    free(s->experts);
    free(s->experts_base);
    free(s->step_status);
    free(s->step_slot);
    pthread_cond_destroy(&s->cv);
    free(s);
    srv->sched = NULL;
}

bool sched_submit(struct server *srv, struct job *j)
{
    struct sched *s = srv->sched;
    int cap = srv->cfg->queue > 0 ? srv->cfg->queue : 0;
    if (srv->stop || s->n_inbox + s->n_waiting >= cap + (s->n_slots - s->n_running))
        return false;
    j->refs++;
    j->state = JOB_NEW;
    list_push(&s->inbox, &s->inbox_tail, j);
    s->n_inbox++;
    pthread_cond_broadcast(&s->cv);
    return true;
}

void sched_kick(struct server *srv)
{
    pthread_cond_broadcast(&srv->sched->cv);
}

int sched_model_state(struct server *srv)
{
    return srv->sched ? srv->sched->model_state : MODEL_LOADING;
}

void sched_gauges(struct server *srv, struct server_gauges *g)
{
    struct sched *s = srv->sched;
    memset(g, 0, sizeof(*g));
    g->running = s->n_running;
    g->queued = s->n_inbox + s->n_waiting;
    g->parallel = s->n_slots;
    g->queue_cap = srv->cfg->queue;
    g->model_state = s->model_state;
    g->model_bytes = s->model_bytes;
    /* residency is asked of the file (mincore on a fresh map), so it is
     * right whether or not the model is loaded */
    infer_residency r;
    if (infer_file_residency(srv->cfg->model_path, &r) == INFER_OK) {
        g->model_bytes = r.bytes_total;
        g->model_resident_bytes = r.bytes_resident;
    }
    g->cache = s->cm;
    g->cache_base = s->base;
    g->experts = s->experts;
    g->n_experts_total = s->n_experts_total;
    g->n_experts = s->n_experts;
    g->prefix_cache = !srv->cfg->no_prefix_cache;
    g->keep_alive = s->keep_alive;
    g->idle_seconds = s->n_running == 0 && s->n_waiting == 0 ? infer_now_seconds() - s->idle_since : 0;
}
