// The builtin chat templates. tools/gen_chat_fixtures.py reads the sources from this file
// (each entry is {"name", R"jinja(...)jinja", "description"}), so keep that layout.
#include "chat/builtin_templates.h"

#include <algorithm>
#include <array>

namespace troupe {
namespace {

constexpr BuiltinChatTemplate kTemplates[] = {
    {"chatml", R"jinja(
{%- for message in messages %}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %})jinja",
     "ChatML: Qwen 2/2.5, SmolLM, Hermes, OpenHermes, Yi"},

    {"zephyr", R"jinja(
{%- for message in messages %}
    {%- if message['role'] in ['system', 'user', 'assistant'] %}
        {{- '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}
    {%- endif %}
    {%- if loop.last and add_generation_prompt %}
        {{- '<|assistant|>\n' }}
    {%- endif %}
{%- endfor %})jinja",
     "Zephyr: zephyr-7b, TinyLlama-1.1B-Chat, the troupe-tiny models"},

    {"llama2", R"jinja(
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = false %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- set content = message['content'] %}
    {%- if loop.first and system_message != false %}
        {%- set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + content %}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {{- bos_token + '[INST] ' + content | trim + ' [/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + content | trim + ' ' + eos_token }}
    {%- endif %}
{%- endfor %})jinja",
     "Llama 2 chat ([INST] with <<SYS>>)"},

    {"llama3", R"jinja(
{%- for message in messages %}
    {%- if loop.first %}
        {{- bos_token }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})jinja",
     "Llama 3 / 3.0 Instruct"},

