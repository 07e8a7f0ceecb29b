/*
 * test-server-api.c - unit tests of the server's request parsing and
 * response building (src/server/api.c), without a model or a socket:
 * field types and ranges, the OpenAI error shape, the usage/timings objects,
 * streamed chunks and the --keep-alive duration syntax.  The same code is
 * exercised end to end by tests/server/run.sh.
 */
#include "../../src/server/server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static bool parse(enum gen_kind k, const char *body, struct gen_request *r, struct api_error *e)
{
    memset(e, 0, sizeof(*e));
    return api_parse_request(k, body, strlen(body), r, e);
}

static void expect_400(enum gen_kind k, const char *body)
{
    struct gen_request r;
    struct api_error e;
    if (parse(k, body, &r, &e)) {
        gen_request_free(&r);
        fail_msg("accepted: %s", body);
    }
    assert_int_equal(e.status, 400);
    assert_string_equal(e.type, "invalid_request_error");
    assert_true(strlen(e.message) > 0);
}

static void test_chat_fields(void **state)
{
    (void)state;
    struct gen_request r;
    struct api_error e;
    assert_true(parse(GEN_CHAT,
                      "{\"model\": \"m\", \"messages\": [{\"role\": \"developer\", \"content\": \"sys\"},"
                      " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
                      " {\"type\": \"text\", \"text\": \"b\"}]}],"
                      " \"max_completion_tokens\": 7, \"temperature\": 0, \"top_p\": 0.5, \"top_k\": 3,"
                      " \"min_p\": 0.25, \"seed\": 42, \"stop\": [\"x\", \"\", \"yz\"], \"stream\": true,"
                      " \"stream_options\": {\"include_usage\": true}, \"cache_salt\": \"t1\","
                      " \"presence_penalty\": 0, \"unknown\": {\"deep\": [1]}}",
                      &r, &e));
    assert_int_equal(r.kind, GEN_CHAT);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.n_msgs, 2);
    assert_string_equal(r.msgs[0].role, "system"); /* developer is the system role */
    assert_string_equal(r.msgs[1].content, "ab");  /* text parts joined */
    assert_int_equal(r.max_tokens, 7);
    assert_true(r.sp.temp == 0.0f && r.sp.top_p == 0.5f && r.sp.min_p == 0.25f);
    assert_int_equal(r.sp.top_k, 3);
    assert_int_equal(r.sp.seed, 42);
    assert_int_equal(r.n_stop, 2); /* the empty one is dropped */
    assert_string_equal(r.stop[1], "yz");
    assert_true(r.stream && r.include_usage);
    assert_string_equal(r.cache_salt, "t1");
    gen_request_free(&r);

    /* defaults; null counts as absent; seed -1 is random */
    assert_true(parse(GEN_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": null,"
                                " \"stop\": \"s\", \"seed\": -1}", &r, &e));
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.n_stop, 1);
    assert_int_equal(r.sp.seed, INFER_SEED_RANDOM);
    infer_sampler_params d;
    infer_sampler_params_default(&d);
    assert_true(r.sp.temp == d.temp && r.sp.top_k == d.top_k);
    assert_false(r.stream);
    gen_request_free(&r);
}

static void test_completion_prompt(void **state)
{
    (void)state;
    struct gen_request r;
    struct api_error e;
    assert_true(parse(GEN_COMPLETION, "{\"prompt\": \"once\"}", &r, &e));
    assert_string_equal(r.prompt, "once");
    gen_request_free(&r);
    assert_true(parse(GEN_COMPLETION, "{\"prompt\": [\"one\"]}", &r, &e));
    assert_string_equal(r.prompt, "one");
    gen_request_free(&r);
    assert_true(parse(GEN_COMPLETION, "{\"prompt\": [2, 5, 2147483647]}", &r, &e));
    assert_null(r.prompt);
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 2147483647);
    gen_request_free(&r);
}

