/*
 * test-server-ollama.c - unit tests of Ollama's request parsing and
 * response shapes (src/server/api_ollama.c), without a model or a socket:
 * chat and generate bodies into a gen_request (options mapped onto the
 * sampler, keep_alive, think, the load/unload form), what is refused and
 * with which status, the streamed and final lines with their durations,
 * the {"error"} shape, names and timestamps.  The same code runs end to end
 * against the real server in tests/server/test_ollama.py.
 */
#include "../../src/server/server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static bool parse(enum ollama_api api, const char *body, struct gen_request *r, struct api_error *e)
{
    memset(e, 0, sizeof(*e));
    return ollama_parse_request(api, body, strlen(body), r, e);
}

/* Refused with 400 and a message containing `word`. */
static void expect_400(enum ollama_api api, const char *body, const char *word)
{
    struct gen_request r;
    struct api_error e;
    if (parse(api, body, &r, &e)) {
        gen_request_free(&r);
        fail_msg("accepted: %s", body);
    }
    assert_int_equal(e.status, 400);
    if (!strstr(e.message, word))
        fail_msg("'%s' does not name '%s' (%s)", e.message, word, body);
}

static void test_chat_options(void **state)
{
    (void)state;
    struct gen_request r;
    struct api_error e;
    assert_true(parse(OLLAMA_CHAT,
                      "{\"model\": \"tiny:latest\", \"messages\": [{\"role\": \"system\", \"content\": \"s\"},"
                      " {\"role\": \"user\", \"content\": \"u\"}], \"keep_alive\": \"5m\", \"tools\": [],"
                      " \"options\": {\"temperature\": 0.3, \"top_k\": 7, \"top_p\": 0.5, \"min_p\": 0.1,"
                      " \"repeat_penalty\": 1.2, \"repeat_last_n\": 32, \"seed\": 99, \"num_predict\": 12,"
                      " \"num_ctx\": 2048, \"stop\": [\"</s>\", \"END\"], \"num_gpu\": 1, \"mirostat\": 0},"
                      " \"unknown_field\": {\"x\": 1}}",
                      &r, &e));
    assert_int_equal(r.ollama, OLLAMA_CHAT);
    assert_int_equal(r.kind, GEN_CHAT);
    assert_string_equal(r.model, "tiny:latest");
    assert_true(r.stream); /* Ollama's default */
    assert_int_equal(r.n_msgs, 2);
    assert_string_equal(r.msgs[0].role, "system");
    assert_true(r.sp.temp == 0.3f && r.sp.top_p == 0.5f && r.sp.min_p == 0.1f && r.sp.repeat_penalty == 1.2f);
    assert_int_equal(r.sp.top_k, 7);
    assert_int_equal(r.sp.repeat_last_n, 32);
    assert_int_equal(r.sp.seed, 99);
    assert_int_equal(r.max_tokens, 12);
    assert_int_equal(r.n_ctx_limit, 2048);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "END");
    assert_true(r.keep_alive_set && r.keep_alive == 300);
    assert_int_equal(r.think, -1);
    assert_false(r.load_only);
    gen_request_free(&r);

    /* num_predict -1 / -2 / 0: the server's limit; keep_alive as a number; stream false */
    assert_true(parse(OLLAMA_CHAT,
                      "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"u\"}], \"stream\": false,"
                      " \"keep_alive\": -1, \"think\": false, \"options\": {\"num_predict\": -1, \"repeat_last_n\": -1}}",
                      &r, &e));
    assert_int_equal(r.max_tokens, -1);
    assert_false(r.stream);
    assert_true(r.keep_alive_set && r.keep_alive < 0);
    assert_int_equal(r.think, 0);
    assert_int_equal(r.sp.repeat_last_n, 4096);
    gen_request_free(&r);

    /* integer options as integral reals (Home Assistant sends "num_ctx": 8192.0), as Ollama takes them */
    assert_true(parse(OLLAMA_CHAT,
                      "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"u\"}],"
                      " \"keep_alive\": \"-1.0s\", \"options\": {\"num_ctx\": 8192.0, \"top_k\": 5.0, \"seed\": -3.0,"
                      " \"num_predict\": 16.0}}",
                      &r, &e));
    assert_int_equal(r.n_ctx_limit, 8192);
    assert_int_equal(r.sp.top_k, 5);
    assert_int_equal(r.max_tokens, 16);
    assert_true(r.keep_alive_set && r.keep_alive < 0);
    gen_request_free(&r);

    /* a message without content (the ollama client leaves out an empty one) is empty */
    assert_true(parse(OLLAMA_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\"}]}", &r, &e));
    assert_int_equal(r.n_msgs, 1);
    assert_string_equal(r.msgs[0].content, "");
    gen_request_free(&r);

    /* no messages: load the model; with keep_alive 0: unload */
    assert_true(parse(OLLAMA_CHAT, "{\"model\": \"m\", \"messages\": [], \"keep_alive\": 0}", &r, &e));
    assert_true(r.load_only && !r.stream && r.keep_alive_set && r.keep_alive == 0);
    gen_request_free(&r);
    assert_true(parse(OLLAMA_CHAT, "{\"model\": \"m\", \"think\": \"high\"}", &r, &e));
    assert_true(r.load_only && r.think == 1);
    gen_request_free(&r);
}

