/*
 * cmd_chat.c - `infer chat`: an interactive conversation with a model.
 *
 * Each turn renders the whole conversation with the model's chat template
 * and hands the tokens to the session, which keeps the longest common prefix
 * it already holds: the history is not recomputed, only the new turn.
 * On a terminal, lines are read with libedit (editing, history); otherwise
 * each input line is one user message and each answer is printed on one
 * line, its own newlines written as \n and backslashes as \\ (so a script
 * reads exactly one line per answer and can undo the escapes).
 *
 * An answer stops at the model's end of turn or after -n tokens (default
 * CHAT_N_PREDICT: a base model never ends its turn, and a new user's first
 * chat must not run until the context is full); a cut answer says so.
 *
 * A thinking model's reasoning (<think>...</think>) is not its answer: it is
 * hidden (a dim "thinking..." shows on a terminal while it lasts), or with
 * --show-thinking printed dim on a terminal and between its markers
 * otherwise.  Only the answer goes into the history, as an API client sends
 * it back (and as Qwen3's and DeepSeek-R1's templates drop old reasoning).
 * A template whose generation prompt opens the reasoning (DeepSeek-R1,
 * Qwen3's -Thinking-2507) has the prompt end with the marker, and the
 * output is read as starting inside the reasoning.
 */
#include "cli.h"

#include <editline/readline.h>
#include <stdio.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OPT_SHOW_THINKING = 0x7100, OPT_REASONING_BUDGET }; /* past cli.h's options */

#define CHAT_N_PREDICT 256 /* tokens per answer unless -n says otherwise */

/* The scripted mode's one line per answer: a stdio stream over stdout that
 * writes '\n' as "\\n", '\r' as "\\r" and '\\' as "\\\\". */
static ssize_t escape_write(void *cookie, const char *buf, size_t n)
{
    (void)cookie;
    for (size_t i = 0; i < n; i++) {
        const char ch = buf[i];
        if (ch == '\n' || ch == '\r' || ch == '\\') {
            putchar('\\');
            putchar(ch == '\n' ? 'n' : ch == '\r' ? 'r' : '\\');
        } else {
            putchar(ch);
        }
    }
    fflush(stdout); /* the answer streams, as on a terminal */
    return (ssize_t)n;
}

struct convo {
    infer_chat_msg *msgs;
    char **owned; /* contents, owned */
    size_t n, cap;
};

static int convo_add(struct convo *c, const char *role, const char *content)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        infer_chat_msg *m = realloc(c->msgs, cap * sizeof(*m));
        if (!m)
            return -1;
        c->msgs = m;
        char **o = realloc(c->owned, cap * sizeof(*o));
        if (!o)
            return -1;
        c->owned = o;
        c->cap = cap;
    }
    char *dup = strdup(content);
    if (!dup)
        return -1;
    c->owned[c->n] = dup;
    c->msgs[c->n].role = role;
    c->msgs[c->n].content = dup;
    c->n++;
    return 0;
}

static void convo_clear(struct convo *c, const char *system)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->owned[i]);
    c->n = 0;
    if (system && *system)
        convo_add(c, "system", system);
}

static void convo_free(struct convo *c)
{
    convo_clear(c, NULL);
    free(c->msgs);
    free(c->owned);
}

/* Where one answer is written: straight to stdout, or for a thinking model
 * through the reasoning splitter (cli_generate writes to a FILE, so this is
 * a stdio cookie stream). */
struct think_out {
    FILE *dst; /* where the answer goes: stdout, or the escaping stream */
    infer_reasoning *r;
    const char *open, *close;
    bool show, tty;
    bool forced;       /* the template's generation prompt opens the reasoning: the prompt ends with it */
    char off[64];      /* --reasoning-budget 0: the template's no-thinking text ends the prompt ("": none) */
    bool in_reasoning; /* reasoning shown (dim or marked) or "thinking..." shown, not closed */
    char *answer;      /* the answer part, for the history */
    size_t len, cap;
};

#define DIM "\033[2m"
#define UNDIM "\033[0m"

