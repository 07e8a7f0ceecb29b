/*
 * test-chat.c - chat templates: golden renderings of every family written
 * from its published format, detection from template excerpts, architecture
 * and vocabulary, name overrides, the incremental-prefix property, and bad
 * input.
 */
#include "test-common.h"

#include "text/chat.h"
#include "text/reasoning.h"
#include "text/tokenizer.h"

#include <stdbool.h>

#define N_FAM CHAT_N_FAMILIES
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const enum chat_family all_families[] = {
    CHAT_CHATML,     CHAT_GEMMA,      CHAT_LLAMA3,     CHAT_LLAMA2,     CHAT_MISTRAL,
    CHAT_MISTRAL_V3, CHAT_MISTRAL_V3_TEKKEN, CHAT_MISTRAL_V7, CHAT_MISTRAL_V7_TEKKEN, CHAT_PHI3,
    CHAT_PHI4,       CHAT_GRANITE,    CHAT_DEEPSEEK3,
};

#define DS_USER "<\xef\xbd\x9c" "User\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>"

static bool is_inst(enum chat_family f)
{
    return f == CHAT_LLAMA2 || f == CHAT_MISTRAL || f == CHAT_MISTRAL_V3 || f == CHAT_MISTRAL_V3_TEKKEN ||
           f == CHAT_MISTRAL_V7 || f == CHAT_MISTRAL_V7_TEKKEN;
}

static bool is_tekken(enum chat_family f) { return f == CHAT_MISTRAL_V3_TEKKEN || f == CHAT_MISTRAL_V7_TEKKEN; }

static void expect_render(enum chat_family f, const struct chat_msg *m, size_t n, bool add_gen, const char *want)
{
    char *got = chat_format(f, m, n, add_gen);
    if (!got)
        fail_msg("%s: %s", chat_family_name(f), infer_last_error());
    if (strcmp(got, want) != 0)
        fail_msg("%s:\n got: '%s'\nwant: '%s'", chat_family_name(f), got, want);
    free(got);
}

/* ------------------------------------------------------------ goldens */

static const struct chat_msg conv[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
};

static void test_golden_single_turn(void **state)
{
    (void)state;
    static const char *const want[N_FAM] = {
        [CHAT_CHATML] = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        [CHAT_GEMMA] = "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
        [CHAT_LLAMA3] = "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        [CHAT_LLAMA2] = "[INST] Hello [/INST]",
        [CHAT_MISTRAL] = "[INST] Hello [/INST]",
        [CHAT_MISTRAL_V3] = "[INST] Hello[/INST]",
        [CHAT_MISTRAL_V3_TEKKEN] = "[INST]Hello[/INST]",
        [CHAT_MISTRAL_V7] = "[INST] Hello[/INST]",
        [CHAT_MISTRAL_V7_TEKKEN] = "[INST]Hello[/INST]",
        [CHAT_PHI3] = "<|user|>\nHello<|end|>\n<|assistant|>\n",
        [CHAT_PHI4] = "<|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>",
        [CHAT_GRANITE] = "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
                         "<|start_of_role|>assistant<|end_of_role|>",
        [CHAT_DEEPSEEK3] = DS_USER "Hello" DS_ASSISTANT,
    };
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++)
        expect_render(all_families[i], &conv[1], 1, true, want[all_families[i]]);
}

static void test_golden_system_multi_turn(void **state)
{
    (void)state;
    static const char *const want[N_FAM] = {
        [CHAT_CHATML] = "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
                        "<|im_start|>user\nHello<|im_end|>\n"
                        "<|im_start|>assistant\nHi there<|im_end|>\n"
                        "<|im_start|>user\nWho are you<|im_end|>\n"
                        "<|im_start|>assistant\n",
        [CHAT_GEMMA] = "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
                       "<start_of_turn>model\nHi there<end_of_turn>\n"
                       "<start_of_turn>user\nWho are you<end_of_turn>\n"
                       "<start_of_turn>model\n",
        [CHAT_LLAMA3] = "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        [CHAT_LLAMA2] = "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there</s>"
                        "<s>[INST] Who are you [/INST]",
        [CHAT_MISTRAL] = "[INST] You are a helpful assistant\n\nHello [/INST] Hi there</s>"
                         "[INST] Who are you [/INST]",
        [CHAT_MISTRAL_V3] = "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>"
                            "[INST] Who are you[/INST]",
        [CHAT_MISTRAL_V3_TEKKEN] = "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>"
                                   "[INST]Who are you[/INST]",
        [CHAT_MISTRAL_V7] = "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT]"
                            "[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]",
        [CHAT_MISTRAL_V7_TEKKEN] = "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT]"
                                   "[INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]",
        [CHAT_PHI3] = "<|system|>\nYou are a helpful assistant<|end|>\n"
                      "<|user|>\nHello<|end|>\n"
                      "<|assistant|>\nHi there<|end|>\n"
                      "<|user|>\nWho are you<|end|>\n"
                      "<|assistant|>\n",
        [CHAT_PHI4] = "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|>"
                      "<|im_start|>user<|im_sep|>Hello<|im_end|>"
                      "<|im_start|>assistant<|im_sep|>Hi there<|im_end|>"
                      "<|im_start|>user<|im_sep|>Who are you<|im_end|>"
                      "<|im_start|>assistant<|im_sep|>",
        [CHAT_GRANITE] = "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
                         "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
                         "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
                         "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
                         "<|start_of_role|>assistant<|end_of_role|>",
        [CHAT_DEEPSEEK3] = "You are a helpful assistant\n\n" DS_USER "Hello" DS_ASSISTANT "Hi there" DS_END
                           DS_USER "Who are you" DS_ASSISTANT,
    };
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++)
        expect_render(all_families[i], conv, ARRAY_LEN(conv), true, want[all_families[i]]);
}