    {"llama3.1", R"jinja(
{{- bos_token }}
{%- if date_string is not defined %}
    {%- set date_string = '26 Jul 2024' %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = '' %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}
{{- 'Cutting Knowledge Date: December 2023\nToday Date: ' + date_string + '\n\n' }}
{{- system_message + '<|eot_id|>' }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})jinja",
     "Llama 3.1 / 3.3 Instruct (fixed 'Today Date', no tools)"},

    {"llama3.2", R"jinja(
{{- bos_token }}
{%- if date_string is not defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now('%d %b %Y') %}
    {%- else %}
        {%- set date_string = '26 Jul 2024' %}
    {%- endif %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = '' %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}
{{- 'Cutting Knowledge Date: December 2023\nToday Date: ' + date_string + '\n\n' }}
{{- system_message + '<|eot_id|>' }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})jinja",
     "Llama 3.2 Instruct ('Today Date' from strftime_now, no tools)"},

    {"phi3", R"jinja(
{%- for message in messages %}
    {%- if message['role'] == 'system' and message['content'] %}
        {{- '<|system|>\n' + message['content'] + '<|end|>\n' }}
    {%- elif message['role'] in ['user', 'assistant'] %}
        {{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\n' }}
{%- else %}
    {{- eos_token }}
{%- endif %})jinja",
     "Phi-3 / Phi-3.5 (mini, medium)"},

    {"phi4", R"jinja(
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- '<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>' }}
    {%- elif message['role'] == 'user' %}
        {{- '<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|><|im_start|>assistant<|im_sep|>' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + '<|im_end|>' }}
    {%- endif %}
{%- endfor %})jinja",
     "Phi-4 (the assistant header follows every user turn, as in the model's template)"},

    {"mistral-v1", R"jinja(
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- set prefix = system_message + '\n\n' if loop.first and system_message is defined else '' %}
        {{- ' [INST] ' + prefix + message['content'] + ' [/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %})jinja",
     "Mistral 'v1': Mistral-7B-Instruct v0.1/v0.2, Mixtral-8x7B-Instruct"},

    {"mistral-v3", R"jinja(
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- set prefix = system_message + '\n\n' if loop.last and system_message is defined else '' %}
        {{- '[INST] ' + prefix + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] | trim + eos_token }}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %})jinja",
     "Mistral 'v3': Mistral-7B-Instruct v0.3, Mixtral-8x22B, Mistral-Large-2407 (system prompt "
     "joins the last user turn)"},

    {"mistral-v3-tekken", R"jinja(
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- set prefix = system_message + '\n\n' if loop.last and system_message is defined else '' %}
        {{- '[INST]' + prefix + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %})jinja",
     "Mistral 'v3-tekken': Mistral-Nemo, Ministral-8B"},

    {"mistral-v7", R"jinja(
{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'user' %}
        {{- '[INST] ' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user, system and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %})jinja",
     "Mistral 'v7': Mistral-Large-2411"},

    {"mistral-v7-tekken", R"jinja(
{%- if messages[0]['role'] == 'system' %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {{- '[SYSTEM_PROMPT]' + messages[0]['content'] + '[/SYSTEM_PROMPT]' }}
{%- endif %}
{%- set ns = namespace(index=0) %}
{%- for message in loop_messages %}
    {%- if message['role'] != 'system' %}
        {%- if (message['role'] == 'user') != (ns.index % 2 == 0) %}
            {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
    {%- if message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'user' %}
        {{- '[INST]' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- endif %}
{%- endfor %})jinja",
     "Mistral 'v7-tekken': Mistral-Small-3.x, Devstral (no default system prompt)"},

    {"gemma", R"jinja(
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set first_user_prefix = '' %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}
    {{- '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}
    {{- message['content'] | trim + '<end_of_turn>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<start_of_turn>model\n' }}
{%- endif %})jinja",
     "Gemma 1/2/3 (a system message is prefixed to the first user turn, as in Gemma 3)"},

    {"deepseek", R"jinja(
{%- set ns = namespace(has_system=false) %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {%- set ns.has_system = true %}
    {%- endif %}
{%- endfor %}
{{- bos_token }}
{%- if not ns.has_system %}
    {{- 'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer science. For politically sensitive questions, security and privacy issues, and other non-computer science questions, you will refuse to answer\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {{- message['content'] }}
    {%- elif message['role'] == 'user' %}
        {{- '### Instruction:\n' + message['content'] + '\n' }}
    {%- else %}
        {{- '### Response:\n' + message['content'] + '\n<|EOT|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '### Response:\n' }}
{%- endif %})jinja",
     "DeepSeek Coder instruct (### Instruction / ### Response)"},

    {"deepseek2", R"jinja(
{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- 'User: ' + message['content'] + '\n\n' }}
    {%- elif message['role'] == 'assistant' %}
        {{- 'Assistant: ' + message['content'] + eos_token }}
    {%- elif message['role'] == 'system' %}
        {{- message['content'] + '\n\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- 'Assistant:' }}
{%- endif %})jinja",
     "DeepSeek-V2 / V2.5 chat"},

    {"deepseek-r1", R"jinja(
{%- set ns = namespace(system_prompt='') %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
        {%- set ns.system_prompt = message['content'] %}
    {%- endif %}
{%- endfor %}
{{- bos_token + ns.system_prompt }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- '<｜User｜>' + message['content'] }}
    {%- elif message['role'] == 'assistant' %}
        {{- '<｜Assistant｜>' + message['content'].split('</think>')[-1] + '<｜end▁of▁sentence｜>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<｜Assistant｜><think>\n' }}
{%- endif %})jinja",
     "DeepSeek-R1 and its distills (thinking removed from past replies)"},

    {"command-r", R"jinja(
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + messages[0]['content'] + '<|END_OF_TURN_TOKEN|>' }}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {{- '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}
    {%- elif message['role'] == 'assistant' %}
        {{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}
{%- endif %})jinja",
     "Command-R / Command-R+ (without tools or documents)"},
};

struct Alias {
    std::string_view alias;
    std::string_view name;
};

constexpr Alias kAliases[] = {{"mistral", "mistral-v3"}};

}  // namespace

std::span<const BuiltinChatTemplate> builtin_chat_templates() {
    return kTemplates;
}

const BuiltinChatTemplate* find_builtin_chat_template(std::string_view name) {
    for (const Alias& a : kAliases) {
        if (a.alias == name) name = a.name;
    }
    auto it = std::find_if(std::begin(kTemplates), std::end(kTemplates),
                           [&](const BuiltinChatTemplate& t) { return t.name == name; });
    return it == std::end(kTemplates) ? nullptr : &*it;
}

}  // namespace troupe