static void think_emit(struct think_out *t, const char *pr, size_t nr, const char *pc, size_t nc)
{
    if (nr && !t->in_reasoning) {
        t->in_reasoning = true;
        if (t->show)
            fputs(t->tty ? DIM : t->open, t->dst);
        else if (t->tty)
            fputs(DIM "thinking..." UNDIM, t->dst);
    }
    if (nr && t->show)
        fwrite(pr, 1, nr, t->dst);
    if (nc && t->in_reasoning) {
        t->in_reasoning = false;
        if (t->show)
            fputs(t->tty ? UNDIM "\n\n" : t->close, t->dst);
        else if (t->tty)
            fputs("\r\033[K", t->dst); /* erase "thinking..." */
        if (t->show && !t->tty)
            fputs("\n", t->dst);
    }
    if (nc) {
        fwrite(pc, 1, nc, t->dst);
        if (t->len + nc + 1 > t->cap) {
            size_t cap = (t->len + nc + 1) * 2;
            char *p = realloc(t->answer, cap);
            if (!p)
                return;
            t->answer = p;
            t->cap = cap;
        }
        memcpy(t->answer + t->len, pc, nc);
        t->len += nc;
        t->answer[t->len] = '\0';
    }
    fflush(t->dst);
}

static ssize_t think_write(void *cookie, const char *buf, size_t n)
{
    struct think_out *t = cookie;
    const char *pr, *pc;
    size_t nr, nc;
    if (infer_reasoning_push(t->r, buf, n, false, &pr, &nr, &pc, &nc) == INFER_OK)
        think_emit(t, pr, nr, pc, nc);
    return (ssize_t)n;
}

/* End of the answer: release what the splitter held, close the styling. */
static void think_finish(struct think_out *t)
{
    const char *pr, *pc;
    size_t nr, nc;
    if (infer_reasoning_push(t->r, "", 0, true, &pr, &nr, &pc, &nc) == INFER_OK)
        think_emit(t, pr, nr, pc, nc);
    if (t->in_reasoning)
        fputs(t->show ? (t->tty ? UNDIM : t->close) : (t->tty ? "\r\033[K" : ""), t->dst);
    fflush(t->dst);
}

static void print_help(int n_predict)
{
    if (n_predict > 0)
        printf("answers stop at the model's end of turn or after %d tokens (-n N sets it, -n -1: no limit)\n",
               n_predict);
    else
        printf("answers stop at the model's end of turn (no token limit: -n -1)\n");
    printf("commands:\n"
           "  /help           this help\n"
           "  /reset          forget the conversation (keeps the system prompt)\n"
           "  /system TEXT    set the system prompt and start over\n"
           "  /stats          timings and reuse figures of this session\n"
           "  /quit           leave (also Ctrl-D)\n"
           "Ctrl-C stops the current answer.\n");
}

static void print_stats(const infer_model *m, infer_session *s)
{
    infer_session_stats st;
    infer_session_get_stats(s, &st);
    printf("context: %lld of %d tokens in use\n", (long long)infer_session_n_tokens(s), infer_session_n_ctx(s));
    printf("prompt:  %lld tokens evaluated in %.3f s (%.1f tok/s), %lld reused from earlier turns\n",
           (long long)st.n_prompt_tokens, st.prompt_seconds,
           st.prompt_seconds > 0 ? (double)st.n_prompt_tokens / st.prompt_seconds : 0.0,
           (long long)st.n_reused_tokens);
    printf("decode:  %lld tokens in %.3f s (%.1f tok/s)\n", (long long)st.n_decode_tokens, st.decode_seconds,
           st.decode_seconds > 0 ? (double)st.n_decode_tokens / st.decode_seconds : 0.0);
    printf("last turn: %lld prompt tokens, %lld reused, first token after %.3f s\n",
           (long long)st.last_prompt_tokens, (long long)st.last_reused_tokens, st.last_ttft);
    infer_thread_stats th;
    infer_get_thread_stats(&th);
    printf("threads: %d of %d taking part (%llu dropped, %llu tried again when others kept them waiting; "
           "%.1f%% of parallel time waiting)\n", th.threads, th.max_threads, (unsigned long long)th.drops,
           (unsigned long long)th.raises, th.loop_seconds > 0 ? 100.0 * th.stall_seconds / th.loop_seconds : 0.0);
    infer_cache_metrics cm;
    infer_engine_get_metrics(infer_session_engine(s), &cm);
    cli_print_cache_metrics(stdout, &cm);
    cli_print_expert_summary(stdout, m, infer_session_engine(s), "in this chat",
                             "infer serve's /metrics has the counts per expert");
}

/* One user turn: render, evaluate, stream the answer; returns 0, or 1 on error.
 * think: the model's reasoning markers (open == NULL: none) and display. */
