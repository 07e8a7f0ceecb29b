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

/* Does the template's generation prompt end with the opening marker and a
 * newline ('<|im_start|>assistant\n<think>\n' of Qwen3's -Thinking-2507
 * files, QwQ; '<｜Assistant｜><think>\n' of DeepSeek-R1)?  Then the model
 * writes its reasoning without opening it.  Looked for in the block after
 * the last "add_generation_prompt", up to its first "endif" (Qwen3's own
 * '<think>\n\n</think>\n\n' of enable_thinking=false does not count). */
bool reasoning_forced_open(const char *tmpl, const char *open);

/* What ends the prompt of a turn asked not to think (Ollama's "think":
 * false, chat_template_kwargs.enable_thinking = false, --reasoning-budget 0),
 * as llama.cpp's templates give it: a template that opens the reasoning
 * itself (forced) gets open "\n" close (llama.cpp appends close to the
 * prompt); one with Qwen3's enable_thinking switch the empty block
 * open "\n\n" close "\n\n" it writes.  Written to buf (n bytes); false when
 * the template has no such switch (the model then thinks as it likes). */
bool reasoning_off_suffix(const char *tmpl, const char *open, const char *close, bool forced, char *buf, size_t n);

#endif