static void test_rejected(void **state)
{
    (void)state;
    const char *chat[] = {
        "", "{", "[]", "null", "{\"messages\": []}", "{\"messages\": \"x\"}", "{}",
        "{\"messages\": [{\"role\": \"user\"}]}",
        "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 0}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 1.5}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 99999999999999999999}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": 1e400}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": 2.5}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_p\": \"high\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": [1]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": 1}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 2}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"required\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"xml\"}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": "
        "\"json_schema\", \"json_schema\": {\"schema\": {\"type\": \"string\", \"pattern\": \"a\"}}}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream_options\": 3}",
    };
    for (size_t i = 0; i < sizeof(chat) / sizeof(chat[0]); i++)
        expect_400(GEN_CHAT, chat[i]);
    const char *compl[] = {"{\"prompt\": 1}", "{\"prompt\": [-1]}", "{\"prompt\": [\"a\", \"b\"]}",
                           "{\"prompt\": [4294967296]}", "{\"prompt\": []}", "{\"prompt\": {}}"};
    for (size_t i = 0; i < sizeof(compl) / sizeof(compl[0]); i++)
        expect_400(GEN_COMPLETION, compl[i]);

    /* nesting deeper than jansson's limit is a parse error, not a crash */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    assert_non_null(deep);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    expect_400(GEN_CHAT, deep);
    free(deep);
}

static void test_error_json(void **state)
{
    (void)state;
    struct api_error e;
    api_error_set(&e, 404, "invalid_request_error", "model_not_found", "no model '%s'", "x\"y");
    char *s = api_error_json(&e);
    json_error_t je;
    json_t *o = json_loads(s, 0, &je);
    assert_non_null(o);
    json_t *err = json_object_get(o, "error");
    assert_string_equal(json_string_value(json_object_get(err, "message")), "no model 'x\"y'");
    assert_string_equal(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    assert_string_equal(json_string_value(json_object_get(err, "code")), "model_not_found");
    assert_true(json_is_null(json_object_get(err, "param")));
    json_decref(o);
    free(s);
}

static void test_response_shapes(void **state)
{
    (void)state;
    struct job j;
    memset(&j, 0, sizeof(j));
    j.req.kind = GEN_CHAT;
    j.req.include_usage = true;
    snprintf(j.id, sizeof(j.id), "chatcmpl-1");
    j.text = "hello";
    j.text_len = 5;
    j.finish = FINISH_LENGTH;
    j.stats = (struct job_stats){.prompt_tokens = 100, .cached_tokens = 64, .completion_tokens = 5,
                                 .prompt_ms = 18.0, .predicted_ms = 50.0};
    json_t *r = api_response(&j, "model-x");
    assert_string_equal(json_string_value(json_object_get(r, "object")), "chat.completion");
    json_t *c0 = json_array_get(json_object_get(r, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "message"), "content")), "hello");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "length");
    json_t *u = json_object_get(r, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 105);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")),
                     64);
    json_t *t = json_object_get(r, "timings");
    assert_int_equal(json_integer_value(json_object_get(t, "cache_n")), 64);
    assert_int_equal(json_integer_value(json_object_get(t, "prompt_n")), 36);
    assert_true(json_real_value(json_object_get(t, "prompt_per_second")) == 2000.0);
    assert_true(json_real_value(json_object_get(t, "predicted_per_second")) == 100.0);
    json_decref(r);

    /* the first chunk carries the role; the last the finish reason and timings */
    json_t *c = api_chunk(&j, "model-x", "", 0, "", 0, true, FINISH_NONE);
    json_t *delta = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
    assert_string_equal(json_string_value(json_object_get(delta, "role")), "assistant");
    assert_true(json_is_null(json_object_get(c, "usage")));
    assert_null(json_object_get(c, "timings"));
    json_decref(c);
    c = api_chunk(&j, "model-x", "lo", 2, "", 0, false, FINISH_STOP);
    json_t *ch = json_array_get(json_object_get(c, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ch, "delta"), "content")), "lo");
    assert_null(json_object_get(json_object_get(ch, "delta"), "role"));
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "stop");
    assert_non_null(json_object_get(c, "timings"));
    json_decref(c);
    c = api_usage_chunk(&j, "model-x");
    assert_int_equal(json_array_size(json_object_get(c, "choices")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "usage"), "prompt_tokens")), 100);
    json_decref(c);

    j.req.kind = GEN_COMPLETION;
    r = api_response(&j, "model-x");
    assert_string_equal(json_string_value(json_object_get(r, "object")), "text_completion");
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "choices"), 0), "text")),
                        "hello");
    json_decref(r);
}