/* Without the generation prompt, after an answer: the turn is closed. */
static void test_golden_no_generation_prompt(void **state)
{
    (void)state;
    static const char *const want[N_FAM] = {
        [CHAT_CHATML] = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n",
        [CHAT_GEMMA] = "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n",
        [CHAT_LLAMA3] = "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>",
        [CHAT_LLAMA2] = "[INST] Hello [/INST] Hi there</s>",
        [CHAT_MISTRAL] = "[INST] Hello [/INST] Hi there</s>",
        [CHAT_MISTRAL_V3] = "[INST] Hello[/INST] Hi there</s>",
        [CHAT_MISTRAL_V3_TEKKEN] = "[INST]Hello[/INST]Hi there</s>",
        [CHAT_MISTRAL_V7] = "[INST] Hello[/INST] Hi there</s>",
        [CHAT_MISTRAL_V7_TEKKEN] = "[INST]Hello[/INST]Hi there</s>",
        [CHAT_PHI3] = "<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n",
        [CHAT_PHI4] = "<|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|>",
        [CHAT_GRANITE] = "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
                         "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n",
        [CHAT_DEEPSEEK3] = DS_USER "Hello" DS_ASSISTANT "Hi there" DS_END,
    };
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++)
        expect_render(all_families[i], &conv[1], 2, false, want[all_families[i]]);
    /* the free-order families may prompt for another answer after one */
    expect_render(CHAT_CHATML, &conv[1], 2, true,
                  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n"
                  "<|im_start|>assistant\n");
    /* a lone system message is the open beginning of the conversation */
    expect_render(CHAT_GEMMA, conv, 1, false, "<start_of_turn>user\nYou are a helpful assistant\n\n");
    expect_render(CHAT_LLAMA2, conv, 1, false, "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n");
    expect_render(CHAT_CHATML, conv, 1, true,
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>assistant\n");
}

/* Which text each family trims: as its published template does for system and
 * user text; never the assistant's answer (see chat.c). */
static void test_golden_whitespace(void **state)
{
    (void)state;
    const struct chat_msg m[] = {
        {"system", " Be brief. "},
        {"user", "  Hello \n"},
        {"assistant", "   I am an assistant   "},
        {"user", "\tAnother question\n"},
    };
    expect_render(CHAT_GEMMA, m, 4, true,
                  "<start_of_turn>user\n Be brief. \n\nHello<end_of_turn>\n"
                  "<start_of_turn>model\n   I am an assistant   <end_of_turn>\n"
                  "<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n");
    expect_render(CHAT_LLAMA3, m, 4, false,
                  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n   I am an assistant   <|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>");
    expect_render(CHAT_CHATML, m, 2, false,
                  "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\n  Hello \n<|im_end|>\n");
    expect_render(CHAT_LLAMA2, m, 4, true,
                  "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHello [/INST]   I am an assistant   </s>"
                  "<s>[INST] Another question [/INST]");
    expect_render(CHAT_MISTRAL_V7, m, 4, true,
                  "[SYSTEM_PROMPT]  Be brief. [/SYSTEM_PROMPT][INST]   Hello \n[/INST]   I am an assistant   </s>"
                  "[INST] \tAnother question\n[/INST]");
}

/* The [INST] families put one space before an answer; an answer generated by
 * a SentencePiece model already starts with it, and renders the same. */
static void test_inst_answer_space(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++) {
        enum chat_family f = all_families[i];
        if (!is_inst(f) || is_tekken(f))
            continue;
        const struct chat_msg a[] = {{"user", "Hi"}, {"assistant", "Yes"}, {"user", "Ok"}};
        const struct chat_msg b[] = {{"user", "Hi"}, {"assistant", " Yes"}, {"user", "Ok"}};
        char *ra = chat_format(f, a, 3, true), *rb = chat_format(f, b, 3, true);
        assert_non_null(ra);
        assert_non_null(rb);
        assert_string_equal(ra, rb);
        assert_non_null(strstr(ra, "[/INST] Yes</s>"));
        free(ra);
        free(rb);
    }
    const struct chat_msg t[] = {{"user", "Hi"}, {"assistant", " Yes"}};
    expect_render(CHAT_MISTRAL_V3_TEKKEN, t, 2, false, "[INST]Hi[/INST] Yes</s>");
    const struct chat_msg e[] = {{"user", "Hi"}, {"assistant", ""}};
    expect_render(CHAT_MISTRAL_V3, e, 2, false, "[INST] Hi[/INST] </s>");
}

/* ------------------------------------------------------------ detection */

struct tmpl_case {
    const char *what;
    const char *text;
    enum chat_family want;
};

/* Excerpts of real chat templates (shortened), each carrying the markers its
 * model's full template has. */
