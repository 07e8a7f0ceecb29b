/*
 * respcache.c - the response cache's store (DESIGN.md, "the caching
 * layers"; issue 15): complete answers by request key, in one SQLite file.
 *
 * Tier 1 (exact): the caller (the server) hashes the canonical request -
 * model identity, tenant salt, every message, every sampling and output
 * parameter, the template - into a 32-byte key; a hit returns the answer
 * stored under exactly that key, so it can never answer another question.
 *
 * Tier 2 (semantic): a row may also carry a bucket (the hash of everything
 * but the last question: model, embedding model, tenant, system prompt,
 * earlier turns, output parameters), the normalised question and its
 * embedding (F16).  infer_respcache_set_embedder() drops the rows of any
 * other embedding model and loads the unexpired rows of this one into the
 * per-bucket arrays of semindex.c; infer_respcache_get_similar() scans the
 * asked question's bucket and answers with the most similar stored question
 * at or above the threshold that the content gate (semgate.c) accepts.
 *
 * The file is SQLite in WAL mode with one table:
 *   entries(key BLOB PRIMARY KEY, tenant TEXT, created REAL, expires REAL,
 *           last_hit REAL, hits INTEGER, answer BLOB,
 *           bucket BLOB, question TEXT, emb BLOB, emb_model TEXT)
 * and PRAGMA user_version = RESPCACHE_VERSION (a layout-1 file, without the
 * last four columns, is extended in place).  TTL counts from creation;
 * expired rows are never returned and are deleted when new answers are
 * stored; past max_entries or max_bytes the least recently hit rows go.
 *
 * The file is not trusted: one that is not SQLite, fails quick_check, or has
 * another user_version / layout is renamed aside (PATH.bad-UNIXTIME) and a
 * fresh one is made; the note says so.  A path that cannot be written (read
 * only, full disk) turns storing off with a note while lookups go on; a
 * path that cannot be opened at all fails the open (the caller then runs
 * without the cache).  All functions are safe to call from several threads
 * (one mutex around the connection).
 */
#include "infer.h"

#include "../../kernels/dispatch.h"
#include "../../kernels/types.h"
#include "cache/semindex.h"
#include "util/common.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RESPCACHE_VERSION_1 1919090689 /* 0x72630001: "rc", layout 1 (exact tier only) */
#define RESPCACHE_VERSION 1919090690   /* 0x72630002: layout 2 (semantic columns) */
#define STR_(x) #x
#define STR(x) STR_(x)

struct infer_respcache {
    sqlite3 *db;
    pthread_mutex_t mu;
    infer_respcache_params p;
    bool store_ok;
    infer_respcache_stats st;
    char path[1024];
    struct semindex *ix;      /* the semantic tier, after infer_respcache_set_embedder() */
    char emb_model[128];
};

static double now_unix(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void note_add(char *note, size_t cap, const char *fmt, const char *a, const char *b)
{
    if (!note || !cap)
        return;
    size_t n = strlen(note);
    if (n + 2 < cap)
        snprintf(note + n, cap - n, "%s", n ? "; " : "");
    n = strlen(note);
    if (n + 1 < cap)
        snprintf(note + n, cap - n, fmt, a, b);
}

/* Is db a cache of ours (or empty)?  Returns 1 ours, 2 ours in layout 1,
 * 0 empty, -1 foreign or broken. */
static int check_db(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    int ver = -1, rc;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, NULL) != SQLITE_OK)
        return -1;
    rc = sqlite3_step(s);
    bool ok = rc == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    if (!ok)
        return -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(s) == SQLITE_ROW)
        ver = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    int n_tables = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(s) == SQLITE_ROW)
        n_tables = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (ver == 0 && n_tables == 0)
        return 0;
    if (ver == RESPCACHE_VERSION_1)
        return 2;
    return ver == RESPCACHE_VERSION ? 1 : -1;
}

static int exec(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL); }

