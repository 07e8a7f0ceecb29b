/*
 * metrics.c - server counters and histograms, rendered for GET /metrics in
 * the Prometheus text exposition format (version 0.0.4).
 *
 * Everything is updated under server.mu; gauges (running, queued, KV use,
 * model residency) are sampled from the engine at scrape time.  Every name
 * is prefixed infer_.  The prefix-cache figures are those the engine
 * reports: requests looked up, requests with a hit, prompt tokens reused.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double ttft_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
static const double rate_bounds[] = {0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
static const double duration_bounds[] = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
static const double prompt_rate_bounds[] = {1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000};
static const double similarity_bounds[] = {0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0};

#define HIST_INIT(h, b) ((h).bounds = (b), (h).n = (int)(sizeof(b) / sizeof((b)[0])))

void metrics_init(struct server_metrics *m)
{
    memset(m, 0, sizeof(*m));
    HIST_INIT(m->ttft, ttft_bounds);
    HIST_INIT(m->decode_rate, rate_bounds);
    HIST_INIT(m->duration, duration_bounds);
    HIST_INIT(m->prompt_rate, prompt_rate_bounds);
    for (int i = 0; i < PATH_N_CLASSES; i++)
        HIST_INIT(m->ttft_path[i], ttft_bounds);
    HIST_INIT(m->rc_similarity, similarity_bounds);
}

void hist_observe(struct histogram *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void metrics_count_request(struct server_metrics *m, const char *endpoint, int code)
{
    for (int i = 0; i < m->n_req; i++)
        if (m->req[i].code == code && !strcmp(m->req[i].endpoint, endpoint)) {
            m->req[i].n++;
            return;
        }
    if (m->n_req == METRICS_MAX_REQ)
        return;
    snprintf(m->req[m->n_req].endpoint, sizeof(m->req[0].endpoint), "%s", endpoint);
    m->req[m->n_req].code = code;
    m->req[m->n_req].n = 1;
    m->n_req++;
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(FILE *f, const char *name, const char *help, double v)
{
    head(f, name, "counter", help);
    fprintf(f, "%s %.17g\n", name, v);
}

/* A counter family with one label: name{label="keys[i]"} vals[i]. */
static void labelled(FILE *f, const char *name, const char *help, const char *label, const char *const *keys,
                     const uint64_t *vals, int n)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s{%s=\"%s\"} %llu\n", name, label, keys[i], (unsigned long long)vals[i]);
}

static void gauge(FILE *f, const char *name, const char *help, double v)
{
    head(f, name, "gauge", help);
    fprintf(f, "%s %.17g\n", name, v);
}

/* The engine's prefix-cache figures; counters add those of engines freed
 * by earlier unloads, so they never go back. */