static const struct tmpl_case tmpl_cases[] = {
    {"OpenHermes chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     CHAT_CHATML},
    {"Qwen2.5",
     "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- else %}{%- if messages[0]['role'] == 'system' %}"
     "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}"
     "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
     "{%- endif %}{%- endif %}",
     CHAT_CHATML},
    {"SmolLM2",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
     "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
     "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}",
     CHAT_CHATML},
    {"gemma-7b-it",
     "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
     "{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}"
     "{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim "
     "+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     CHAT_GEMMA},
    {"gemma-3",
     "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
     "messages[0]['content'] + '\\n\\n' -%}{%- set loop_messages = messages[1:] -%}{%- endif -%}"
     "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}",
     CHAT_GEMMA},
    {"Llama-3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
     "{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}",
     CHAT_LLAMA3},
    {"Llama-2-chat",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and "
     "system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
     "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
     "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' "
     "+ eos_token }}{% endif %}{% endfor %}",
     CHAT_LLAMA2},
    {"Mistral-7B-Instruct-v0.2 (HF)",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
     "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
     CHAT_MISTRAL},
    {"Mistral v1 (official)",
     "{%- for message in loop_messages %}{%- if message['role'] == 'user' %}{%- if loop.first and "
     "system_message is defined %}{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}"
     "{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}{%- elif message['role'] == "
     "'assistant' %}{{- ' ' + message['content'] + eos_token}}{%- endif %}{%- endfor %}",
     CHAT_MISTRAL},
    {"Mistral v3 (official)",
     "{%- if tools is not none and (message == user_messages[-1]) %}{{- \"[AVAILABLE_TOOLS] [\" }}{%- endif %}"
     "{%- if loop.last and system_message is defined %}{{- \"[INST] \" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}"
     "{%- endif %}",
     CHAT_MISTRAL_V3},
    {"Mistral Nemo (v3-tekken)",
     "{%- if tools is not none and (message == user_messages[-1]) %}{{- \"[AVAILABLE_TOOLS][\" }}{%- endif %}"
     "{%- if loop.last and system_message is defined %}{{- \"[INST]\" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}{%- else %}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}"
     "{%- endif %}",
     CHAT_MISTRAL_V3_TEKKEN},
    {"Mistral-Large-2411 (v7)",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + "
     "message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + "
     "message['content'] + eos_token }}{% endif %}{% endfor %}",
     CHAT_MISTRAL_V7},
    {"Mistral-Small-3.1 (v7-tekken)",
     "{{- bos_token }}{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{%- for message in "
     "loop_messages %}{%- if message['role'] == 'user' %}{{- '[INST]' + message['content'] + '[/INST]' }}"
     "{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}{%- endif %}{%- endfor %}",
     CHAT_MISTRAL_V7_TEKKEN},
    {"Phi-3-mini",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
     "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == 'assistant') %}"
     "{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
     CHAT_PHI3},
    {"Phi-4",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + "
     "'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}",
     CHAT_PHI4},
    {"Phi-4-mini (phi3's markers, as llama.cpp detects it)",
     "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] "
     "is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + "
     "'<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
     "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}",
     CHAT_PHI3},
    {"Granite 3.x",
     "{%- for message in loop_messages %}{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
     "message['content'] + '<|end_of_text|>\n' }}{%- if loop.last and add_generation_prompt %}"
     "{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}{%- endfor %}",
     CHAT_GRANITE},
    {"DeepSeek-R1-Distill",
     "{% for message in messages %}{% if message['role'] == 'user' %}{{'" DS_USER "' + message['content']}}"
     "{% endif %}{% if message['role'] == 'assistant' %}{% set content = message['content'] %}{% if '</think>' in "
     "content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'" DS_ASSISTANT "' + content + '"
     DS_END "'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{'" DS_ASSISTANT "<think>\\n'}}{% endif %}",
     CHAT_DEEPSEEK3},
    {"Qwen3 (chatml with <think>)",
     "{%- for message in messages %}{%- if message.role == \"assistant\" %}{%- set content = "
     "message.content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}{{- '<|im_start|>' + message.role + "
     "'\\n' + content + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
     "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}"
     "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}",
     CHAT_CHATML},
    {"SmolLM3",
     "{%- set reasoning_mode = \"/think\" -%}{{- \"<|im_start|>system\\n\" -}}{{- \"## Metadata\\n\\n\" -}}"
     "{%- if reasoning_mode == \"/no_think\" -%}{{ \"<|im_start|>assistant\\n\" + \"<think>\\n\\n</think>\\n\" }}"
     "{%- endif -%}",
     CHAT_CHATML},
    {"name as template", "gemma", CHAT_GEMMA},
    {"name as template, alias", "llama2-sys", CHAT_LLAMA2},
};

static void test_detect_templates(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(tmpl_cases); i++) {
        bool fb = true;
        enum chat_family f = chat_detect(tmpl_cases[i].text, "llama", &fb);
        if (f != tmpl_cases[i].want || fb)
            fail_msg("%s: got %s (fallback %d), want %s", tmpl_cases[i].what, chat_family_name(f), fb,
                     chat_family_name(tmpl_cases[i].want));
        /* the template outranks the architecture */
        f = chat_detect(tmpl_cases[i].text, "gemma3", &fb);
        assert_int_equal(f, tmpl_cases[i].want);
    }
}

static void test_detect_unknown_template(void **state)
{
    (void)state;
    static const char *const unknown[] = {
        /* zephyr */
        "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + "
        "eos_token }}{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n'  + message['content'] + "
        "eos_token }}{% endif %}{% endfor %}",
        /* vicuna */
        "{%- for message in messages %}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + "
        "'\\n'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\\n' -}}{%- endif -%}{%- endfor -%}",
        /* SmolVLM: <|im_start|> but not chatml */
        "{{ bos_token }}{% for message in messages %}{{message['role'] | capitalize}}{{':'}}{{ message['content'] }}"
        "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}<|im_start|>",
        "",
        "not a template at all",
    };
    for (size_t i = 0; i < ARRAY_LEN(unknown); i++) {
        bool fb = false;
        enum chat_family f;
        assert_false(chat_detect_template(unknown[i], &f));
        assert_int_equal(chat_detect(unknown[i], NULL, &fb), CHAT_CHATML);
        assert_true(fb);
        /* an unknown template still lets the architecture decide */
        assert_int_equal(chat_detect(unknown[i], "gemma2", &fb), CHAT_GEMMA);
        assert_false(fb);
    }
    bool fb = false;
    assert_int_equal(chat_detect(NULL, NULL, &fb), CHAT_CHATML);
    assert_true(fb);
    assert_int_equal(chat_detect(NULL, NULL, NULL), CHAT_CHATML);
}

static void test_detect_arch(void **state)
{
    (void)state;
    static const struct {
        const char *arch;
        enum chat_family want;
        bool fallback;
    } cases[] = {
        {"gemma", CHAT_GEMMA, false},   {"gemma2", CHAT_GEMMA, false},  {"gemma3", CHAT_GEMMA, false},
        {"qwen2", CHAT_CHATML, false},  {"qwen3", CHAT_CHATML, false},  {"phi3", CHAT_PHI3, false},
        {"granite", CHAT_GRANITE, false}, {"granitemoe", CHAT_GRANITE, false},
        {"smollm3", CHAT_CHATML, false},  {"mistral3", CHAT_CHATML, true},
        {"llama", CHAT_CHATML, true},   {"mamba", CHAT_CHATML, true},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        bool fb = !cases[i].fallback;
        assert_int_equal(chat_detect(NULL, cases[i].arch, &fb), cases[i].want);
        assert_int_equal(fb, cases[i].fallback);
    }
}

/* A fake vocabulary: a NULL-terminated list of pieces. */
static bool list_has(void *ctx, const char *piece)
{
    for (const char *const *p = ctx; *p; p++)
        if (strcmp(*p, piece) == 0)
            return true;
    return false;
}

static void test_detect_vocab(void **state)
{
    (void)state;
    static const char *const v_llama3[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                           "<|eot_id|>", NULL};
    static const char *const v_smollm[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL};
    static const char *const v_mistral3[] = {"<s>", "</s>", "[INST]", "[/INST]", NULL};
    static const char *const v_llama2[] = {"<unk>", "<s>", "</s>", NULL};
    static const char *const v_phi4[] = {"<|im_start|>", "<|im_sep|>", "<|im_end|>", NULL};
    static const char *const v_granite[] = {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", NULL};
    static const char *const v_deepseek[] = {DS_USER, DS_ASSISTANT, DS_END, NULL};
    bool fb = true;
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_llama3, &fb), CHAT_LLAMA3);
    assert_false(fb);
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_smollm, &fb), CHAT_CHATML);
    assert_false(fb);
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_mistral3, &fb), CHAT_MISTRAL_V3);
    assert_false(fb);
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_llama2, &fb), CHAT_CHATML);
    assert_true(fb);
    assert_int_equal(chat_detect_with_vocab(NULL, "phi3", list_has, (void *)v_phi4, &fb), CHAT_PHI3);
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_phi4, &fb), CHAT_PHI4);
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_granite, &fb), CHAT_GRANITE);
    assert_int_equal(chat_detect_with_vocab(NULL, "qwen2", list_has, (void *)v_deepseek, &fb), CHAT_CHATML);
    assert_int_equal(chat_detect_with_vocab(NULL, "llama", list_has, (void *)v_deepseek, &fb), CHAT_DEEPSEEK3);
    assert_false(fb);
    /* architecture before vocabulary, template before both */
    assert_int_equal(chat_detect_with_vocab(NULL, "gemma3", list_has, (void *)v_llama3, &fb), CHAT_GEMMA);
    assert_int_equal(chat_detect_with_vocab("<|im_start|>", "gemma3", list_has, (void *)v_llama3, &fb),
                     CHAT_CHATML);
}