static void test_generate_prompt(void **state)
{
    (void)state;
    struct gen_request r;
    struct api_error e;
    /* templated: the system prompt, then the prompt as a user turn */
    assert_true(parse(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": \"p\", \"system\": \"s\"}", &r, &e));
    assert_int_equal(r.kind, GEN_CHAT);
    assert_int_equal(r.ollama, OLLAMA_GENERATE);
    assert_int_equal(r.n_msgs, 2);
    assert_string_equal(r.msgs[0].role, "system");
    assert_string_equal(r.msgs[1].role, "user");
    assert_string_equal(r.msgs[1].content, "p");
    gen_request_free(&r);
    /* raw: the text as is */
    assert_true(parse(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": \"p q\", \"raw\": true, \"system\": \"s\"}",
                      &r, &e));
    assert_int_equal(r.kind, GEN_COMPLETION);
    assert_string_equal(r.prompt, "p q");
    assert_int_equal(r.n_msgs, 0);
    gen_request_free(&r);
    assert_true(parse(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": \"\"}", &r, &e));
    assert_true(r.load_only);
    gen_request_free(&r);
}

static void test_refused(void **state)
{
    (void)state;
    const char *chat = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"u\"}], ";
    static const struct {
        const char *tail, *word;
    } cases[] = {
        {"\"options\": {\"temperature\": \"hot\"}}", "temperature"},
        {"\"options\": {\"temperature\": -1}}", "temperature"},
        {"\"options\": {\"top_k\": 1.5}}", "top_k"},
        {"\"options\": {\"top_p\": 2}}", "top_p"},
        {"\"options\": {\"seed\": \"1\"}}", "seed"},
        {"\"options\": {\"stop\": [1]}}", "stop"},
        {"\"options\": {\"num_predict\": -3}}", "num_predict"},
        {"\"options\": {\"num_ctx\": 0}}", "num_ctx"},
        {"\"options\": {\"repeat_penalty\": 0}}", "repeat_penalty"},
        {"\"options\": {\"mirostat\": 2}}", "mirostat"},
        {"\"options\": {\"typical_p\": 0.5}}", "typical_p"},
        {"\"options\": {\"frequency_penalty\": 1}}", "frequency_penalty"},
        {"\"options\": {\"warp_speed\": 9}}", "warp_speed"},
        {"\"options\": []}", "options"},
        {"\"keep_alive\": \"soon\"}", "keep_alive"},
        {"\"keep_alive\": true}", "keep_alive"},
        {"\"stream\": \"yes\"}", "stream"},
        {"\"think\": \"maybe\"}", "think"},
        {"\"format\": \"yaml\"}", "format"},
        {"\"format\": {\"type\": \"string\", \"pattern\": \"a+\"}}", "pattern"},
        {"\"tools\": [{\"type\": \"function\"}]}", "tools"},
        {"\"tools\": {}}", "tools"},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}", "tools[0]"},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 1}}]}",
         "tools[0]"},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
         " {\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}", "used twice"},
        {"\"tools\": [{\"type\": \"web\", \"function\": {\"name\": \"f\"}}]}", "tools[0]"},
        {"\"logprobs\": true}", "logprobs"},
        {"\"template\": \"{{ .Prompt }}\"}", "template"},
        {"\"messages2\": 1, \"model\": 7}", "model"},
    };
    char body[1024];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), "%s%s", chat, cases[i].tail);
        expect_400(OLLAMA_CHAT, body, cases[i].word);
    }
    expect_400(OLLAMA_CHAT, "{\"messages\": []}", "model");
    expect_400(OLLAMA_CHAT, "{\"model\": \"\"}", "model");
    expect_400(OLLAMA_CHAT, "{\"model\": \"m\", \"messages\": {}}", "messages");
    expect_400(OLLAMA_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\", "
                            "\"images\": [\"aGk=\"]}]}", "images");
    expect_400(OLLAMA_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", "role");
    /* tool turns: the call's shape, tool_name's type, a result without a call before it */
    static const char *const tool_turns[][2] = {
        {"[{\"role\": \"assistant\", \"tool_calls\": {}}]", "messages[0].tool_calls"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [1]}]", "messages[0].tool_calls[0]"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": {}}}]}]",
         "messages[0].tool_calls[0]"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": [1]}}]}]",
         "messages[0].tool_calls[0]"},
        {"[{\"role\": \"user\", \"content\": \"u\"}, {\"role\": \"tool\", \"content\": \"r\"}]",
         "messages[1]"},
        {"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {}}}]},"
         " {\"role\": \"tool\", \"content\": \"r\", \"tool_name\": 5}]",
         "messages[1].tool_name"},
        {"[{\"role\": \"tool\", \"content\": 7}]", "messages[0]"},
    };
    for (size_t i = 0; i < sizeof(tool_turns) / sizeof(tool_turns[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\": \"m\", \"messages\": %s}", tool_turns[i][0]);
        expect_400(OLLAMA_CHAT, body, tool_turns[i][1]);
    }
    /* /api/generate has no tools in Ollama */
    expect_400(OLLAMA_GENERATE,
               "{\"model\": \"m\", \"prompt\": \"p\", \"tools\": [{\"type\": \"function\", \"function\": "
               "{\"name\": \"f\"}}]}",
               "tools");
    expect_400(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": 5}", "prompt");
    expect_400(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": \"p\", \"suffix\": \"s\"}", "suffix");
    expect_400(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": \"p\", \"context\": [1, 2]}", "context");
    expect_400(OLLAMA_GENERATE, "{\"model\": \"m\", \"prompt\": \"p\", \"raw\": 1}", "raw");
    expect_400(OLLAMA_GENERATE, "{\"model\": \"m\"}\n{\"model\": \"m\"}\n", "JSON"); /* NDJSON is no body */
    expect_400(OLLAMA_GENERATE, "[1]", "object");
    expect_400(OLLAMA_GENERATE, "", "JSON");
}

