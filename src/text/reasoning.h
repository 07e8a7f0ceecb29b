/*
 * reasoning.h - the reasoning markers of a model and the splitter of its
 * output into reasoning and answer (see reasoning.c; the splitter's API is
 * the public infer_reasoning_* of include/infer.h).
 */
#ifndef INFER_REASONING_H
#define INFER_REASONING_H

#include "util/common.h"

#include <stdbool.h>

/* The markers a thinking model writes around its reasoning: found in the
 * chat template text (tmpl, may be NULL), else as a pair of tokens of the
 * vocabulary (has may be NULL).  Sets *open and *close to static strings and
 * returns true, or returns false leaving them alone. */
bool reasoning_markers(const char *tmpl, bool (*has)(void *ctx, const char *piece), void *ctx,
                       const char **open, const char **close);

#endif
