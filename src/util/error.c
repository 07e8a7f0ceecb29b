/*
 * error.c - per-thread error messages and status names.
 *
 * The library reports failures as infer_status values; the message that goes
 * with the most recent failure on a thread lives here until the next one.
 */
#include "common.h"

#include <string.h>

static _Thread_local char last_error[1024];

const char *infer_last_error(void)
{
    return last_error;
}

void infer_error_clear(void)
{
    last_error[0] = '\0';
}

infer_status infer_error(infer_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return st;
}

infer_status infer_error_prefix(infer_status st, const char *fmt, ...)
{
    char old[sizeof(last_error)];
    memcpy(old, last_error, sizeof(old));
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(last_error))
        snprintf(last_error + n, sizeof(last_error) - (size_t)n, ": %s", old);
    return st;
}

const char *infer_status_name(infer_status st)
{
    switch (st) {
    case INFER_OK: return "ok";
    case INFER_ERR_IO: return "i/o error";
    case INFER_ERR_FORMAT: return "format error";
    case INFER_ERR_UNSUPPORTED: return "unsupported";
    case INFER_ERR_NOMEM: return "out of memory";
    case INFER_ERR_INVALID: return "invalid argument";
    case INFER_ERR_NOT_FOUND: return "not found";
    case INFER_ERR_FULL: return "full";
    case INFER_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}