static void test_error_and_names(void **state)
{
    (void)state;
    struct api_error e;
    api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model \"%s\" not found", "x");
    char *s = ollama_error_json(&e);
    assert_string_equal(s, "{\"error\":\"model \\\"x\\\" not found\"}");
    free(s);
    assert_true(ollama_name_matches("tiny", "tiny", "/m/a.gguf"));
    assert_true(ollama_name_matches("tiny:latest", "tiny", "/m/a.gguf"));
    assert_true(ollama_name_matches("a.gguf", "tiny", "/m/a.gguf"));
    assert_true(ollama_name_matches("a", "tiny", "/m/a.gguf"));
    assert_true(ollama_name_matches("a:latest", "tiny", "/m/a.gguf"));
    assert_false(ollama_name_matches("tiny:7b", "tiny", "/m/a.gguf"));
    assert_false(ollama_name_matches("tin", "tiny", "/m/a.gguf"));
    assert_false(ollama_name_matches("", "tiny", "/m/a.gguf"));
    assert_false(ollama_name_matches("m/a", "tiny", "/m/a.gguf"));
    char t[40];
    ollama_time(1700000000.5, t);
    assert_string_equal(t, "2023-11-14T22:13:20.500000000Z");
    char *name = ollama_request_model("{\"name\": \"old\"}", 15, &e);
    assert_string_equal(name, "old"); /* the older field */
    free(name);
    assert_null(ollama_request_model("{\"model\": 1}", 12, &e));
    assert_int_equal(e.status, 400);
    assert_null(ollama_request_model("{}", 2, &e));
}