static void test_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++) {
        enum chat_family f = all_families[i], g = CHAT_N_FAMILIES;
        const char *name = chat_family_name(f);
        assert_string_not_equal(name, "unknown");
        assert_true(chat_family_from_name(name, &g));
        assert_int_equal(g, f);
        /* public mirror */
        infer_chat_family pf;
        assert_true(infer_chat_family_from_name(name, &pf));
        assert_int_equal((int)pf, (int)f);
        assert_string_equal(infer_chat_family_name(pf), name);
        assert_non_null(chat_eot_markers(f)[0]);
    }
    enum chat_family g = CHAT_PHI3;
    assert_true(chat_family_from_name("GEMMA", &g));
    assert_int_equal(g, CHAT_GEMMA);
    assert_true(chat_family_from_name("mistral-v1", &g));
    assert_int_equal(g, CHAT_MISTRAL);
    assert_false(chat_family_from_name("bogus", &g));
    assert_false(chat_family_from_name(NULL, &g));
    assert_int_equal(g, CHAT_MISTRAL); /* untouched */
    assert_string_equal(chat_family_name((enum chat_family)99), "unknown");
    assert_null(chat_eot_markers((enum chat_family)99)[0]);
    assert_string_equal(chat_eot_markers(CHAT_GEMMA)[0], "<end_of_turn>");
    assert_string_equal(chat_eot_markers(CHAT_LLAMA3)[0], "<|eot_id|>");
    assert_string_equal(chat_eot_markers(CHAT_CHATML)[0], "<|im_end|>");
    assert_string_equal(chat_eot_markers(CHAT_PHI3)[0], "<|end|>");
    assert_string_equal(chat_eot_markers(CHAT_LLAMA2)[0], "</s>");
    assert_string_equal(chat_eot_markers(CHAT_PHI4)[0], "<|im_end|>");
    assert_string_equal(chat_eot_markers(CHAT_GRANITE)[0], "<|end_of_text|>");
    assert_string_equal(chat_eot_markers(CHAT_DEEPSEEK3)[0], DS_END);
    assert_true(chat_family_from_name("smollm3", &g));
    assert_int_equal(g, CHAT_CHATML);
    assert_true(chat_family_from_name("granite-4.0", &g));
    assert_int_equal(g, CHAT_GRANITE);
}

/* ---------------------------------------------- detection through a GGUF */

struct gbuf {
    uint8_t *p;
    size_t n;
};