static void prefix_cache(FILE *f, const struct server_gauges *g)
{
    const infer_cache_metrics *c = &g->cache, *b = &g->cache_base;
    gauge(f, "infer_prefix_cache_enabled", "1 unless the server runs with --no-prefix-cache.", g->prefix_cache);
    counter(f, "infer_prefix_cache_queries_total", "Prompts looked up in the prefix cache.",
            (double)(c->queries + b->queries));
    counter(f, "infer_prefix_cache_hits_total", "Prompts that reused at least one cached block.",
            (double)(c->hits + b->hits));
    counter(f, "infer_prefix_cache_query_tokens_total", "Prompt tokens looked up.",
            (double)(c->query_tokens + b->query_tokens));
    counter(f, "infer_prefix_cache_hit_tokens_total", "Prompt tokens found in the cache (memory or disk).",
            (double)(c->hit_tokens + b->hit_tokens));
    counter(f, "infer_prefix_cache_hit_blocks_total", "KV blocks found in the cache.",
            (double)(c->hit_blocks + b->hit_blocks));
    int64_t qt = c->query_tokens + b->query_tokens;
    gauge(f, "infer_prefix_cache_hit_ratio", "Hit tokens over looked-up tokens.",
          qt ? (double)(c->hit_tokens + b->hit_tokens) / (double)qt : 0.0);
    counter(f, "infer_prefix_cache_reused_tokens_total", "Prompt tokens not recomputed.",
            (double)(c->reused_tokens + b->reused_tokens));
    counter(f, "infer_prefix_coalesced_requests_total",
            "Requests that waited for another request's prefill of their prefix instead of computing it.",
            (double)(c->coalesced_requests + b->coalesced_requests));
    counter(f, "infer_prefix_coalesced_tokens_total",
            "Prompt tokens attached from a concurrent request's prefill (prefill saved by coalescing).",
            (double)(c->coalesced_tokens + b->coalesced_tokens));
    counter(f, "infer_prefix_coalesce_fallbacks_total",
            "Coalescing waits that ended early (the other request stopped); the rest was computed.",
            (double)(c->coalesce_fallbacks + b->coalesce_fallbacks));
    gauge(f, "infer_prefix_cache_blocks", "Blocks in the prefix cache.", (double)c->cached_blocks);
    counter(f, "infer_prefix_cache_evictions_total", "Blocks evicted.", (double)(c->evictions + b->evictions));
    gauge(f, "infer_prefix_cache_evictions_per_minute", "Blocks evicted over the last minute.",
          c->evictions_per_minute);
    gauge(f, "infer_prefix_cache_ttft_cold_avg_seconds", "Mean time to first logits without a hit.",
          c->ttft_cold_avg);
    gauge(f, "infer_prefix_cache_ttft_hit_avg_seconds", "Mean time to first logits with a hit.", c->ttft_hit_avg);
    counter(f, "infer_prefill_tokens_total", "Prompt tokens computed.",
            (double)(c->prefill_tokens + b->prefill_tokens));
    counter(f, "infer_prefill_seconds_total", "Seconds spent on prompt tokens.",
            c->prefill_seconds + b->prefill_seconds);
    counter(f, "infer_decode_tokens_total", "Tokens decoded.", (double)(c->decode_tokens + b->decode_tokens));
    counter(f, "infer_decode_seconds_total", "Seconds spent decoding.", c->decode_seconds + b->decode_seconds);
    gauge(f, "infer_prefix_cache_disk_enabled", "1 with --cache-dir.", c->disk_enabled);
    counter(f, "infer_prefix_cache_disk_reads_total", "Blocks read from the disk tier.",
            (double)(c->disk_reads + b->disk_reads));
    counter(f, "infer_prefix_cache_disk_writes_total", "Blocks written to the disk tier.",
            (double)(c->disk_writes + b->disk_writes));
    gauge(f, "infer_prefix_cache_disk_bytes", "Bytes of the disk tier.", (double)c->disk_bytes);
    counter(f, "infer_prefix_cache_disk_errors_total", "Cache files ignored (foreign, truncated, corrupt).",
            (double)(c->disk_errors + b->disk_errors));
    counter(f, "infer_prefix_cache_disk_write_errors_total", "Blocks the disk tier could not write (full disk, I/O).",
            (double)(c->disk_write_errors + b->disk_write_errors));
}