static json_t *loads(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    json_t *back = json_loads(s, 0, NULL);
    free(s);
    return back;
}

static void test_response_shapes(void **state)
{
    (void)state;
    struct job j;
    memset(&j, 0, sizeof(j));
    struct api_error e;
    assert_true(parse(OLLAMA_CHAT, "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"u\"}]}",
                      &j.req, &e));
    j.text = (char *)"Hello";
    j.text_len = 5;
    j.finish = FINISH_LENGTH;
    j.t_arrival = 100.0;
    j.t_done = 101.5;
    j.stats = (struct job_stats){.prompt_tokens = 20, .cached_tokens = 16, .completion_tokens = 8, .prompt_ms = 12.5,
                                 .predicted_ms = 400, .load_ms = 250};
    json_t *o = loads(ollama_response(&j, "tiny"));
    assert_string_equal(json_string_value(json_object_get(o, "model")), "tiny");
    json_t *m = json_object_get(o, "message");
    assert_string_equal(json_string_value(json_object_get(m, "role")), "assistant");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "Hello");
    assert_null(json_object_get(m, "thinking"));
    assert_true(json_is_true(json_object_get(o, "done")));
    assert_string_equal(json_string_value(json_object_get(o, "done_reason")), "length");
    assert_int_equal(json_integer_value(json_object_get(o, "total_duration")), 1500000000);
    assert_int_equal(json_integer_value(json_object_get(o, "load_duration")), 250000000);
    assert_int_equal(json_integer_value(json_object_get(o, "prompt_eval_count")), 20);
    assert_int_equal(json_integer_value(json_object_get(o, "prompt_eval_duration")), 12500000);
    assert_int_equal(json_integer_value(json_object_get(o, "eval_count")), 8);
    assert_int_equal(json_integer_value(json_object_get(o, "eval_duration")), 400000000);
    assert_int_equal(json_integer_value(json_object_get(o, "prompt_cache_count")), 16);
    const char *ts = json_string_value(json_object_get(o, "created_at"));
    assert_int_equal(strlen(ts), 30);
    assert_true(ts[10] == 'T' && ts[29] == 'Z');
    json_decref(o);

    /* a streamed line: text only, not done, no figures */
    o = loads(ollama_chunk(&j, "tiny", "He", 2, "", 0));
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "message"), "content")), "He");
    assert_true(json_is_false(json_object_get(o, "done")));
    assert_null(json_object_get(o, "eval_count"));
    json_decref(o);

    /* a thinking model: the reasoning goes to "thinking", unless think is false */
    j.think_open = "<think>";
    j.think_close = "</think>";
    j.text = (char *)"<think>hmm</think>Yes";
    j.text_len = strlen(j.text);
    j.finish = FINISH_STOP;
    o = loads(ollama_response(&j, "tiny"));
    m = json_object_get(o, "message");
    assert_string_equal(json_string_value(json_object_get(m, "thinking")), "hmm");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "Yes");
    assert_string_equal(json_string_value(json_object_get(o, "done_reason")), "stop");
    json_decref(o);
    j.req.think = 0;
    o = loads(ollama_response(&j, "tiny"));
    assert_null(json_object_get(json_object_get(o, "message"), "thinking"));
    json_decref(o);
    gen_request_free(&j.req);

    /* generate: "response"; the load and unload answers carry no eval figures */
    memset(&j, 0, sizeof(j));
    assert_true(parse(OLLAMA_GENERATE, "{\"model\": \"tiny\", \"keep_alive\": 0}", &j.req, &e));
    j.finish = FINISH_STOP;
    o = loads(ollama_final(&j, "tiny"));
    assert_string_equal(json_string_value(json_object_get(o, "response")), "");
    assert_string_equal(json_string_value(json_object_get(o, "done_reason")), "unload");
    assert_null(json_object_get(o, "eval_count"));
    assert_null(json_object_get(o, "message"));
    json_decref(o);
    gen_request_free(&j.req);
    assert_true(parse(OLLAMA_GENERATE, "{\"model\": \"tiny\"}", &j.req, &e));
    o = loads(ollama_final(&j, "tiny"));
    assert_string_equal(json_string_value(json_object_get(o, "done_reason")), "load");
    json_decref(o);
    gen_request_free(&j.req);
}

#define WEATHER_TOOL                                                                                       \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather\","    \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"            \
    " \"required\": [\"city\"]}}}"