static void gb_put(struct gbuf *b, const void *d, size_t n)
{
    b->p = realloc(b->p, b->n + n);
    assert_non_null(b->p);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u32(struct gbuf *b, uint32_t v) { gb_put(b, &v, 4); } /* tests run little-endian */
static void gb_u64(struct gbuf *b, uint64_t v) { gb_put(b, &v, 8); }
static void gb_str(struct gbuf *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}

/* A tensor-less GGUF v3 image with an architecture, optional template and
 * optional token list. */
static struct gbuf make_gguf(const char *arch, const char *tmpl, const char *const *tokens)
{
    struct gbuf b = {0};
    uint64_t n_kv = 1 + (tmpl != NULL) + (tokens != NULL);
    gb_put(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 0);
    gb_u64(&b, n_kv);
    gb_str(&b, "general.architecture");
    gb_u32(&b, INFER_GGUF_STRING);
    gb_str(&b, arch);
    if (tmpl) {
        gb_str(&b, "tokenizer.chat_template");
        gb_u32(&b, INFER_GGUF_STRING);
        gb_str(&b, tmpl);
    }
    if (tokens) {
        uint64_t n = 0;
        while (tokens[n])
            n++;
        gb_str(&b, "tokenizer.ggml.tokens");
        gb_u32(&b, INFER_GGUF_ARRAY);
        gb_u32(&b, INFER_GGUF_STRING);
        gb_u64(&b, n);
        for (uint64_t i = 0; i < n; i++)
            gb_str(&b, tokens[i]);
    }
    return b;
}

static infer_chat_family detect_in_gguf(const char *arch, const char *tmpl, const char *const *tokens,
                                        const char *override, bool *warned)
{
    struct gbuf b = make_gguf(arch, tmpl, tokens);
    infer_gguf *g;
    if (infer_gguf_open_memory(&g, b.p, b.n) != INFER_OK)
        fail_msg("gguf: %s", infer_last_error());
    infer_chat_family f = infer_chat_detect(g, override, warned);
    infer_gguf_close(g);
    free(b.p);
    return f;
}

static void test_detect_gguf(void **state)
{
    (void)state;
    static const char *const v_llama3[] = {"<|begin_of_text|>", "hello", "<|start_header_id|>",
                                           "<|end_header_id|>", "<|eot_id|>", NULL};
    static const char *const v_plain[] = {"<unk>", "<s>", "</s>", "<|eot_id", NULL}; /* near miss */
    bool w = true;
    assert_int_equal(detect_in_gguf("llama", NULL, v_llama3, NULL, &w), INFER_CHAT_LLAMA3);
    assert_false(w);
    assert_int_equal(detect_in_gguf("llama", tmpl_cases[3].text, v_llama3, NULL, &w), INFER_CHAT_GEMMA);
    assert_false(w);
    assert_int_equal(detect_in_gguf("qwen2", NULL, NULL, NULL, &w), INFER_CHAT_CHATML);
    assert_false(w);

    assert_int_equal(detect_in_gguf("llama", NULL, v_plain, NULL, &w), INFER_CHAT_CHATML);
    assert_true(w);
    assert_non_null(strstr(infer_last_error(), "chatml"));
    assert_int_equal(detect_in_gguf("llama", "{{ 'USER: ' + x }}", NULL, NULL, &w), INFER_CHAT_CHATML);
    assert_true(w);
    assert_non_null(strstr(infer_last_error(), "not recognised"));

    /* --chat-template: a name, a template text, or unknown */
    assert_int_equal(detect_in_gguf("gemma3", NULL, NULL, "llama3", &w), INFER_CHAT_LLAMA3);
    assert_false(w);
    assert_int_equal(detect_in_gguf("gemma3", NULL, NULL, "<|im_start|>{{ role }}", &w), INFER_CHAT_CHATML);
    assert_false(w);
    assert_int_equal(detect_in_gguf("gemma3", NULL, NULL, "bogus", &w), INFER_CHAT_CHATML);
    assert_true(w);
    assert_non_null(strstr(infer_last_error(), "bogus"));
    assert_int_equal(infer_chat_detect(NULL, "phi3", &w), INFER_CHAT_PHI3);
    assert_false(w);
    assert_int_equal(infer_chat_detect(NULL, NULL, &w), INFER_CHAT_CHATML);
    assert_true(w);
}

static void test_detect_default_model(void **state)
{
    (void)state;
    const char *path = test_default_model();
    if (!path)
        skip();
    infer_gguf *g;
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
    assert_true(infer_gguf_find_key(g, "tokenizer.chat_template") < 0); /* what this test is about */
    bool w = true;
    assert_int_equal(infer_chat_detect(g, NULL, &w), INFER_CHAT_GEMMA);
    assert_false(w);
    assert_int_equal(infer_chat_detect(g, "chatml", &w), INFER_CHAT_CHATML);
    assert_false(w);
    infer_gguf_close(g);
}

/* ------------------------------------------------------- incremental */

/* The conversation of a chat: what the user typed and what the model
 * generated, as it would come out of the detokenizer (SentencePiece [INST]
 * models start their answer with a space; tekken ones do not). */
static void answers_for(enum chat_family f, const char *ans[3])
{
    if (is_inst(f) && !is_tekken(f)) {
        ans[0] = " Hi there";
        ans[1] = " I am an assistant.\n";
        ans[2] = " 42";
    } else {
        ans[0] = "Hi there";
        ans[1] = "  I am an assistant.\n";
        ans[2] = "42\n\n";
    }
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static void test_incremental_prefix(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < ARRAY_LEN(all_families); fi++) {
        enum chat_family f = all_families[fi];
        const char *ans[3];
        answers_for(f, ans);
        for (int with_system = 0; with_system < 2; with_system++) {
            struct chat_msg m[8];
            size_t n = 0;
            if (with_system)
                m[n++] = (struct chat_msg){"system", "You are terse."};
            const char *users[] = {"Hello", " Who are you? ", "What is 6*7?"};
            for (int t = 0; t < 3; t++) {
                m[n++] = (struct chat_msg){"user", users[t]};
                m[n++] = (struct chat_msg){"assistant", ans[t]};
            }
            const char *eot = chat_eot_markers(f)[0];
            /* every prefix of the list renders a prefix of the whole */
            char *full = chat_format(f, m, n, false);
            assert_non_null(full);
            for (size_t k = 1; k <= n; k++) {
                char *part = chat_format(f, m, k, false);
                assert_non_null(part);
                if (!starts_with(full, part))
                    fail_msg("%s: rendering of %zu messages is not a prefix of %zu", chat_family_name(f), k, n);
                free(part);
            }
            /* prompt k (ends with a user turn, generation prompt added),
             * then the answer as generated and the end-of-turn marker, is
             * where prompt k+1 starts */
            for (size_t k = (size_t)with_system + 1; k + 2 <= n; k += 2) {
                char *prompt = chat_format(f, m, k, true);
                char *next = chat_format(f, m, k + 2, true);
                assert_non_null(prompt);
                assert_non_null(next);
                size_t lp = strlen(prompt), la = strlen(m[k].content);
                if (!starts_with(next, prompt) || strncmp(next + lp, m[k].content, la) != 0 ||
                    !starts_with(next + lp + la, eot))
                    fail_msg("%s (system %d, k=%zu): next prompt does not extend\n'%s'\n+ '%s' + '%s':\n'%s'",
                             chat_family_name(f), with_system, k, prompt, m[k].content, eot, next);
                free(prompt);
                free(next);
            }
            free(full);
        }
    }
}

/* -------------------------------------------- incremental, token level */

/* The prefix cache compares tokens, not text.  Simulate a chat: prompt k is
 * tokenized (BOS added, special tokens parsed) and evaluated, the model
 * "generates" an answer (here: the answer's own tokens, as a model emits
 * them) and stops on the end-of-turn token; the caller puts the streamed
 * text of those tokens into the conversation, adds a user turn and renders
 * prompt k+1.  Its tokens must start with prompt k's tokens, then the
 * generated ones, then the end-of-turn token when the vocabulary has it: the
 * whole KV history is reused. */
struct tok_case {
    const char *answer_src; /* text the simulated model's tokens spell */
};

static int32_t *encode_all(const struct tokenizer *t, const char *text, bool add_special, bool parse_special,
                           int64_t *n)
{
    size_t len = strlen(text);
    int64_t cap = (int64_t)len + 8;
    int32_t *ids = malloc((size_t)cap * sizeof(*ids));
    assert_non_null(ids);
    *n = tokenizer_encode(t, text, len, add_special, parse_special, ids, cap);
    if (*n < 0)
        fail_msg("encode: %s", infer_last_error());
    assert_true(*n <= cap);
    return ids;
}

/* Streamed text of ids (what the CLI accumulates as the answer). */
static char *stream_text(const struct tokenizer *t, const int32_t *ids, int64_t n)
{
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = tokenizer_token_to_text(t, ids[i], false, NULL, 0);
        assert_true(k >= 0);
        while (len + (size_t)k + 1 > cap)
            s = realloc(s, cap *= 2);
        assert_non_null(s);
        tokenizer_token_to_text(t, ids[i], false, s + len, (size_t)k);
        len += (size_t)k;
    }
    s[len] = '\0';
    return s;
}