static int turn(infer_model *m, infer_session *s, infer_sampler *smp, infer_chat_family fam, struct convo *c,
                const char *user, int n_predict, bool tty, const struct think_out *think)
{
    if (convo_add(c, "user", user))
        return 1;
    int32_t *toks = NULL;
    int64_t n = infer_model_tokenize_chat(m, fam, c->msgs, c->n, true, &toks);
    if (n > 0 && think->off[0]) {
        n = infer_model_tokenize_append(m, think->off, &toks, n);
    } else if (n > 0 && think->forced) {
        char open_nl[40];
        snprintf(open_nl, sizeof(open_nl), "%s\n", think->open);
        n = infer_model_tokenize_append(m, open_nl, &toks, n);
    }
    if (n < 0 || n > infer_session_n_ctx(s) - 1) {
        if (n < 0)
            fprintf(stderr, "error: %s\n", infer_last_error());
        else
            fprintf(stderr, "error: the conversation (%lld tokens) no longer fits the context of %d; /reset to start "
                            "over or raise -c\n", (long long)n, infer_session_n_ctx(s));
        free(toks);
        c->n--;
        free(c->owned[c->n]);
        return 1;
    }
    cli_interrupted = 0;
    infer_status st = infer_session_set_tokens(s, toks, n, NULL);
    free(toks);
    if (st != INFER_OK) {
        fprintf(stderr, "error: %s\n", infer_last_error());
        c->n--;
        free(c->owned[c->n]);
        return 1;
    }
    char *answer = NULL;
    int n_gen;
    struct think_out t = *think;
    FILE *out = NULL;
    if (t.open && (t.r = t.off[0] ? infer_reasoning_new_closed(t.open, t.close) : infer_reasoning_new(t.open, t.close, t.forced)) &&
        (out = fopencookie(&t, "w", (cookie_io_functions_t){.write = think_write}))) {
        setvbuf(out, NULL, _IONBF, 0);
        n_gen = cli_generate(m, s, smp, n_predict, out, &answer, NULL);
        fclose(out);
        think_finish(&t);
        free(answer); /* the raw text, reasoning included */
        answer = t.answer ? t.answer : strdup("");
    } else {
        n_gen = cli_generate(m, s, smp, n_predict, t.dst, &answer, NULL);
    }
    infer_reasoning_free(t.r);
    fflush(t.dst);
    const bool cut = n_gen >= 0 && n_predict > 0 && n_gen >= n_predict && !cli_interrupted;
    if (cli_interrupted && tty)
        printf(" [stopped]");
    else if (cut && tty)
        printf(DIM " [cut at %d tokens: -n N sets the limit]" UNDIM, n_predict);
    printf("\n");
    fflush(stdout);
    if (cut && !tty)
        fprintf(stderr, "note: answer cut at %d tokens (-n N sets the limit, -n -1: none)\n", n_predict);
    convo_add(c, "assistant", answer ? answer : "");
    free(answer);
    return n_gen < 0;
}