/* Ollama's tool shapes (its docs/api.md): tools as OpenAI's functions, an
 * assistant turn's calls with arguments as an object and no content, a
 * role "tool" result with tool_name; the calls of an answer in
 * message.tool_calls with arguments as an object. */
static void test_tools(void **state)
{
    (void)state;
    struct job j;
    memset(&j, 0, sizeof(j));
    struct api_error e;
    /* a round trip's last request: user, the call, its result */
    assert_true(parse(OLLAMA_CHAT,
                      "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"Weather in Toronto?\"},"
                      " {\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"get_weather\","
                      " \"arguments\": {\"city\": \"Toronto\"}}}]},"
                      " {\"role\": \"tool\", \"content\": \"11 degrees celsius\", \"tool_name\": \"get_weather\"}],"
                      " \"tools\": [" WEATHER_TOOL "]}",
                      &j.req, &e));
    assert_non_null(j.req.tools);
    assert_int_equal(json_array_size(j.req.tools), 1);
    assert_int_equal(j.req.tool_choice, TOOL_CHOICE_DEFAULT); /* Ollama has none: the server's */
    assert_int_equal(j.req.n_msgs, 3);
    assert_string_equal(j.req.msgs[1].content, ""); /* no content: empty, as Ollama takes it */
    /* rendered for Gemma (the generic format) with the server's --tool-choice required:
     * after a tool result the answer is text (no call forced, none parsed) */
    assert_true(api_tools_render(&j.req, INFER_CHAT_GEMMA, TOOL_CHOICE_REQUIRED, &e));
    assert_int_equal(j.req.tool_choice_eff, TOOL_CHOICE_NONE);
    assert_null(j.req.grammar);
    assert_int_equal(j.req.n_msgs, 4); /* system (the catalogue), user, assistant, user (the result) */
    assert_string_equal(j.req.msgs[0].role, "system");
    assert_non_null(strstr(j.req.msgs[0].content, "\"name\":\"get_weather\""));
    assert_string_equal(j.req.msgs[2].role, "assistant");
    assert_string_equal(j.req.msgs[2].content,
                        "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Toronto\"}}]}");
    assert_string_equal(j.req.msgs[3].role, "user");
    assert_string_equal(j.req.msgs[3].content, "Tool result (get_weather):\n11 degrees celsius");
    j.text = (char *)"It is 11 degrees.";
    j.text_len = strlen(j.text);
    j.finish = FINISH_STOP;
    assert_null(ollama_tool_calls_chunk(&j, "tiny", 0));
    json_t *o = loads(ollama_response(&j, "tiny"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "message"), "content")),
                        "It is 11 degrees.");
    assert_null(json_object_get(json_object_get(o, "message"), "tool_calls"));
    json_decref(o);
    gen_request_free(&j.req);

    /* the user's turn with --tool-choice required: a forced call (a grammar) */
    memset(&j, 0, sizeof(j));
    assert_true(parse(OLLAMA_CHAT,
                      "{\"model\": \"tiny\", \"stream\": true, \"messages\": [{\"role\": \"user\", \"content\": "
                      "\"Weather in Tokyo?\"}], \"tools\": [" WEATHER_TOOL "]}",
                      &j.req, &e));
    assert_true(api_tools_render(&j.req, INFER_CHAT_GEMMA, TOOL_CHOICE_REQUIRED, &e));
    assert_int_equal(j.req.tool_choice_eff, TOOL_CHOICE_REQUIRED);
    assert_non_null(j.req.grammar);
    snprintf(j.id, sizeof(j.id), "cmpl-0123456789abcdef");
    j.text = (char *)"{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}]}";
    j.text_len = strlen(j.text);
    j.finish = FINISH_STOP;
    j.t_arrival = 10;
    j.t_done = 11;
    j.stats = (struct job_stats){.prompt_tokens = 50, .completion_tokens = 20, .prompt_ms = 5, .predicted_ms = 100};
    o = loads(ollama_response(&j, "tiny"));
    json_t *m = json_object_get(o, "message");
    assert_string_equal(json_string_value(json_object_get(m, "role")), "assistant");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "");
    json_t *calls = json_object_get(m, "tool_calls");
    assert_int_equal(json_array_size(calls), 1);
    json_t *c0 = json_array_get(calls, 0), *f = json_object_get(c0, "function");
    assert_string_equal(json_string_value(json_object_get(c0, "id")), "call_0123456789abcdef_0");
    assert_int_equal(json_integer_value(json_object_get(f, "index")), 0);
    assert_string_equal(json_string_value(json_object_get(f, "name")), "get_weather");
    assert_true(json_is_object(json_object_get(f, "arguments"))); /* an object, not OpenAI's string */
    assert_string_equal(json_string_value(json_object_get(json_object_get(f, "arguments"), "city")), "Tokyo");
    assert_true(json_is_true(json_object_get(o, "done")));
    assert_string_equal(json_string_value(json_object_get(o, "done_reason")), "stop");
    assert_int_equal(json_integer_value(json_object_get(o, "eval_count")), 20);
    json_decref(o);
    /* streamed: the calls in a line that is not done yet, without figures; then the final line */
    o = loads(ollama_tool_calls_chunk(&j, "tiny", 0));
    assert_true(json_is_false(json_object_get(o, "done")));
    assert_null(json_object_get(o, "done_reason"));
    assert_null(json_object_get(o, "eval_count"));
    calls = json_object_get(json_object_get(o, "message"), "tool_calls");
    assert_int_equal(json_array_size(calls), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "name")),
        "get_weather");
    json_decref(o);
    o = loads(ollama_final(&j, "tiny"));
    assert_null(json_object_get(json_object_get(o, "message"), "tool_calls"));
    assert_string_equal(json_string_value(json_object_get(o, "done_reason")), "stop");
    json_decref(o);
    /* a call to a function that was not offered stays text */
    j.text = (char *)"{\"tool_calls\": [{\"name\": \"rm_rf\", \"arguments\": {}}]}";
    j.text_len = strlen(j.text);
    assert_null(ollama_tool_calls_chunk(&j, "tiny", 0));
    o = loads(ollama_response(&j, "tiny"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "message"), "content")), j.text);
    json_decref(o);
    /* a stream whose text went out as content before a tagged call: the end line carries the call
     * and no content again (http.c streams text that cannot be a call, api_tools_stream_len) */
    j.text = (char *)"Let me look. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
    j.text_len = strlen(j.text);
    size_t sent = api_tools_stream_len(j.text, j.text_len);
    assert_int_equal(sent, strlen("Let me look. "));
    o = loads(ollama_tool_calls_chunk(&j, "tiny", sent));
    m = json_object_get(o, "message");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "");
    json_t *args = json_object_get(
        json_object_get(json_array_get(json_object_get(m, "tool_calls"), 0), "function"), "arguments");
    assert_string_equal(json_string_value(json_object_get(args, "city")), "Oslo");
    json_decref(o);
    o = loads(ollama_tool_calls_chunk(&j, "tiny", 0)); /* nothing streamed before: the text comes along */
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "message"), "content")), "Let me look.");
    json_decref(o);
    gen_request_free(&j.req);

    /* a tool_choice of the request's own wins over the server's default, also after a result */
    memset(&j, 0, sizeof(j));
    assert_true(parse(OLLAMA_CHAT,
                      "{\"model\": \"tiny\", \"tool_choice\": \"required\", \"messages\": [{\"role\": \"user\","
                      " \"content\": \"u\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\":"
                      " {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}}]},"
                      " {\"role\": \"tool\", \"content\": \"r\"}], \"tools\": [" WEATHER_TOOL "]}",
                      &j.req, &e));
    assert_true(api_tools_render(&j.req, INFER_CHAT_GEMMA, TOOL_CHOICE_AUTO, &e));
    assert_int_equal(j.req.tool_choice_eff, TOOL_CHOICE_REQUIRED);
    assert_non_null(j.req.grammar);
    /* arguments sent as JSON text (OpenAI's way) render as the object */
    assert_non_null(strstr(j.req.msgs[2].content, "\"arguments\": {\"city\":\"Oslo\"}"));
    gen_request_free(&j.req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_options), cmocka_unit_test(test_generate_prompt),
        cmocka_unit_test(test_refused),      cmocka_unit_test(test_error_and_names),
        cmocka_unit_test(test_response_shapes), cmocka_unit_test(test_tools),
    };
    return cmocka_run_group_tests_name("server-ollama", tests, NULL, NULL);
}