/* A thinking model's reasoning is reasoning_content, not content (as in
 * llama.cpp's server), in the response and in streamed deltas. */
static void test_reasoning_content(void **state)
{
    (void)state;
    struct job j;
    memset(&j, 0, sizeof(j));
    j.req.kind = GEN_CHAT;
    snprintf(j.id, sizeof(j.id), "chatcmpl-2");
    j.text = "<think>\nThe user says hi.\n</think>\n\nHello!";
    j.text_len = strlen(j.text);
    j.finish = FINISH_STOP;
    j.think_open = "<think>";
    j.think_close = "</think>";
    json_t *r = api_response(&j, "model-x");
    json_t *m = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "Hello!");
    assert_string_equal(json_string_value(json_object_get(m, "reasoning_content")), "The user says hi.");
    json_decref(r);
    /* no reasoning: no reasoning_content key */
    j.text = "Hello!";
    j.text_len = 6;
    r = api_response(&j, "model-x");
    m = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "Hello!");
    assert_null(json_object_get(m, "reasoning_content"));
    json_decref(r);
    /* a model without markers: the text as generated */
    j.text = "<think>x</think>y";
    j.text_len = strlen(j.text);
    j.think_open = j.think_close = NULL;
    r = api_response(&j, "model-x");
    m = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(m, "content")), "<think>x</think>y");
    json_decref(r);
    /* a streamed reasoning delta */
    json_t *c = api_chunk(&j, "model-x", "", 0, "Hmm", 3, false, FINISH_NONE);
    json_t *delta = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
    assert_string_equal(json_string_value(json_object_get(delta, "reasoning_content")), "Hmm");
    assert_null(json_object_get(delta, "content"));
    json_decref(c);
}

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double seconds;
    } ok[] = {{"5m", 300}, {"30s", 30}, {"1h30m", 5400}, {"300ms", 0.3}, {"0", 0}, {"10", 10},
              {"-1", -1}, {"-5m", -1}, {"1.5h", 5400}, {"2h0m5s", 7205}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        double v = 12345;
        assert_true(server_parse_duration(ok[i].text, &v));
        assert_true(v > ok[i].seconds - 1e-9 && v < ok[i].seconds + 1e-9);
    }
    const char *bad[] = {"", "m", "5x", "5m-3s", "abc", "inf", "nan", "5 m", "1e999s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double v;
        assert_false(server_parse_duration(bad[i], &v));
    }
}

/* A streamed answer to a request with tools: the text goes out as content
 * as soon as it cannot be a call any more (chat pages such as Open WebUI
 * offer tools with every message), a call is held to the end; what was
 * streamed is not sent again with the calls. */