int cmd_chat(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"n-predict", required_argument, 0, 'n'},
        {"ctx-size", required_argument, 0, 'c'}, {"batch-size", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'}, {"seed", required_argument, 0, 's'},
        {"temp", required_argument, 0, OPT_TEMP}, {"top-k", required_argument, 0, OPT_TOP_K},
        {"top-p", required_argument, 0, OPT_TOP_P}, {"min-p", required_argument, 0, OPT_MIN_P},
        {"repeat-penalty", required_argument, 0, OPT_REPEAT_PENALTY},
        {"repeat-last-n", required_argument, 0, OPT_REPEAT_LAST_N},
        {"kv-block", required_argument, 0, OPT_KV_BLOCK}, {"mlock", no_argument, 0, OPT_MLOCK},
        {"no-repack", no_argument, 0, OPT_NO_REPACK}, CLI_CACHE_LONGOPTS,
        {"system", required_argument, 0, OPT_SYSTEM}, {"chat-template", required_argument, 0, OPT_CHAT_TEMPLATE},
        {"show-thinking", no_argument, 0, OPT_SHOW_THINKING},
        {"reasoning-budget", required_argument, 0, OPT_REASONING_BUDGET}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    bool show_thinking = false, n_given = false, no_think = false;
    struct cli_gen g;
    cli_gen_defaults(&g);
    const char *system = NULL, *tmpl = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:n:c:b:t:s:h", opts, NULL)) != -1) {
        if (c == OPT_SYSTEM) system = optarg;
        else if (c == OPT_CHAT_TEMPLATE) tmpl = optarg;
        else if (c == OPT_SHOW_THINKING) show_thinking = true;
        else if (c == OPT_REASONING_BUDGET) {
            if (strcmp(optarg, "-1") && strcmp(optarg, "0")) {
                fprintf(stderr, "error: --reasoning-budget '%s': -1 (unrestricted) or 0 (no thinking)\n", optarg);
                return 2;
            }
            no_think = !strcmp(optarg, "0");
        }
        else if (c == 'n') {
            n_given = true;
            if (cli_gen_option(&g, c, optarg))
                return 2;
        }
        else if (c == 'h') {
            printf("usage: infer chat [-m MODEL] [--system TEXT] [--chat-template NAME] [options]\n\n%s"
                   "      --system TEXT       system prompt\n"
                   "      --chat-template N   chatml, gemma, llama3, llama2, mistral, phi3, ... (default: "
                   "from the model)\n"
                   "      --show-thinking     print a thinking model's reasoning (dim; hidden by default)\n"
                   "      --reasoning-budget N  0: ask a thinking model not to think (its template's\n"
                   "                          no-thinking prompt, as llama.cpp); -1: as it likes (default)\n"
                   "In chat, -n is the limit per answer: default %d tokens, -1 for none.\n"
                   "With stdin not a terminal, each input line is one message and each answer one line\n"
                   "(newlines in it written as \\n, backslashes as \\\\).\n",
                   cli_gen_help(), CHAT_N_PREDICT);
            return 0;
        } else if (cli_gen_option(&g, c, optarg))
            return 2;
    }
    if (!n_given)
        g.n_predict = CHAT_N_PREDICT;
    bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    g.quiet = !tty;
    infer_model *m;
    infer_session *s;
    infer_sampler *smp;
    if (cli_load(&g, &m, &s, &smp))
        return 1;
    bool warned = false;
    infer_chat_family fam = infer_chat_detect(infer_model_gguf(m), tmpl, &warned);
    if (warned)
        fprintf(stderr, "warning: %s\n", infer_last_error());
    /* generation also stops on the family's end-of-turn tokens */
    for (const char *const *mk = infer_chat_eot_markers(fam); mk && *mk; mk++)
        infer_model_add_eog(m, *mk);
    FILE *esc = tty ? NULL : fopencookie(NULL, "w", (cookie_io_functions_t){.write = escape_write});
    if (esc)
        setvbuf(esc, NULL, _IONBF, 0);
    struct think_out think = {.dst = esc ? esc : stdout, .show = show_thinking, .tty = tty};
    infer_chat_reasoning_markers(infer_model_gguf(m), &think.open, &think.close);
    think.forced = think.open && infer_chat_reasoning_forced(infer_model_gguf(m), tmpl, think.open);
    if (no_think && (!think.open || !infer_chat_reasoning_off(infer_model_gguf(m), tmpl, think.open, think.close,
                                                              think.forced, think.off, sizeof(think.off))))
        fprintf(stderr, "warning: --reasoning-budget 0: this model's template has no way to turn thinking off\n");
    if (tty)
        fprintf(stderr, "chat template: %s%s. Type /help for commands, Ctrl-D to quit.\n",
                infer_chat_family_name(fam),
                !think.open ? "" : show_thinking ? " (reasoning shown dim)" : " (reasoning hidden; --show-thinking)");

    struct convo conv = {0};
    convo_clear(&conv, system);
    cli_install_sigint();
    char *line = NULL;
    size_t line_cap = 0;
    int rc = 0;
    for (;;) {
        char *in;
        if (tty) {
            cli_interrupted = 0;
            in = readline("> ");
            if (!in && cli_interrupted) { /* Ctrl-C at the prompt: a fresh line, not an exit */
                printf("\n");
                continue;
            }
            if (!in)
                break;
            if (*in)
                add_history(in);
        } else {
            ssize_t r = getline(&line, &line_cap, stdin);
            if (r < 0)
                break;
            line[strcspn(line, "\r\n")] = '\0';
            in = line;
        }
        if (!strcmp(in, "/quit") || !strcmp(in, "/exit")) {
            if (tty)
                free(in);
            break;
        } else if (!strcmp(in, "/help")) {
            print_help(g.n_predict);
        } else if (!strcmp(in, "/reset")) {
            convo_clear(&conv, system);
            printf("conversation reset\n");
        } else if (!strncmp(in, "/system", 7) && (in[7] == ' ' || in[7] == '\0')) {
            static char *sys_owned;
            free(sys_owned);
            sys_owned = strdup(in[7] ? in + 8 : "");
            system = sys_owned;
            convo_clear(&conv, system);
            printf("system prompt set; conversation reset\n");
        } else if (!strcmp(in, "/stats")) {
            print_stats(m, s);
        } else if (in[0] == '/') {
            printf("unknown command '%s'; /help lists them\n", in);
        } else if (*in) {
            if (turn(m, s, smp, fam, &conv, in, g.n_predict, tty, &think) && !tty)
                rc = 1;
        }
        if (tty)
            free(in);
    }
    free(line);
    if (esc)
        fclose(esc);
    convo_free(&conv);
    infer_sampler_free(smp);
    infer_session_free(s);
    infer_model_free(m);
    return rc;
}