static infer_status open_db(infer_respcache *c, char *note, size_t note_cap, bool *set_aside)
{
    *set_aside = false;
    int rc = sqlite3_open_v2(c->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_close(c->db);
        c->db = NULL;
        rc = sqlite3_open_v2(c->path, &c->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
            infer_status st = infer_error(INFER_ERR_IO, "response cache '%s': %s", c->path,
                                          c->db ? sqlite3_errmsg(c->db) : "cannot open");
            sqlite3_close(c->db);
            c->db = NULL;
            return st;
        }
        c->store_ok = false;
        note_add(note, note_cap, "%s is read-only: answers are looked up, not stored%s", c->path, "");
    }
    sqlite3_busy_timeout(c->db, 2000);
    int kind = check_db(c->db);
    if (kind < 0) {
        *set_aside = true;
        return INFER_OK;
    }
    if (kind == 0 && c->store_ok) {
        if (exec(c->db, "PRAGMA journal_mode=WAL") != SQLITE_OK ||
            exec(c->db, "CREATE TABLE entries(key BLOB PRIMARY KEY, tenant TEXT NOT NULL, created REAL NOT NULL,"
                        " expires REAL NOT NULL, last_hit REAL NOT NULL, hits INTEGER NOT NULL, answer BLOB NOT NULL,"
                        " bucket BLOB, question TEXT, emb BLOB, emb_model TEXT)")
                != SQLITE_OK ||
            exec(c->db, "CREATE INDEX entries_lru ON entries(last_hit)") != SQLITE_OK ||
            exec(c->db, "PRAGMA user_version=" STR(RESPCACHE_VERSION)) != SQLITE_OK) {
            c->store_ok = false;
            note_add(note, note_cap, "cannot initialise %s (%s): answers are not stored", c->path,
                     sqlite3_errmsg(c->db));
        }
    } else if (kind == 2 && c->store_ok) {
        /* layout 1: the same rows, the semantic columns added */
        if (exec(c->db, "BEGIN") != SQLITE_OK || exec(c->db, "ALTER TABLE entries ADD COLUMN bucket BLOB") != SQLITE_OK ||
            exec(c->db, "ALTER TABLE entries ADD COLUMN question TEXT") != SQLITE_OK ||
            exec(c->db, "ALTER TABLE entries ADD COLUMN emb BLOB") != SQLITE_OK ||
            exec(c->db, "ALTER TABLE entries ADD COLUMN emb_model TEXT") != SQLITE_OK ||
            exec(c->db, "PRAGMA user_version=" STR(RESPCACHE_VERSION)) != SQLITE_OK || exec(c->db, "COMMIT") != SQLITE_OK) {
            exec(c->db, "ROLLBACK");
            *set_aside = true;
            return INFER_OK;
        }
        exec(c->db, "PRAGMA journal_mode=WAL");
    } else if (kind == 2) {
        *set_aside = true; /* layout 1, read-only: cannot be read as layout 2 */
        return INFER_OK;
    } else if (c->store_ok) {
        exec(c->db, "PRAGMA journal_mode=WAL");
    }
    /* WAL with synchronous=NORMAL: a crash or power cut may lose the last
     * stores or hit counts, never the file's consistency, and a hit does not
     * wait for an fsync */
    exec(c->db, "PRAGMA synchronous=NORMAL");
    return INFER_OK;
}