static void check_token_prefix(const char *gguf_path, enum chat_family f)
{
    infer_gguf *g;
    assert_int_equal(infer_gguf_open(&g, gguf_path, 0), INFER_OK);
    struct tokenizer *t;
    if (tokenizer_load(&t, g) != INFER_OK)
        fail_msg("%s: %s", gguf_path, infer_last_error());
    int32_t eot = tokenizer_find(t, chat_eot_markers(f)[0]);

    static const char *const answers[] = {
        "Hi there!",
        "I am Gemma, an open-weights AI assistant.",
        "Sure:\n\n1. one\n2. two",
        "x = 6 * 7; // 42",
        "Ça va très bien, merci.",
    };
    const char *users[] = {"Hello", "Who are you?", "List two things", "Show code", "Comment ça va ?", "Bye"};
    struct chat_msg m[2 * ARRAY_LEN(answers) + 2];
    char *texts[ARRAY_LEN(answers)] = {0};
    size_t n = 0;
    m[n++] = (struct chat_msg){"system", "You are a helpful assistant."};
    for (size_t k = 0; k < ARRAY_LEN(answers); k++) {
        m[n++] = (struct chat_msg){"user", users[k]};
        char *prompt = chat_format(f, m, n, true);
        assert_non_null(prompt);
        int64_t n_prompt, n_gen, n_next;
        int32_t *tp = encode_all(t, prompt, true, true, &n_prompt);
        /* the model's answer: the tokens of the answer text as the model would
         * emit them (a SentencePiece vocabulary with a space prefix starts it
         * with a word-initial piece) */
        int32_t *tg = encode_all(t, answers[k], false, false, &n_gen);
        texts[k] = stream_text(t, tg, n_gen);
        m[n++] = (struct chat_msg){"assistant", texts[k]};
        m[n] = (struct chat_msg){"user", users[k + 1]};
        char *next = chat_format(f, m, n + 1, true);
        assert_non_null(next);
        int32_t *tn = encode_all(t, next, true, true, &n_next);
        int64_t want = n_prompt + n_gen + (eot >= 0);
        bool ok = n_next > want && memcmp(tn, tp, (size_t)n_prompt * sizeof(*tn)) == 0 &&
                  memcmp(tn + n_prompt, tg, (size_t)n_gen * sizeof(*tn)) == 0 &&
                  (eot < 0 || tn[n_prompt + n_gen] == eot);
        if (!ok) {
            int64_t i = 0;
            while (i < n_prompt && i < n_next && tn[i] == tp[i])
                i++;
            fail_msg("%s on %s, turn %zu: prompt (%lld tokens) + answer (%lld) + eot is not a token prefix of the "
                     "next prompt (%lld tokens; first %lld prompt tokens agree)\nanswer '%s'\nnext '%s'",
                     chat_family_name(f), gguf_path, k, (long long)n_prompt, (long long)n_gen, (long long)n_next,
                     (long long)i, texts[k], next);
        }
        free(prompt);
        free(next);
        free(tp);
        free(tg);
        free(tn);
    }
    for (size_t k = 0; k < ARRAY_LEN(answers); k++)
        free(texts[k]);
    tokenizer_free(t);
    infer_gguf_close(g);
}

static void test_incremental_tokens_gemma(void **state)
{
    (void)state;
    const char *path = test_default_model();
    if (!path)
        skip();
    check_token_prefix(path, CHAT_GEMMA);
}

/* A Llama SentencePiece vocabulary (32000 tokens, <s> and </s> special,
 * [INST] plain text, a space prefix) for the [INST] families.  The Llama 3
 * and Qwen 2 vocabularies below carry the llama3 and chatml markers as
 * special tokens; phi3, phi4, granite and deepseek3 have no fixture
 * vocabulary with theirs (spelled as plain text they would merge with the
 * answer's last punctuation) and are covered at the string level only. */
/* Path of a fixture vocabulary (a static buffer, overwritten by the next call). */
static const char *fixture(const char *name)
{
    static char path[8192];
    int k = snprintf(path, sizeof(path), "%s/fixtures/tokenizer/%s", test_shared(), name);
    assert_true(k > 0 && (size_t)k < sizeof(path));
    return path;
}

static void test_incremental_tokens_spm(void **state)
{
    (void)state;
    const char *spm = fixture("ggml-vocab-llama-spm.gguf");
    check_token_prefix(spm, CHAT_LLAMA2);
    check_token_prefix(spm, CHAT_MISTRAL);
    check_token_prefix(spm, CHAT_MISTRAL_V3);
    check_token_prefix(spm, CHAT_MISTRAL_V7);
}

/* Llama 3 (llama-bpe) with the llama3 template, Qwen 2 with chatml (the
 * format of Qwen 2/2.5/3, SmolLM3 and the DeepSeek-R1 Qwen distills' base). */
static void test_incremental_tokens_bpe(void **state)
{
    (void)state;
    check_token_prefix(fixture("ggml-vocab-llama-bpe.gguf"), CHAT_LLAMA3);
    check_token_prefix(fixture("ggml-vocab-qwen2.gguf"), CHAT_CHATML);
}

/* The markers are single special tokens of these vocabularies, and a
 * rendered turn tokenizes as llama.cpp's vectors say. */