static void test_tools_stream_len(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t n; /* bytes that may go out */
    } cases[] = {
        {"", 0},
        {"  \n", 0},                    /* white space alone: a call may follow */
        {"{\"tool_calls\": [", 0},      /* generic / llama3: a whole-answer call */
        {"  [TOOL_CALLS] [", 0},         /* mistral */
        {"[1, 2]", 0},
        {"<", 0},                        /* could still be <tool_call> */
        {" <tool_c", 0},
        {"<tool_call>{\"name\"", 0},     /* hermes */
        {"<b>Hi</b>", 9},                /* '<' but not the tag: content */
        {"Hello", 5},
        {"  Hello there", 13},
        {"Hello <", 6},                  /* the tail that may begin the tag waits */
        {"Hello <tool_ca", 6},
        {"Hello <tool_x", 13},
        {"Hello <tool_call>{\"name\": \"f\"}</tool_call> and <tool_call>", 6},
        {"Hello {\"name\": \"f\"}", 19}, /* JSON after text is not a call */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = api_tools_stream_len(cases[i].text, strlen(cases[i].text));
        if (n != cases[i].n)
            fail_msg("%s: %zu, expected %zu", cases[i].text, n, cases[i].n);
    }
    assert_int_equal(api_tools_stream_len(NULL, 0), 0);
    /* never shrinks as the text grows */
    const char *t = "Sure. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
    size_t last = 0;
    for (size_t k = 0; k <= strlen(t); k++) {
        size_t n = api_tools_stream_len(t, k);
        assert_true(n >= last && n <= k);
        last = n;
    }
    assert_int_equal(last, 6);

    /* the end of such a stream: the call from the held tail, no content again */
    struct gen_request r;
    struct api_error e;
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"weather?\"}], \"tools\": [{\"type\": "
                       "\"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                       "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]}";
    assert_true(parse(GEN_CHAT, body, &r, &e));
    struct job j;
    memset(&j, 0, sizeof(j));
    j.req = r;
    j.req.tool_choice_eff = TOOL_CHOICE_AUTO;
    snprintf(j.id, sizeof(j.id), "chatcmpl-7");
    j.text = (char *)t;
    j.text_len = strlen(t);
    json_t *c = api_tool_calls_chunk(&j, "m", 6);
    assert_non_null(c);
    json_t *delta = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
    json_t *call = json_array_get(json_object_get(delta, "tool_calls"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "get_weather");
    assert_null(json_object_get(delta, "content")); /* "Sure." went out already */
    json_decref(c);
    c = api_tool_calls_chunk(&j, "m", 0); /* nothing streamed: the text comes with the call */
    delta = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
    assert_string_equal(json_string_value(json_object_get(delta, "content")), "Sure.");
    json_decref(c);
    j.text = "Sure. No call here.";
    j.text_len = strlen(j.text);
    assert_null(api_tool_calls_chunk(&j, "m", api_tools_stream_len(j.text, j.text_len)));
    assert_null(api_tool_calls_chunk(&j, "m", 1000)); /* past the end: clamped */

    /* a thinking model's call after its reasoning (Qwen3): the call from the
     * answer, the reasoning as reasoning_content, never in content */
    j.think_open = "<think>";
    j.think_close = "</think>";
    j.text = "<think>\nOslo, so call it.\n</think>\n\n<tool_call>{\"name\": \"get_weather\", \"arguments\": "
             "{\"city\": \"Oslo\"}}</tool_call>";
    j.text_len = strlen(j.text);
    j.finish = FINISH_STOP;
    char *reasoning = NULL;
    assert_int_equal(api_answer_start(&j, &reasoning), strstr(j.text, "<tool_call>") - j.text);
    assert_string_equal(reasoning, "Oslo, so call it.");
    free(reasoning);
    json_t *o = api_response(&j, "m");
    json_t *m = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(m, "reasoning_content")), "Oslo, so call it.");
    assert_true(json_is_null(json_object_get(m, "content")));
    call = json_array_get(json_object_get(m, "tool_calls"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "get_weather");
    json_decref(o);
    c = api_tool_calls_chunk(&j, "m", 0); /* streamed: the reasoning went out before */
    delta = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
    assert_non_null(json_object_get(delta, "tool_calls"));
    assert_null(json_object_get(delta, "content"));
    json_decref(c);
    /* no reasoning: the answer is all of it */
    j.text = "Sure.";
    j.text_len = 5;
    assert_int_equal(api_answer_start(&j, &reasoning), 0);
    assert_null(reasoning);
    gen_request_free(&j.req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_fields),   cmocka_unit_test(test_completion_prompt),
        cmocka_unit_test(test_rejected),      cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_response_shapes), cmocka_unit_test(test_durations),
        cmocka_unit_test(test_reasoning_content), cmocka_unit_test(test_tools_stream_len),
    };
    return cmocka_run_group_tests_name("server-api", tests, NULL, NULL);
}