/* One histogram's series; label is "" or `name="value",` (with the comma). */
static void hist_series(FILE *f, const char *name, const char *label, const struct histogram *h)
{
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        fprintf(f, "%s_bucket{%sle=\"%g\"} %llu\n", name, label, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    size_t ll = strlen(label);
    fprintf(f, "%s_bucket{%sle=\"+Inf\"} %llu\n%s_sum%s%.*s%s %.17g\n%s_count%s%.*s%s %llu\n", name, label,
            (unsigned long long)cum, name, ll ? "{" : "", ll ? (int)ll - 1 : 0, label, ll ? "}" : "", h->sum, name,
            ll ? "{" : "", ll ? (int)ll - 1 : 0, label, ll ? "}" : "", (unsigned long long)h->count);
}

static void hist(FILE *f, const char *name, const char *help, const struct histogram *h)
{
    head(f, name, "histogram", help);
    hist_series(f, name, "", h);
}

/* TTFT by path class (sched.c: model warm/load/reload x prefix miss/ram/disk). */
static void hist_paths(FILE *f, const struct server_metrics *m)
{
    const char *name = "infer_time_to_first_token_by_path_seconds";
    head(f, name, "histogram",
         "Time to first token by the layers a request hit: class=<model>+<prefix>, model warm (mapped), load "
         "(loaded for it at start) or reload (after --keep-alive), prefix ram, disk or miss.");
    for (int mo = 0; mo < PATH_MODEL_N; mo++)
        for (int pr = 0; pr < PATH_PREFIX_N; pr++) {
            char label[64];
            snprintf(label, sizeof(label), "class=\"%s+%s\",", path_model_name(mo), path_prefix_name(pr));
            hist_series(f, name, label, &m->ttft_path[mo * PATH_PREFIX_N + pr]);
        }
}

char *metrics_render(const struct server_metrics *m, const struct server_gauges *g)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    head(f, "infer_requests_total", "counter", "HTTP requests by endpoint and status code.");
    for (int i = 0; i < m->n_req; i++)
        fprintf(f, "infer_requests_total{endpoint=\"%s\",code=\"%d\"} %llu\n", m->req[i].endpoint, m->req[i].code,
                (unsigned long long)m->req[i].n);
    counter(f, "infer_requests_rejected_total", "Generation requests refused because the queue was full.",
            (double)m->rejected_queue_full);
    counter(f, "infer_client_disconnects_total", "Generations stopped because the client went away.",
            (double)m->disconnects);
    gauge(f, "infer_requests_running", "Sequences being evaluated (prefill or decode).", g->running);
    gauge(f, "infer_requests_queued", "Admitted requests waiting for a free sequence.", g->queued);
    gauge(f, "infer_parallel_max", "Sequences run at once at most (--parallel).", g->parallel);
    gauge(f, "infer_queue_max", "Requests that may wait at most (--queue).", g->queue_cap);

    counter(f, "infer_prompt_tokens_total", "Prompt tokens of finished requests.", (double)m->prompt_tokens);
    counter(f, "infer_prompt_tokens_cached_total", "Prompt tokens taken from the prefix cache.",
            (double)m->cached_tokens);
    counter(f, "infer_generated_tokens_total", "Tokens generated.", (double)m->generated_tokens);
    counter(f, "infer_embedding_inputs_total", "Inputs embedded (POST /v1/embeddings).", (double)m->embed_inputs);
    counter(f, "infer_embedding_tokens_total", "Tokens embedded.", (double)m->embed_tokens);
    counter(f, "infer_embedding_truncated_total", "Inputs cut to the embedding model's maximum.",
            (double)m->embed_truncated);
    counter(f, "infer_embedding_seconds_total", "Seconds spent embedding.", m->embed_seconds);
    static const char *const results[] = {"hit-exact", "hit-semantic", "miss", "bypass"};
    const uint64_t lookups[] = {m->rc_hits, m->rc_hits_semantic, m->rc_misses, m->rc_bypass};
    labelled(f, "infer_response_cache_lookups_total", "Generation requests by response-cache result.", "result",
             results, lookups, 4);
    counter(f, "infer_response_cache_stores_total", "Answers stored in the response cache.", (double)m->rc_stores);
    counter(f, "infer_response_cache_store_errors_total", "Answers the store could not write.",
            (double)m->rc_store_errors);
    static const char *const skips[] = {"no-store", "not-complete", "error"};
    const uint64_t skipped[] = {m->rc_skip_no_store, m->rc_skip_not_stop, m->rc_skip_error};
    labelled(f, "infer_response_cache_skipped_total", "Answers not stored, by reason.", "reason", skips, skipped, 3);
    if (g->rc_on) {
        static const char *const why[] = {"expired", "capacity", "purged", "embedding-model"};
        const uint64_t evicted[] = {g->rc.expired, g->rc.evicted, g->rc.purged, g->rc.evicted_model};
        labelled(f, "infer_response_cache_evictions_total", "Stored answers removed, by reason.", "reason", why,
                 evicted, 4);
        gauge(f, "infer_response_cache_entries", "Unexpired stored answers.", (double)g->rc.entries);
        gauge(f, "infer_response_cache_bytes", "Bytes of the unexpired stored answers.", (double)g->rc.bytes);
        gauge(f, "infer_response_cache_semantic_rows", "Questions in the semantic index.",
              (double)g->rc.semantic_rows);
        gauge(f, "infer_response_cache_storing", "1 while answers are stored (0 after a write failure).",
              g->rc.storing ? 1.0 : 0.0);
    }
    static const char *const kinds[] = {"prompt", "completion"};
    const uint64_t saved[] = {m->rc_prompt_tokens_saved, m->rc_completion_tokens_saved};
    labelled(f, "infer_response_cache_tokens_saved_total", "Tokens of the replayed answers, by kind.", "kind", kinds,
             saved, 2);
    counter(f, "infer_response_cache_embed_seconds_total", "Seconds embedding questions for the semantic tier.",
            m->rc_embed_seconds);
    counter(f, "infer_response_cache_embeds_total", "Questions embedded for the semantic tier.", (double)m->rc_embeds);
    counter(f, "infer_response_cache_search_seconds_total", "Seconds in semantic searches (scan, gate, read).",
            m->rc_search_seconds);
    counter(f, "infer_response_cache_searches_total", "Semantic searches.", (double)m->rc_searches);
    hist(f, "infer_response_cache_nearest_similarity", "Nearest stored question's cosine, per semantic lookup.",
              &m->rc_similarity);
    counter(f, "infer_response_cache_seconds_saved_total", "Generation seconds of the answers replayed.",
            m->rc_seconds_saved);
    prefix_cache(f, g);

    hist(f, "infer_time_to_first_token_seconds", "Arrival of a request to its first generated token.", &m->ttft);
    hist_paths(f, m);
    hist(f, "infer_decode_tokens_per_second", "Decode rate of each finished request.", &m->decode_rate);
    hist(f, "infer_prompt_tokens_per_second", "Prefill rate of each request (uncached tokens).", &m->prompt_rate);
    hist(f, "infer_request_duration_seconds", "Arrival to end of each generation request.", &m->duration);

    const infer_cache_metrics *c = &g->cache;
    gauge(f, "infer_kv_bytes_used", "Bytes of KV blocks in use (running sequences and the prefix cache).",
          (double)c->kv_bytes_in_use);
    gauge(f, "infer_kv_bytes_cached", "Of those, bytes held by the prefix cache alone (evictable).",
          (double)c->kv_bytes_cached);
    gauge(f, "infer_kv_bytes_capacity", "Bytes of the KV arena.", (double)c->kv_bytes_capacity);
    gauge(f, "infer_kv_usage_ratio", "KV bytes in use over the arena.",
          c->kv_bytes_capacity ? (double)c->kv_bytes_in_use / (double)c->kv_bytes_capacity : 0.0);
    gauge(f, "infer_kv_cache_high_bytes", "High watermark: eviction starts above it.", (double)c->cache_high);
    gauge(f, "infer_kv_cache_low_bytes", "Low watermark: eviction stops below it.", (double)c->cache_low);
    gauge(f, "infer_memory_total_bytes", "Memory the KV budget follows: MemTotal, or the cgroup limit when lower.",
          (double)c->mem_total);
    gauge(f, "infer_memory_available_bytes", "MemAvailable, or what is left under the cgroup limit when lower.",
          (double)c->mem_available);
    gauge(f, "infer_memory_cgroup_limit_bytes", "The process's cgroup memory limit (0: none below MemTotal).",
          (double)c->mem_cgroup_limit);
    gauge(f, "infer_memory_floor_bytes", "Below this much available memory the KV watermarks shrink.",
          (double)c->mem_floor);
    counter(f, "infer_memory_pressure_checks_total", "Checks that found less memory available than the floor.",
            (double)c->mem_shrinks);
    if (c->page_mode) {
        head(f, "infer_kv_arena_info", "gauge", "Pages the KV arena got and its block size.");
        fprintf(f, "infer_kv_arena_info{page_mode=\"%s\",block_tokens=\"%d\"} 1\n", c->page_mode, c->block_tokens);
    }

    infer_thread_stats th;
    infer_get_thread_stats(&th);
    gauge(f, "infer_threads", "Threads taking part in the forward passes now (adaptive count).", (double)th.threads);
    gauge(f, "infer_threads_max", "Threads requested (-t).", (double)th.max_threads);
    counter(f, "infer_thread_drops_total", "Threads dropped because the others waited for them.", (double)th.drops);
    counter(f, "infer_thread_raises_total", "Dropped threads tried again.", (double)th.raises);
    counter(f, "infer_thread_stall_seconds_total", "Time the forward passes waited for other threads' work.",
            th.stall_seconds);

    head(f, "infer_model_state", "gauge", "1 for the model's current state.");
    static const char *states[] = {"unloaded", "loading", "loaded", "failed"};
    for (int i = 0; i < 4; i++)
        fprintf(f, "infer_model_state{state=\"%s\"} %d\n", states[i], g->model_state == i);
    gauge(f, "infer_model_loaded", "1 when the weights are mapped and ready.", g->model_state == 2);
    gauge(f, "infer_model_bytes", "Size of the model file.", (double)g->model_bytes);
    gauge(f, "infer_model_resident_bytes", "Bytes of the model file in the page cache (mincore).",
          (double)g->model_resident_bytes);
    gauge(f, "infer_model_resident_ratio", "Share of the model file in the page cache.",
          g->model_bytes ? (double)g->model_resident_bytes / (double)g->model_bytes : 0.0);
    counter(f, "infer_model_loads_total", "Times the model was loaded.", (double)m->model_loads);
    counter(f, "infer_model_unloads_total", "Times the model was unloaded after --keep-alive.",
            (double)m->model_unloads);
    gauge(f, "infer_model_load_seconds", "Duration of the last load.", m->model_load_seconds);
    gauge(f, "infer_keep_alive_seconds", "Idle time before unloading (-1: never).", g->keep_alive);
    gauge(f, "infer_idle_seconds", "Seconds since the last request finished (0 while busy).", g->idle_seconds);
    if (g->experts && g->n_experts > 0) {
        /* the experts' share of the work, to see which are hot (infer info shows which are resident) */
        head(f, "infer_expert_routed_tokens_total", "counter",
             "Tokens routed to each expert of a mixture-of-experts model, by layer.");
        for (size_t i = 0; i < g->n_experts_total; i++)
            fprintf(f, "infer_expert_routed_tokens_total{layer=\"%zu\",expert=\"%zu\"} %llu\n",
                    i / (size_t)g->n_experts, i % (size_t)g->n_experts, (unsigned long long)g->experts[i]);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