static void test_template_tokens_bpe(void **state)
{
    (void)state;
    static const struct {
        const char *vocab;
        enum chat_family f;
        const char *const markers[4];
    } cases[] = {
        {"ggml-vocab-llama-bpe.gguf", CHAT_LLAMA3, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
        {"ggml-vocab-qwen2.gguf", CHAT_CHATML, {"<|im_start|>", "<|im_end|>"}},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        infer_gguf *g;
        assert_int_equal(infer_gguf_open(&g, fixture(cases[i].vocab), 0), INFER_OK);
        struct tokenizer *t;
        assert_int_equal(tokenizer_load(&t, g), INFER_OK);
        struct chat_msg m[] = {{"system", "Be brief."}, {"user", "Hi"}};
        char *text = chat_format(cases[i].f, m, 2, true);
        int64_t n;
        int32_t *ids = encode_all(t, text, false, true, &n);
        for (size_t j = 0; cases[i].markers[j]; j++) {
            int32_t id = tokenizer_find(t, cases[i].markers[j]);
            assert_true(id >= 0);
            assert_true(tokenizer_attr(t, id) & TOKEN_ATTR_CONTROL);
            size_t hits = 0;
            for (int64_t x = 0; x < n; x++)
                hits += ids[x] == id;
            if (hits == 0)
                fail_msg("%s: %s is not one token of '%s'", cases[i].vocab, cases[i].markers[j], text);
        }
        /* user text is never parsed for markers */
        struct chat_msg evil[] = {{"user", cases[i].markers[1]}};
        char *e_text = chat_format(cases[i].f, evil, 1, true);
        infer_text_span *spans;
        size_t n_spans;
        free(chat_format_spans(cases[i].f, evil, 1, true, &spans, &n_spans));
        int32_t ids2[64];
        int64_t n2 = tokenizer_encode_literal(t, e_text, strlen(e_text), false, true, spans, n_spans, ids2, 64);
        assert_true(n2 > 0 && n2 <= 64);
        size_t hits = 0;
        int32_t close_id = tokenizer_find(t, cases[i].markers[1]);
        for (int64_t x = 0; x < n2; x++)
            hits += ids2[x] == close_id;
        assert_int_equal(hits, cases[i].f == CHAT_LLAMA3 ? 2 : 1); /* the template's own, not the user's */
        free(spans);
        free(e_text);
        free(ids);
        free(text);
        tokenizer_free(t);
        infer_gguf_close(g);
    }
}

/* ------------------------------------------------------------ reasoning */

/* Split text fed in chunks of `chunk` bytes (0: all at once); returns the
 * reasoning and the answer as malloc'ed strings. */
static void split_chunks(const char *text, size_t chunk, bool in_reasoning, char **reasoning, char **content)
{
    infer_reasoning *r = infer_reasoning_new("<think>", "</think>", in_reasoning);
    assert_non_null(r);
    size_t n = strlen(text), cap = n + 1, lr = 0, lc = 0;
    *reasoning = calloc(1, cap);
    *content = calloc(1, cap);
    size_t step = chunk ? chunk : n;
    for (size_t off = 0;; off += step) {
        size_t k = off < n ? (n - off < step ? n - off : step) : 0;
        bool final = off + k >= n;
        const char *pr, *pc;
        size_t nr, nc;
        assert_int_equal(infer_reasoning_push(r, text + off, k, final, &pr, &nr, &pc, &nc), INFER_OK);
        assert_true(lr + nr < cap && lc + nc < cap);
        memcpy(*reasoning + lr, pr, nr);
        memcpy(*content + lc, pc, nc);
        lr += nr;
        lc += nc;
        if (final)
            break;
    }
    infer_reasoning_free(r);
}

static void test_reasoning_split(void **state)
{
    (void)state;
    static const struct {
        const char *text, *reasoning, *content;
        bool in_reasoning;
    } cases[] = {
        /* Qwen3 / DeepSeek-R1 */
        {"<think>\nThe user greets me.\n</think>\n\nHello! How can I help?", "The user greets me.",
         "Hello! How can I help?", false},
        /* an empty reasoning (Qwen3 with thinking off) */
        {"<think>\n\n</think>\n\nHi.", "", "Hi.", false},
        /* whitespace before the marker, two paragraphs of thought */
        {"\n <think>a\n\nb </think>c d\n", "a\n\nb", "c d\n", false},
        /* no reasoning: all answer, verbatim */
        {"  Hello <think> there", "", "  Hello <think> there", false},
        {"Hi", "", "Hi", false},
        {"", "", "", false},
        {"<thi", "", "<thi", false},
        /* cut off while thinking: reasoning, never answer */
        {"<think>Let me see. 2+2 is", "Let me see. 2+2 is", "", false},
        {"<think>x </thi", "x </thi", "", false},
        /* a marker-like text inside the reasoning, the closing marker twice */
        {"<think>use </th and <think></think>A</think>B", "use </th and <think>", "A</think>B", false},
        /* the prompt opened the reasoning */
        {"I should greet.\n</think>\nHello", "I should greet.", "Hello", true},
    };
    static const size_t chunks[] = {0, 1, 2, 3, 5, 7};
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        for (size_t c = 0; c < ARRAY_LEN(chunks); c++) {
            char *r, *a;
            split_chunks(cases[i].text, chunks[c], cases[i].in_reasoning, &r, &a);
            if (strcmp(r, cases[i].reasoning) || strcmp(a, cases[i].content))
                fail_msg("case %zu, chunks of %zu: reasoning '%s' content '%s'", i, chunks[c], r, a);
            free(r);
            free(a);
        }
    /* held back while streaming: a possible marker, trailing whitespace */
    infer_reasoning *r = infer_reasoning_new("[THINK]", "[/THINK]", false);
    const char *pr, *pc;
    size_t nr, nc;
    assert_int_equal(infer_reasoning_push(r, " [TH", 4, false, &pr, &nr, &pc, &nc), INFER_OK);
    assert_int_equal(nr + nc, 0);
    assert_int_equal(infer_reasoning_push(r, "INK]Hmm \n[/", 11, false, &pr, &nr, &pc, &nc), INFER_OK);
    assert_int_equal(nr, 3);
    assert_memory_equal(pr, "Hmm", 3);
    assert_int_equal(nc, 0);
    assert_int_equal(infer_reasoning_push(r, "THINK] Yes", 10, false, &pr, &nr, &pc, &nc), INFER_OK);
    assert_int_equal(nr, 0);
    assert_int_equal(nc, 3);
    assert_memory_equal(pc, "Yes", 3);
    infer_reasoning_free(r);
    assert_null(infer_reasoning_new("", "</think>", false));
    assert_null(infer_reasoning_new("<think>", NULL, false));
}

/* Templates whose generation prompt opens the reasoning (the output then
 * starts inside it), and those that do not. */
static void test_reasoning_forced(void **state)
{
    (void)state;
    /* Qwen3-*-Thinking-2507, QwQ */
    assert_true(reasoning_forced_open("{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n<think>\\n' + "
                                      "m.reasoning_content + '\\n</think>\\n\\n' }}{%- endfor %}{%- if "
                                      "add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}",
                                      "<think>"));
    /* DeepSeek-R1 (double quotes, a real newline) */
    assert_true(reasoning_forced_open("{% if add_generation_prompt %}{{\"<｜Assistant｜><think>\n\"}}{% endif %}",
                                      "<think>"));
    /* Qwen3: the history renders '\n<think>\n' + reasoning, the generation prompt
     * opens nothing (its '<think>\n\n</think>' is enable_thinking=false) */
    assert_false(reasoning_forced_open(
        "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') }}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and "
        "enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}",
        "<think>"));
    /* a forced open after the generation block's endif does not count; nor without one */
    assert_false(reasoning_forced_open("{% if add_generation_prompt %}{{ 'A:' }}{% endif %}{{ '<think>\\n' }}",
                                       "<think>"));
    assert_false(reasoning_forced_open("{{ '<think>\\n' }}", "<think>"));
    assert_false(reasoning_forced_open(NULL, "<think>"));
    assert_false(reasoning_forced_open("{% if add_generation_prompt %}'<think>\\n'", ""));
    assert_false(infer_chat_reasoning_forced(NULL, NULL, "<think>"));
    assert_true(infer_chat_reasoning_forced(NULL, "{% if add_generation_prompt %}{{ 'A:[THINK]\\n' }}{% endif %}",
                                            "[THINK]"));
}

/* An assistant turn sent back with its reasoning: the answer the splitter
 * would have returned (after the last closing marker, whitespace skipped). */
static void test_reasoning_answer(void **state)
{
    (void)state;
    assert_string_equal(infer_reasoning_answer("<think>\nHmm.\n</think>\n\nYes.", "</think>"), "Yes.");
    assert_string_equal(infer_reasoning_answer("a</think>b </think> \t\nc", "</think>"), "c");
    assert_string_equal(infer_reasoning_answer("Yes.\n", "</think>"), "Yes.\n"); /* no marker: verbatim */
    assert_string_equal(infer_reasoning_answer("<think>cut", "</think>"), "<think>cut");
    assert_string_equal(infer_reasoning_answer("x</think>", "</think>"), "");
    assert_string_equal(infer_reasoning_answer("[THINK]a[/THINK]b", "[/THINK]"), "b");
    const char *s = "abc";
    assert_ptr_equal(infer_reasoning_answer(s, ""), s);
    assert_null(infer_reasoning_answer(NULL, "</think>"));
}

static bool no_tokens(void *ctx, const char *piece)
{
    (void)ctx;
    (void)piece;
    return false;
}

static void test_reasoning_markers(void **state)
{
    (void)state;
    const char *o = NULL, *c = NULL;
    /* Qwen3, DeepSeek-R1 distills (only '</think>' in the template), Magistral */
    assert_true(reasoning_markers("{{- '<think>\\n\\n</think>\\n\\n' }}", NULL, NULL, &o, &c));
    assert_string_equal(o, "<think>");
    assert_string_equal(c, "</think>");
    o = c = NULL;
    assert_true(reasoning_markers("{% set content = content.split('</think>')[-1] %}", no_tokens, NULL, &o, &c));
    assert_string_equal(o, "<think>");
    assert_true(reasoning_markers("{{ '[THINK]' + thinking + '[/THINK]' }}", NULL, NULL, &o, &c));
    assert_string_equal(c, "[/THINK]");
    /* a vocabulary with both tokens, no template */
    static const char *const v_qwen3[] = {"<|im_start|>", "<think>", "</think>", NULL};
    static const char *const v_half[] = {"<think>", NULL};
    o = c = NULL;
    assert_true(reasoning_markers(NULL, list_has, (void *)v_qwen3, &o, &c));
    assert_string_equal(c, "</think>");
    o = c = NULL;
    assert_false(reasoning_markers("<|im_start|>", list_has, (void *)v_half, &o, &c));
    assert_null(o);
    assert_false(reasoning_markers(NULL, NULL, NULL, &o, &c));
    assert_false(infer_chat_reasoning_markers(NULL, &o, &c));
}

/* ------------------------------------------------------------- bad input */

static void expect_invalid(enum chat_family f, const struct chat_msg *m, size_t n, bool add_gen, const char *msg)
{
    infer_error_clear();
    char *s = chat_format(f, m, n, add_gen);
    if (s)
        fail_msg("%s: accepted, gave '%s'", chat_family_name(f), s);
    if (!strstr(infer_last_error(), msg))
        fail_msg("%s: error '%s' lacks '%s'", chat_family_name(f), infer_last_error(), msg);
}

static void test_bad_input(void **state)
{
    (void)state;
    const struct chat_msg null_content[] = {{"user", NULL}};
    const struct chat_msg null_role[] = {{NULL, "x"}};
    const struct chat_msg bad_role[] = {{"user", "x"}, {"tool", "y"}};
    const struct chat_msg late_system[] = {{"user", "x"}, {"system", "y"}};
    const struct chat_msg two_users[] = {{"user", "x"}, {"user", "y"}};
    const struct chat_msg starts_assistant[] = {{"assistant", "x"}, {"user", "y"}};
    const struct chat_msg ends_assistant[] = {{"user", "x"}, {"assistant", "y"}};
    const struct chat_msg only_system[] = {{"system", "x"}};
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++) {
        enum chat_family f = all_families[i];
        expect_invalid(f, null_content, 1, true, "no content");
        expect_invalid(f, null_role, 1, true, "no role");
        expect_invalid(f, bad_role, 2, true, "unknown role 'tool'");
        expect_invalid(f, late_system, 2, false, "system message may only come first");
        expect_invalid(f, NULL, 0, true, "no messages");
        expect_invalid(f, null_content, 0, true, "no messages");
        if (f == CHAT_CHATML || f == CHAT_LLAMA3 || f == CHAT_PHI3 || f == CHAT_PHI4 || f == CHAT_GRANITE ||
            f == CHAT_DEEPSEEK3) {
            char *s = chat_format(f, two_users, 2, true);
            assert_non_null(s);
            free(s);
        } else {
            expect_invalid(f, two_users, 2, true, "alternate");
            expect_invalid(f, starts_assistant, 2, true, "alternate");
            expect_invalid(f, ends_assistant, 2, true, "after a user message");
            expect_invalid(f, only_system, 1, true, "after a user message");
        }
    }
    expect_invalid((enum chat_family)-1, ends_assistant, 2, false, "unknown template family");
    expect_invalid(CHAT_N_FAMILIES, ends_assistant, 2, false, "unknown template family");
    /* public wrapper */
    infer_error_clear();
    assert_null(infer_chat_format(INFER_CHAT_GEMMA, NULL, 0, true));
    assert_non_null(strstr(infer_last_error(), "no messages"));
    const infer_chat_msg pm[] = {{"user", "Hello"}};
    char *s = infer_chat_format(INFER_CHAT_GEMMA, pm, 1, true);
    assert_string_equal(s, "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
    free(s);
}

static void test_big_message(void **state)
{
    (void)state;
    size_t big = 1 << 20;
    char *text = malloc(big + 1);
    assert_non_null(text);
    for (size_t i = 0; i < big; i++)
        text[i] = (char)('a' + i % 26);
    text[big] = '\0';
    const struct chat_msg m[] = {{"system", text}, {"user", text}, {"assistant", text}, {"user", "ok"}};
    for (size_t i = 0; i < ARRAY_LEN(all_families); i++) {
        enum chat_family f = all_families[i];
        char *s = chat_format(f, m, 4, true);
        assert_non_null(s);
        size_t len = strlen(s);
        assert_true(len > 3 * big && len < 3 * big + 400);
        /* the user text arrives whole */
        const char *at = strstr(s, "ok");
        assert_non_null(at);
        free(s);
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_single_turn),
        cmocka_unit_test(test_golden_system_multi_turn),
        cmocka_unit_test(test_golden_no_generation_prompt),
        cmocka_unit_test(test_golden_whitespace),
        cmocka_unit_test(test_inst_answer_space),
        cmocka_unit_test(test_detect_templates),
        cmocka_unit_test(test_detect_unknown_template),
        cmocka_unit_test(test_detect_arch),
        cmocka_unit_test(test_detect_vocab),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_detect_gguf),
        cmocka_unit_test(test_detect_default_model),
        cmocka_unit_test(test_incremental_prefix),
        cmocka_unit_test(test_incremental_tokens_gemma),
        cmocka_unit_test(test_incremental_tokens_spm),
        cmocka_unit_test(test_incremental_tokens_bpe),
        cmocka_unit_test(test_template_tokens_bpe),
        cmocka_unit_test(test_reasoning_split),
        cmocka_unit_test(test_reasoning_markers),
        cmocka_unit_test(test_reasoning_answer),
        cmocka_unit_test(test_reasoning_forced),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_big_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
