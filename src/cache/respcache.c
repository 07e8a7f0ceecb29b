/*
 * respcache.c - the response cache's store (DESIGN.md, "the caching
 * layers"; issue 15): complete answers by request key, in one SQLite file.
 *
 * Tier 1 (exact) only: the caller (the server) hashes the canonical request
 * - model identity, tenant salt, every message, every sampling and output
 * parameter, the template - into a 32-byte key; a hit returns the answer
 * stored under exactly that key, so it can never answer another question.
 *
 * The file is SQLite in WAL mode with one table:
 *   entries(key BLOB PRIMARY KEY, tenant TEXT, created REAL, expires REAL,
 *           last_hit REAL, hits INTEGER, answer BLOB)
 * and PRAGMA user_version = RESPCACHE_VERSION.  TTL counts from creation;
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

#include "util/common.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RESPCACHE_VERSION 1919090689 /* 0x72630001: "rc", layout 1 */
#define STR_(x) #x
#define STR(x) STR_(x)

struct infer_respcache {
    sqlite3 *db;
    pthread_mutex_t mu;
    infer_respcache_params p;
    bool store_ok;
    infer_respcache_stats st;
    char path[1024];
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

/* Is db a cache of ours (or empty)?  Returns 1 ours, 0 empty, -1 foreign or broken. */
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
                        " expires REAL NOT NULL, last_hit REAL NOT NULL, hits INTEGER NOT NULL, answer BLOB NOT NULL)")
                != SQLITE_OK ||
            exec(c->db, "CREATE INDEX entries_lru ON entries(last_hit)") != SQLITE_OK ||
            exec(c->db, "PRAGMA user_version=" STR(RESPCACHE_VERSION)) != SQLITE_OK) {
            c->store_ok = false;
            note_add(note, note_cap, "cannot initialise %s (%s): answers are not stored", c->path,
                     sqlite3_errmsg(c->db));
        }
    } else if (c->store_ok) {
        exec(c->db, "PRAGMA journal_mode=WAL");
    }
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

/* Drop expired rows, then the least recently hit ones past the limits
 * (mu held). */
static void evict(infer_respcache *c, double now)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db, "DELETE FROM entries WHERE expires <= ?1", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_double(s, 1, now);
        if (sqlite3_step(s) == SQLITE_DONE)
            c->st.expired += (uint64_t)sqlite3_changes(c->db);
        sqlite3_finalize(s);
    }
    for (int round = 0; round < 64; round++) {
        int64_t n = 0, bytes = 0;
        if (sqlite3_prepare_v2(c->db, "SELECT count(*), coalesce(sum(length(answer)), 0) FROM entries", -1, &s,
                               NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW) {
            n = sqlite3_column_int64(s, 0);
            bytes = sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
        if (n <= c->p.max_entries && (uint64_t)bytes <= c->p.max_bytes)
            return;
        int64_t drop = n > c->p.max_entries ? n - c->p.max_entries : 1;
        if (sqlite3_prepare_v2(c->db,
                               "DELETE FROM entries WHERE key IN (SELECT key FROM entries ORDER BY last_hit LIMIT ?1)",
                               -1, &s, NULL) != SQLITE_OK)
            return;
        sqlite3_bind_int64(s, 1, drop);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE)
            return;
        c->st.evicted += (uint64_t)sqlite3_changes(c->db);
    }
}

infer_status infer_respcache_put(infer_respcache *c, const uint8_t key[32], const char *tenant, const char *answer,
                                 size_t len)
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
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "INSERT OR REPLACE INTO entries(key, tenant, created, expires, last_hit, hits, answer)"
                                " VALUES(?1, ?2, ?3, ?4, ?3, 0, ?5)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_blob(s, 1, key, 32, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, tenant ? tenant : "", -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 3, now);
        sqlite3_bind_double(s, 4, now + c->p.ttl_seconds);
        sqlite3_bind_blob(s, 5, answer, (int)len, SQLITE_STATIC);
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
        evict(c, now);
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

int64_t infer_respcache_purge(infer_respcache *c, const char *tenant)
{
    int64_t n = -1;
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(c->db, "DELETE FROM entries WHERE tenant = ?1", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, tenant ? tenant : "", -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_DONE)
            n = sqlite3_changes(c->db);
    }
    sqlite3_finalize(s);
    if (n > 0)
        c->st.purged += (uint64_t)n;
    pthread_mutex_unlock(&c->mu);
    if (n < 0)
        infer_error(INFER_ERR_IO, "response cache: purge failed");
    return n;
}

void infer_respcache_get_stats(infer_respcache *c, infer_respcache_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    out->storing = c->store_ok;
    out->ttl_seconds = c->p.ttl_seconds;
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