infer_status infer_respcache_open(infer_respcache **out, const infer_respcache_params *p, char *note,
                                  size_t note_cap)
{
    *out = NULL;
    if (note && note_cap)
        note[0] = '\0';
    if (!p || !p->path || !*p->path)
        return infer_error(INFER_ERR_INVALID, "response cache: no database path");
    infer_respcache *c = calloc(1, sizeof(*c));
    if (!c)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    c->p = *p;
    if (c->p.ttl_seconds <= 0)
        c->p.ttl_seconds = 24 * 3600;
    if (c->p.max_entries <= 0)
        c->p.max_entries = 100000;
    if (c->p.max_bytes == 0)
        c->p.max_bytes = (uint64_t)256 << 20;
    c->store_ok = true;
    snprintf(c->path, sizeof(c->path), "%s", p->path);
    pthread_mutex_init(&c->mu, NULL);
    bool aside;
    infer_status st = open_db(c, note, note_cap, &aside);
    if (st == INFER_OK && aside) {
        /* not ours or damaged: never trusted, kept for inspection */
        sqlite3_close(c->db);
        c->db = NULL;
        char bad[1100];
        snprintf(bad, sizeof(bad), "%s.bad-%lld", c->path, (long long)time(NULL));
        if (rename(c->path, bad) != 0) {
            st = infer_error(INFER_ERR_IO, "response cache '%s' is foreign or corrupt and cannot be moved aside: %s",
                             c->path, strerror(errno));
        } else {
            char wal[1100];
            snprintf(wal, sizeof(wal), "%s-wal", c->path);
            remove(wal);
            snprintf(wal, sizeof(wal), "%s-shm", c->path);
            remove(wal);
            note_add(note, note_cap, "%s was foreign or corrupt: moved to %s, starting empty", c->path, bad);
            c->st.set_aside++;
            st = open_db(c, note, note_cap, &aside);
            if (st == INFER_OK && aside)
                st = infer_error(INFER_ERR_IO, "response cache '%s': a fresh database is not usable", c->path);
        }
    }
    if (st != INFER_OK) {
        infer_respcache_close(c);
        return st;
    }
    *out = c;
    return INFER_OK;
}

void infer_respcache_close(infer_respcache *c)
{
    if (!c)
        return;
    sqlite3_close(c->db);
    semindex_free(c->ix);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

bool infer_respcache_get(infer_respcache *c, const uint8_t key[32], char **answer, size_t *len, double *age)
{
    *answer = NULL;
    *len = 0;
    bool hit = false;
    const double now = now_unix();
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db, "SELECT answer, created FROM entries WHERE key = ?1 AND expires > ?2", -1, &s,
                           NULL) == SQLITE_OK &&
        sqlite3_bind_blob(s, 1, key, 32, SQLITE_STATIC) == SQLITE_OK && sqlite3_bind_double(s, 2, now) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        const void *a = sqlite3_column_blob(s, 0);
        int n = sqlite3_column_bytes(s, 0);
        char *copy = malloc((size_t)n + 1);
        if (copy && n >= 0) {
            if (n)
                memcpy(copy, a, (size_t)n);
            copy[n] = '\0';
            *answer = copy;
            *len = (size_t)n;
            *age = now - sqlite3_column_double(s, 1);
            hit = true;
        } else {
            free(copy);
        }
    }
    sqlite3_finalize(s);
    if (hit) {
        c->st.hits++;
        if (c->store_ok &&
            sqlite3_prepare_v2(c->db, "UPDATE entries SET hits = hits + 1, last_hit = ?2 WHERE key = ?1", -1, &s,
                               NULL) == SQLITE_OK) {
            sqlite3_bind_blob(s, 1, key, 32, SQLITE_STATIC);
            sqlite3_bind_double(s, 2, now);
            sqlite3_step(s);
            sqlite3_finalize(s);
        }
    } else {
        c->st.misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* Run a DELETE ... RETURNING rowid (bound by bind(s, arg)) and drop the
 * deleted rows from the semantic index.  Returns the rows deleted, or -1
 * (mu held). */
static int64_t delete_rows(infer_respcache *c, const char *sql, void (*bind)(sqlite3_stmt *, const void *),
                           const void *arg)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db, sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (bind)
        bind(s, arg);
    int64_t n = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (c->ix)
            semindex_remove(c->ix, sqlite3_column_int64(s, 0));
        n++;
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? n : -1;
}

static void bind_double(sqlite3_stmt *s, const void *v) { sqlite3_bind_double(s, 1, *(const double *)v); }
static void bind_int64(sqlite3_stmt *s, const void *v) { sqlite3_bind_int64(s, 1, *(const int64_t *)v); }
static void bind_text(sqlite3_stmt *s, const void *v) { sqlite3_bind_text(s, 1, (const char *)v, -1, SQLITE_STATIC); }
static void bind_key(sqlite3_stmt *s, const void *v) { sqlite3_bind_blob(s, 1, v, 32, SQLITE_STATIC); }

/* Drop expired rows, then the least recently hit ones past the limits
 * (mu held). */
static void evict(infer_respcache *c, double now)
{
    int64_t n = delete_rows(c, "DELETE FROM entries WHERE expires <= ?1 RETURNING rowid", bind_double, &now);
    if (n > 0)
        c->st.expired += (uint64_t)n;
    sqlite3_stmt *s = NULL;
    for (int round = 0; round < 64; round++) {
        int64_t rows = 0, bytes = 0;
        if (sqlite3_prepare_v2(c->db, "SELECT count(*), coalesce(sum(length(answer)), 0) FROM entries", -1, &s,
                               NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW) {
            rows = sqlite3_column_int64(s, 0);
            bytes = sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
        if (rows <= c->p.max_entries && (uint64_t)bytes <= c->p.max_bytes)
            return;
        int64_t drop = rows > c->p.max_entries ? rows - c->p.max_entries : 1;
        n = delete_rows(c,
                        "DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries ORDER BY last_hit LIMIT ?1)"
                        " RETURNING rowid",
                        bind_int64, &drop);
        if (n <= 0)
            return;
        c->st.evicted += (uint64_t)n;
    }
}

infer_status infer_respcache_put(infer_respcache *c, const uint8_t key[32], const char *tenant, const char *answer,
                                 size_t len, const infer_respcache_sem *sem)
{
    infer_status st = INFER_OK;
    const double now = now_unix();
    pthread_mutex_lock(&c->mu);
    if (!c->store_ok) {
        c->st.store_errors++;
        pthread_mutex_unlock(&c->mu);
        return infer_error(INFER_ERR_IO, "response cache: storing is off");
    }
    if (len > c->p.max_bytes || len > (size_t)INT32_MAX) {
        c->st.store_errors++;
        pthread_mutex_unlock(&c->mu);
        return infer_error(INFER_ERR_INVALID, "response cache: an answer of %zu bytes is over the limit", len);
    }
    if (sem && !c->ix)
        sem = NULL; /* no embedding model: the exact tier only */
    const int d = c->ix ? semindex_n_embd(c->ix) : 0;
    uint16_t *half = sem ? malloc((size_t)d * sizeof(uint16_t)) : NULL;
    if (sem && !half) {
        c->st.store_errors++;
        pthread_mutex_unlock(&c->mu);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; half && i < d; i++)
        half[i] = fp32_to_fp16(sem->emb[i]);
    /* a row of the same key is replaced: its old rowid leaves the index */
    delete_rows(c, "DELETE FROM entries WHERE key = ?1 RETURNING rowid", bind_key, key);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "INSERT INTO entries(key, tenant, created, expires, last_hit, hits, answer, bucket,"
                                " question, emb, emb_model) VALUES(?1, ?2, ?3, ?4, ?3, 0, ?5, ?6, ?7, ?8, ?9)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_blob(s, 1, key, 32, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, tenant ? tenant : "", -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 3, now);
        sqlite3_bind_double(s, 4, now + c->p.ttl_seconds);
        sqlite3_bind_blob(s, 5, answer, (int)len, SQLITE_STATIC);
        if (sem) {
            sqlite3_bind_blob(s, 6, sem->bucket, 32, SQLITE_STATIC);
            sqlite3_bind_text(s, 7, sem->question ? sem->question : "", -1, SQLITE_STATIC);
            sqlite3_bind_blob(s, 8, half, d * (int)sizeof(uint16_t), SQLITE_STATIC);
            sqlite3_bind_text(s, 9, c->emb_model, -1, SQLITE_STATIC);
        }
        rc = sqlite3_step(s);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        c->st.store_errors++;
        if (rc == SQLITE_FULL || rc == SQLITE_READONLY || rc == SQLITE_IOERR || rc == SQLITE_CANTOPEN) {
            c->store_ok = false; /* the server keeps answering; storing stops */
            st = infer_error(INFER_ERR_IO, "response cache '%s': %s: storing turned off", c->path,
                             sqlite3_errmsg(c->db));
        } else {
            st = infer_error(INFER_ERR_IO, "response cache '%s': %s", c->path, sqlite3_errmsg(c->db));
        }
    } else {
        c->st.stores++;
        if (sem) {
            /* the index holds what the row holds: the F16-rounded vector */
            float *v = malloc((size_t)d * sizeof(float));
            for (int i = 0; v && i < d; i++)
                v[i] = fp16_to_fp32(half[i]);
            if (!v || !semindex_add(c->ix, sem->bucket, sqlite3_last_insert_rowid(c->db), now + c->p.ttl_seconds, v,
                                    sem->question))
                c->st.store_errors++; /* stored, but found by the exact tier only until a restart */
            free(v);
        }
        evict(c, now);
    }
    free(half);
    pthread_mutex_unlock(&c->mu);
    return st;
}

int64_t infer_respcache_purge(infer_respcache *c, const char *tenant)
{
    pthread_mutex_lock(&c->mu);
    int64_t n = delete_rows(c, "DELETE FROM entries WHERE tenant = ?1 RETURNING rowid", bind_text,
                            tenant ? tenant : "");
    if (n > 0)
        c->st.purged += (uint64_t)n;
    pthread_mutex_unlock(&c->mu);
    if (n < 0)
        infer_error(INFER_ERR_IO, "response cache: purge failed");
    return n;
}

infer_status infer_respcache_set_embedder(infer_respcache *c, const char *model_identity, int n_embd, char *note,
                                          size_t note_cap)
{
    if (!model_identity || !*model_identity || n_embd <= 0 || n_embd > 65536)
        return infer_error(INFER_ERR_INVALID, "response cache: bad embedding model identity or size");
    char err[256];
    kernels_init(err, sizeof(err)); /* the dot product's variant (idempotent) */
    struct semindex *ix = semindex_new(n_embd);
    if (!ix)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&c->mu);
    semindex_free(c->ix);
    c->ix = NULL;
    snprintf(c->emb_model, sizeof(c->emb_model), "%s", model_identity);
    const double now = now_unix();
    /* rows embedded by another model (or damaged) cannot be compared: dropped */
    int64_t dropped = 0;
    if (c->store_ok) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(c->db,
                               "DELETE FROM entries WHERE emb IS NOT NULL AND (emb_model IS NOT ?1 OR length(emb) != ?2"
                               " OR bucket IS NULL OR length(bucket) != 32 OR question IS NULL)",
                               -1, &s, NULL) == SQLITE_OK) {
            sqlite3_bind_text(s, 1, model_identity, -1, SQLITE_STATIC);
            sqlite3_bind_int(s, 2, n_embd * 2);
            if (sqlite3_step(s) == SQLITE_DONE)
                dropped = sqlite3_changes(c->db);
        }
        sqlite3_finalize(s);
        c->st.evicted_model += (uint64_t)dropped;
    }
    float *v = malloc((size_t)n_embd * sizeof(float));
    sqlite3_stmt *s = NULL;
    int64_t loaded = 0;
    bool ok = v != NULL;
    if (ok && sqlite3_prepare_v2(c->db,
                                 "SELECT rowid, expires, bucket, question, emb FROM entries WHERE emb_model = ?1"
                                 " AND expires > ?2 AND length(emb) = ?3 AND length(bucket) = 32",
                                 -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, model_identity, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 2, now);
        sqlite3_bind_int(s, 3, n_embd * 2);
        while (ok && sqlite3_step(s) == SQLITE_ROW) {
            const uint8_t *h = sqlite3_column_blob(s, 4);
            for (int i = 0; i < n_embd; i++)
                v[i] = fp16_to_fp32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8));
            ok = semindex_add(ix, sqlite3_column_blob(s, 2), sqlite3_column_int64(s, 0), sqlite3_column_double(s, 1),
                              v, (const char *)sqlite3_column_text(s, 3));
            loaded++;
        }
    }
    sqlite3_finalize(s);
    free(v);
    infer_status st = INFER_OK;
    if (!ok) {
        semindex_free(ix);
        st = infer_error(INFER_ERR_NOMEM, "response cache: out of memory loading the semantic index");
    } else {
        c->ix = ix;
        if (note && note_cap) {
            size_t n = strlen(note);
            snprintf(note + n, note_cap - n, "%s%lld semantic rows loaded, %lld of another embedding model dropped",
                     n ? "; " : "", (long long)loaded, (long long)dropped);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

/* The stored answer of a row, if it is still there and unexpired (mu held). */
static bool row_answer(infer_respcache *c, int64_t rowid, double now, char **answer, size_t *len, double *age)
{
    sqlite3_stmt *s = NULL;
    bool hit = false;
    if (sqlite3_prepare_v2(c->db, "SELECT answer, created FROM entries WHERE rowid = ?1 AND expires > ?2", -1, &s,
                           NULL) == SQLITE_OK &&
        sqlite3_bind_int64(s, 1, rowid) == SQLITE_OK && sqlite3_bind_double(s, 2, now) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        int n = sqlite3_column_bytes(s, 0);
        const void *a = sqlite3_column_blob(s, 0);
        char *copy = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (copy) {
            if (n)
                memcpy(copy, a, (size_t)n);
            copy[n] = '\0';
            *answer = copy;
            *len = (size_t)n;
            *age = now - sqlite3_column_double(s, 1);
            hit = true;
        }
    }
    sqlite3_finalize(s);
    if (hit && c->store_ok && sqlite3_prepare_v2(c->db, "UPDATE entries SET hits = hits + 1, last_hit = ?2 WHERE rowid = ?1",
                                                 -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, rowid);
        sqlite3_bind_double(s, 2, now);
        sqlite3_step(s);
        sqlite3_finalize(s);
    }
    return hit;
}

#define SEM_MAX_CANDIDATES 32 /* most gate checks per lookup */

bool infer_respcache_get_similar(infer_respcache *c, const uint8_t bucket[32], const float *emb, const char *question,
                                 float threshold, char **answer, size_t *len, double *age, infer_respcache_match *m)
{
    *answer = NULL;
    *len = 0;
    memset(m, 0, sizeof(*m));
    m->nearest = m->best_agreeing = -1.0f;
    const double t0 = infer_now_seconds(), now = now_unix();
    bool hit = false;
    struct sem_cand cand[SEM_MAX_CANDIDATES];
    pthread_mutex_lock(&c->mu);
    if (!c->ix) {
        pthread_mutex_unlock(&c->mu);
        return false;
    }
    int n = semindex_search(c->ix, bucket, emb, now, cand, SEM_MAX_CANDIDATES, &m->candidates);
    for (int i = 0; i < n; i++) {
        char why[sizeof(m->nearest_why)];
        bool agrees = infer_semgate_agree(question, cand[i].question, why, sizeof(why));
        if (i == 0) {
            m->nearest = cand[0].sim;
            m->nearest_agrees = agrees;
            snprintf(m->nearest_why, sizeof(m->nearest_why), "%s", agrees ? "" : why);
        }
        if (!agrees)
            continue;
        m->best_agreeing = cand[i].sim;
        if (cand[i].sim >= threshold && row_answer(c, cand[i].rowid, now, answer, len, age)) {
            m->similarity = cand[i].sim;
            hit = true;
        }
        break; /* the most similar question the gate accepts decides */
    }
    if (hit)
        c->st.hits_semantic++;
    m->search_seconds = infer_now_seconds() - t0;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void infer_respcache_get_stats(infer_respcache *c, infer_respcache_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    out->storing = c->store_ok;
    out->ttl_seconds = c->p.ttl_seconds;
    out->semantic_rows = c->ix ? semindex_rows(c->ix) : 0;
    out->semantic_buckets = c->ix ? semindex_buckets(c->ix) : 0;
    out->entries = out->bytes = 0;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db,
                           "SELECT count(*), coalesce(sum(length(answer)), 0) FROM entries WHERE expires > ?1", -1,
                           &s, NULL) == SQLITE_OK) {
        sqlite3_bind_double(s, 1, now_unix());
        if (sqlite3_step(s) == SQLITE_ROW) {
            out->entries = (uint64_t)sqlite3_column_int64(s, 0);
            out->bytes = (uint64_t)sqlite3_column_int64(s, 1);
        }
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&c->mu);
}
