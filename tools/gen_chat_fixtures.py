#!/usr/bin/env python3
"""Generates the chat-template test fixtures in tests/data/chat/ with Python's real Jinja2.

Run once by a developer when a template or a conversation changes (not in CI):

    scripts/fetch-llama-data.sh                  # llama.cpp's templates into .cache/llama-data
    python3 tools/gen_chat_fixtures.py [--llama-tests LLAMA_CPP/tests/test-chat-template.cpp]

(default: /tmp/llama-src/llama.cpp, where llama.cpp's source is cloned from the node-llama-cpp
npm bundle as scripts/fetch-llama-data.sh does.)

Templates are rendered the way Hugging Face transformers renders `apply_chat_template`:
an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
extension and a transparent `{% generation %}` tag, `tojson` as json.dumps(ensure_ascii=False),
the globals raise_exception and strftime_now, and the variables messages, tools=None,
documents=None, add_generation_prompt, bos_token, eos_token. strftime_now uses a fixed
instant (FIXED_NOW, UTC) so the fixtures are deterministic; the C++ side injects the same one.

Outputs (JSON, UTF-8):
  conversations.json  the conversations, the tool schema, the cases and the fixed instant
  snippets.json       small templates exercising one construct each, with Jinja2's result
  bundle.json         every template in <cache>/templates: FNV-1a 64 of the source, tokens used,
                      and per case either {"output": ...} or {"error": ..., "kind": ...}
  builtin.json        the same for the builtin templates (read from src/chat/builtin_templates.cpp,
                      source included) plus, per builtin, the real templates it was checked against
  gguf.json           the template carried by models/troupe-tiny-q8_0.gguf

The third-party template sources are not written anywhere: the C++ tests read them from the
cache directory and compare against these outputs.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import struct
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "data", "chat")
FIXED_NOW = datetime.datetime(2025, 3, 14, 9, 30, 5, tzinfo=datetime.timezone.utc)

SYSTEM = "You are a helpful assistant."
SPECIAL_SYSTEM = 'Answer in "quotes" and it\'s fine.\nSecond line of the system prompt.'
SPECIAL_USER = ("  Tabs\tand \"double\" 'single' quotes, a back\\slash, <b>html</b> & {{ braces }} {% tag %}\n"
                "\nSecond paragraph: ünïcødé, 日本語, emoji 🎉.  ")
SPECIAL_ASSISTANT = "  Sure!\nLine two, with a trailing space "

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello"}],
    "system_user": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello"}],
    "multi_turn": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 = 4."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "no_system_multi_turn": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 = 4."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "tool_result": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check."},
        {"role": "tool", "content": "{\"temperature\": 21, \"unit\": \"celsius\"}"},
    ],
    "assistant_last": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! How can I help?"},
    ],
    "special_chars": [
        {"role": "system", "content": SPECIAL_SYSTEM},
        {"role": "user", "content": SPECIAL_USER},
        {"role": "assistant", "content": SPECIAL_ASSISTANT},
        {"role": "user", "content": "Ok."},
    ],
}

# A tool schema for the tool-calling case (an array parameter has the JSON-schema key "items",
# which collides with dict.items in Jinja2's attribute lookup).
TOOLS = [{"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "array", "items": {"type": "integer"}}},
        "required": ["city"]}}}]

# (name, conversation, add_generation_prompt, with tools): every conversation with and without
# the generation prompt, and one conversation with tools.
CASES = [(f"{conv}/{'gen' if agp else 'nogen'}", conv, agp, False)
         for conv in CONVERSATIONS if conv != "tool_result" for agp in (True, False)]
CASES.append(("tools_multi_turn/gen", "multi_turn", True, True))
CASES.append(("tools_tool_result/gen", "tool_result", True, True))

DEFAULT_TOKENS = ("<s>", "</s>")

# Realistic special tokens for the builtins (the rendering treats them as plain text).
BUILTIN_TOKENS = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "gemma": ("<bos>", "<eos>"),
    "command-r": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "deepseek": ("<｜begin▁of▁sentence｜>", "<|EOT|>"),
    "deepseek2": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek3": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-r1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "phi4": ("<|endoftext|>", "<|im_end|>"),
    "chatml": ("<|im_start|>", "<|im_end|>"),
}

# For each builtin: the real templates it must render like, as (source, name, cases) where
# source is "bundle" (a file in the cache), "gguf" (the bundled model) or "llama-tests" (a
# template string in llama.cpp's tests/test-chat-template.cpp); cases None means every case
# the real template accepts. Cases a real template rejects (raise_exception) are skipped.
REFERENCES = {
    "chatml": [("llama-tests", "teknium/OpenHermes-2.5-Mistral-7B", None),
               ("bundle", "Qwen-Qwen2.5-7B-Instruct.jinja", "with_system")],
    "zephyr": [("gguf", "models/troupe-tiny-q8_0.gguf", None)],
    "llama3": [("llama-tests", "Llama-3", "gen")],
    "llama3.1": [("bundle", "meta-llama-Llama-3.1-8B-Instruct.jinja", None),
                 ("bundle", "meta-llama-Llama-3.3-70B-Instruct.jinja", None)],
    "llama3.2": [("bundle", "meta-llama-Llama-3.2-3B-Instruct.jinja", None)],
    "phi3": [("bundle", "microsoft-Phi-3.5-mini-instruct.jinja", None)],
    "phi4": [("llama-tests", "phi-4", None)],
    "mistral-v1": [("llama-tests", "mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template "
                    "with a system prompt)", None)],
    "mistral-v3": [("llama-tests", "Mistral-Large-Instruct-2407 (mistralai 'v3' template; "
                    "modified to have system prompt at start)", None)],
    "mistral-v3-tekken": [("bundle", "mistralai-Mistral-Nemo-Instruct-2407.jinja", None)],
    "mistral-v7": [("llama-tests", "mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)",
                    None)],
    "mistral-v7-tekken": [("bundle", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "with_system")],
    "gemma": [("bundle", "google-gemma-2-2b-it.jinja", None)],
    "deepseek": [("llama-tests", "deepseek-ai/deepseek-coder-33b-instruct", None)],
    "deepseek2": [("llama-tests", "DeepSeek-V2", None)],
    "deepseek-r1": [("bundle", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", None)],
    "command-r": [("llama-tests", "CohereForAI/c4ai-command-r-plus", None)],
}


# Small templates that exercise one construct each, rendered by Jinja2 into snippets.json.
# (name, source, context); the context is passed as extra variables.
USERS = [{"name": "ann", "age": 31, "role": "user", "tags": ["a", "b"]},
         {"name": "Bob", "age": 25, "role": "assistant"},
         {"name": "cid", "age": 40, "role": "user", "nested": {"k": "v"}}]
SNIPPETS = [
    # ---- whitespace control (trim_blocks, lstrip_blocks, -, +) ----
    ("ws_trim_lstrip", "  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n", {}),
    ("ws_trailing_newline_dropped", "a\n", {}),
    ("ws_two_trailing_newlines", "a\n\n", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),
    ("ws_minus_both", "a  \n {%- if true -%} \n b \n {%- endif -%}  \n c", {}),
    ("ws_var_minus", "a \n {{- 'x' -}} \n b", {}),
    ("ws_plus_keeps", "  {%+ if true +%}\nx\n  {%+ endif %}|", {}),
    ("ws_comment", "a\n  {# comment #}\nb {#- c -#} c\n{# multi\nline #}d", {}),
    ("ws_inline_block_not_lstripped", "x  {% if true %}y{% endif %}", {}),
    ("ws_block_after_var_same_line", "{{ 'a' }}  {% if true %}b{% endif %}", {}),
    ("ws_raw", "{% raw %}{{ not parsed }} {% if %}{% endraw %}|\n  {% raw -%}  x  {%- endraw %}\n|", {}),
    ("ws_nested_blocks", "{% for i in [1, 2] %}\n  {% if i > 1 %}\n    big {{ i }}\n  {% else %}\n    small {{ i }}\n  {% endif %}\n{% endfor %}\n", {}),
    ("ws_unicode_space_lstrip", "a\n\u3000{% if true %}b{% endif %}", {}),
    # ---- literals and printing ----
    ("print_values", "{{ none }}|{{ true }}|{{ false }}|{{ 1 }}|{{ -2 }}|{{ 1.0 }}|{{ 1.5e3 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 0.1 }}|{{ 123456789.123 }}", {}),
    ("print_list_dict", "{{ [1, 'a', none, true, 2.5, {'k': 'v'}] }}|{{ {'a': [1], 'b': {}} }}|{{ [] }}|{{ (1, 2) | list }}", {}),
    ("print_string_repr", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', 'tab\\tnl\\n', 'back\\\\slash'] }}", {}),
    ("print_undefined", "[{{ missing }}][{{ missing_dict.x is defined }}]", {"missing_dict": {}}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\\"f\\x41\\u00e9\\U0001F600\\101\\q' }}", {}),
    ("string_concat_adjacent", "{{ 'a' 'b' \"c\" }}", {}),
    ("int_underscore", "{{ 1_000 + 2 }}", {}),
    ("unicode_literal", "{{ 'héllo 日本' | length }}|{{ 'héllo'[1] }}|{{ '日本語'[::-1] }}", {}),
    # ---- arithmetic and operators ----
    ("arith_ints", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 6 * 7 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}", {}),
    ("arith_floats", "{{ 1.5 + 2 }} {{ 0.1 + 0.2 }} {{ 5.5 // 2 }} {{ -5.5 % 2 }} {{ 3 * 1.5 }} {{ 2.0 ** 0.5 }}", {}),
    ("arith_bool", "{{ true + 1 }} {{ false * 3 }} {{ true + true }}", {}),
    ("arith_strings_lists", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [1] + [2, 3] }} {{ [0] * 3 }} {{ 'a' ~ 1 ~ none ~ missing ~ [1] }}", {}),
    ("unary", "{{ -(3) }} {{ +4 }} {{ - 2.5 }} {{ not 1 }} {{ not '' }} {{ -x|abs }}", {"x": 5}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ (1 + 2) ~ 3 }} {{ 'a' ~ (1 + 2) }} {{ 'a' ~ 1 * 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }} {{ 100 / 10 / 5 }}", {}),
    ("filter_binds_tighter", "{{ 'a' + ' b ' | trim + 'c' }}|{{ ['x', 'y'] | join(',') ~ '!' }}", {}),
    ("compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ none == none }} {{ 'a' != 'b' }} {{ true == 1 }}", {}),
    ("compare_in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }} {{ 'x' in missing }}", {}),
    ("logic_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ 1 and 0 or 5 }}", {}),
    ("ternary", "{{ 'y' if true else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if false }}] {{ 'a' if x > 1 else 'b' if x > 0 else 'c' }}", {"x": 1}),
    # ---- variables, attributes, items, slicing ----
    ("getattr_getitem", "{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d['b']['c'] }} {{ l[0] }} {{ l[-1] }} {{ l.1 }} [{{ l[10] }}] [{{ d.zz }}] {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}", {"d": {"a": 1, "b": {"c": 2}}, "l": [10, 20, 30]}),
    ("dict_methods", "{{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list | length }}{% for k, v in d.items() %}|{{ k }}={{ v }}{% endfor %}", {"d": {"x": 1, "y": [2]}}),
    ("dict_method_name_as_key", "{{ d['items'] is defined }} {{ d.items is defined }} {{ d.get is callable }}", {"d": {"a": 1}}),
    ("slicing", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[5:] }} {{ 'hello'[1:4] }} {{ 'hello'[::-1] }} {{ 'hello'[-3:] }} {{ l[3:0:-1] }}", {"l": [1, 2, 3, 4, 5]}),
    ("int_keys_dict", "{% set d = {1: 'one', 2: 'two'} %}{{ d[1] }} {{ d.get(2) }} {{ 1 in d }} {{ d | tojson }} {{ d }}", {}),
    ("none_attr_is_undefined", "[{{ n.x }}] {{ n.x is defined }}", {"n": None}),
    # ---- strings ----
    ("str_methods_strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ 'abc'.lstrip('ba') }}]", {"s": "  \t hi there \n "}),
    ("str_methods_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b\tc\n'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b c  '.split(none, 1) }} {{ '  a b c  '.rsplit(none, 1) }} {{ 'a b'.split(none, 0) }} {{ 'x'.split(',') }} {{ ''.split() }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }}", {}),
    ("str_methods_case", "{{ 'hello WORLD'.upper() }} {{ 'Hello'.lower() }} {{ 'hello wORLD-foo bar'.title() }} {{ 'hELLO world'.capitalize() }} {{ \"they're bill's\".title() }}", {}),
    ("str_methods_misc", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.count('bc') }} {{ '-'.join(['a', 'b']) }} {{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} {{ 'abc'.islower() }} {{ 'prefix_x'.removeprefix('prefix_') }}", {}),
    ("str_format", "{{ '{}-{}'.format('a', 1) }} {{ '{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='bob') }} {{ '{{literal}}'.format() }}", {}),
    # ---- filters ----
    ("f_trim_length_upper", "[{{ '  x  ' | trim }}][{{ 'xxhixx' | trim('x') }}] {{ 'abc' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ 'abc' | upper }} {{ 'ABC' | lower }}", {}),
    ("f_capitalize_title", "{{ 'hELLO wORLD' | capitalize }} {{ 'hello wORLD-foo(bar)x' | title }} {{ \"it's\" | title }}", {}),
    ("f_replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 1) }} {{ 'abc' | replace('', '-') }}", {}),
    ("f_default", "{{ missing | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }} {{ 0 | d('z', boolean=true) }} {{ missing | default }}|", {}),
    ("f_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | last }} [{{ [] | first }}]", {}),
    ("f_join", "{{ [1, 'a', none] | join }} {{ ['a', 'b'] | join(', ') }} {{ users | join('/', attribute='name') }}", {"users": USERS}),
    ("f_list_string_int_float", "{{ 'ab' | list }} {{ {'x': 1} | list }} {{ 12 | string }} {{ [1] | string }} {{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '0x1A' | int(0, 16) }} {{ '2.5' | float }} {{ 'y' | float }} {{ 3 | float }}", {}),
    ("f_tojson", "{{ v | tojson }}|{{ v | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ 'é\"\\n' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ [1, 2] | tojson(separators=(',', ':')) }}|{{ {} | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}", {"v": {"s": "x", "n": None, "b": True, "f": 1.5, "i": -3, "l": [1, {"a": []}]}}),
    ("f_tojson_emoji_ascii", "{{ '😀 日' | tojson(ensure_ascii=true) }}", {}),
    ("f_items_dictsort", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d | dictsort(reverse=true) %}{{ k }}{% endfor %}|{% for k, v in d | dictsort(by='value') %}{{ k }}{% endfor %}|{{ missing | items | list }}", {"d": {"b": 2, "A": 3, "c": 1}}),
    ("f_map", "{{ users | map(attribute='name') | list }} {{ ['a', 'B'] | map('upper') | list }} {{ users | map(attribute='nested.k', default='-') | list }} {{ none | map('upper') | list }} {{ [' x ', 'y '] | map('trim') | join(',') }}", {"users": USERS}),
    ("f_select_reject", "{{ [0, 1, 2, '', 'a'] | select | list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ [1, 5, 10] | select('>', 3) | list }} {{ ['a', 'b'] | select('equalto', 'b') | list }} {{ [1, 2, 3] | select('in', [2, 3]) | list }}", {}),
    ("f_selectattr", "{{ users | selectattr('role', 'equalto', 'user') | map(attribute='name') | list }} {{ users | rejectattr('role', 'equalto', 'user') | map(attribute='name') | list }} {{ users | selectattr('tags') | map(attribute='name') | list }} {{ users | selectattr('tags', 'defined') | list | length }} {{ none | selectattr('x') | list }}", {"users": USERS}),
    ("f_sort_unique_minmax", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ users | sort(attribute='age') | map(attribute='name') | join(',') }} {{ ['a', 'A', 'b', 'a'] | unique | list }} {{ [3, 9, 2] | max }} {{ [3, 9, 2] | min }} {{ users | max(attribute='age') | attr('name') }}", {"users": USERS}),
    ("f_reverse_sum_abs_round", "{{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ [1, 2, 3] | sum }} {{ users | sum(attribute='age') }} {{ -3 | abs }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }}", {"users": USERS}),
    ("f_indent", "[{{ 'a\\nb\\n\\nc' | indent }}][{{ 'a\\nb' | indent(2, true) }}][{{ 'a\\n\\nb' | indent(2, blank=true) }}][{{ 'a\\nb' | indent('> ') }}][{{ 'x\\n' | indent }}]", {}),
    ("f_escape_safe_wordcount", "{{ '<a href=\"x\">&\\'</a>' | escape }} {{ '<b>' | e }} {{ '<b>' | safe }} {{ 'one two  three' | wordcount }}", {}),
    ("f_attr", "{% set ns = namespace(x=7) %}[{{ users[0] | attr('name') }}] {{ users[0] | attr('items') is callable }} {{ ns | attr('x') }}", {"users": USERS}),
    ("f_chain", "{{ '  A,B,c  ' | trim | lower | replace(',', ' ') | title }}", {}),
    # ---- tests ----
    ("tests_types", "{{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ true is number }} {{ 'x' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 'x' is sequence }} {{ {} is iterable }} {{ none is iterable }} {{ none is none }} {{ missing is undefined }} {{ missing is defined }} {{ missing is iterable }} {{ [] is mapping }}", {}),
    ("tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 'a' is eq 'a' }} {{ 'a' is equalto('a') }} {{ 1 is ne 2 }} {{ 3 is gt 2 }} {{ 3 is ge 3 }} {{ 2 is lt 3 }} {{ 2 is le 1 }} {{ 2 is in [1, 2] }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ none is sameas none }} {{ 'ab' is lower }} {{ 'AB' is upper }}", {}),
    ("tests_negated", "{{ 1 is not string }} {{ x is not none }} {{ not x is none }} {{ x is not defined }}", {"x": None}),
    ("tests_filter_test_names", "{{ 'trim' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ raise_exception is callable }} {{ 'x' is callable }}", {}),
    ("test_then_and", "{{ x is defined and x > 1 }} {{ y is defined or 'no y' }}", {"x": 2}),
    # ---- for loops ----
    ("loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {}),
    ("loop_prev_next_cycle", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('o', 'e') }}]{% endfor %}", {}),
    ("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("loop_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{{ '.' if loop.last }}{% endfor %}", {}),
    ("loop_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}|{% for k, v in {'x': 1}.items() %}{{ k }}{{ v }}{% endfor %}|{% for (a, b) in [['p', 'q']] %}{{ b }}{% endfor %}", {}),
    ("loop_dict_string", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}|{% for x in missing %}no{% endfor %}", {}),
    ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop_nested", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("loop_scoping", "{% set x = 0 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}|{{ x }}|{% for i in [1] %}{% set y = 5 %}{% endfor %}{{ y is defined }}", {}),
    ("if_scoping", "{% if true %}{% set z = 3 %}{% endif %}{{ z }}", {}),
    ("range", "{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }} {{ range(0) | list }}", {}),
    ("loop_over_messages", "{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}),
    # ---- set, namespace ----
    ("set_forms", "{% set a = 1 %}{% set b, c = [2, 3] %}{% set t = 4, 5 %}{{ a }}{{ b }}{{ c }}{{ t | list }}{% set blk %}  block {{ a }} {% endset %}[{{ blk }}]{% set f | upper | trim %} up {% endset %}[{{ f }}]", {}),
    ("namespace", "{% set ns = namespace(n=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.n }} {{ ns.found }} {{ ns.missing is defined }}", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("set_overrides_global", "{% set messages = messages[1:] %}{{ messages | length }}", {"messages": [1, 2, 3]}),
    ("dict_builtin", "{{ dict(a=1, b='x') }}", {}),
    # ---- macros, call, filter blocks ----
    ("macro_basic", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('ann') }} {{ greet('bob', 'Hi') }} {{ greet(greeting='Yo', name='cid') }} [{{ greet() }}]", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs | list }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", {}),
    ("macro_late_binding", "{% macro show() %}{{ y }}{% endmacro %}{% set y = 'late' %}{{ show() }}", {}),
    ("macro_in_loop", "{% for i in [1, 2] %}{% set y = i * 10 %}{% macro m() %}{{ y }}{% endmacro %}{{ m() }}{% endfor %}", {}),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_returns_string", "{% macro num() %}42{% endmacro %}{{ num() ~ '!' }} {{ num() | int + 1 }} {{ num() is string }}", {}),
    ("macro_default_uses_param", "{% macro m(a, b=a * 2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(3) }}", {}),
    ("macro_scope", "{% set x = 'outer' %}{% macro m() %}{% set x = 'inner' %}{{ x }}{% endmacro %}{{ m() }} {{ x }}", {}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", {}),
    ("call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}", {}),
    ("filter_block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}|{% filter trim | replace('a', 'o') %}  banana  {% endfilter %}", {}),
    ("generation_tag", "a{% generation %}b{{ 1 }}{% endgeneration %}c", {}),
    # ---- Python details: Markup strings and generators ----
    ("markup_concat", "{{ 'a<b'|safe + '<i>' }}|{{ '<i>' + 'x&'|safe }}|{{ ('<'|safe) ~ '<' }}|{{ '<'|e + '>' }}|{{ '<'|e|e }}|{{ ('a<'|safe).upper() + '>' }}|{{ ('<x>'|safe)[1:] + '<' }}|{{ ('a b'|safe).split()[0] + '<' }}|{{ (', '|safe).join(['<', 'b']) }}|{{ ('<'|safe|trim) + '&' }}|{{ ('x'|safe|replace('x', '<')) + '<' }}|{{ ('q'|safe) * 2 + '\"' }}", {}),
    ("generator_semantics", "{{ [] | select | list }} {{ ([] | select) is iterable }} {{ ([] | select) is sequence }} {% if [] | select %}truthy{% endif %} {{ [1, 2] | map('string') | join(',') }} {{ [3, 1, 3] | unique | list }} {{ [1, 2] | reverse | first }} {{ 2 in [1, 2] | select }} {{ [1, 2] | select | sort }}", {}),
    ("generator_index_undefined", "[{{ ([1] | select)[0] }}][{{ none[1:] }}][{{ 5[:1] }}][{{ [1, 2]['a':] }}]", {}),
    ("err_generator_length", "{{ [1, 2] | select | length }}", {}),
    ("err_generator_tojson", "{{ [1] | map('string') | tojson }}", {}),
    ("err_generator_last", "{{ [1] | select | last }}", {}),
    # ---- chat globals ----
    ("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%A %B %j') }}", {}),
    ("chat_vars", "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ messages }}", {}),
    # ---- errors (Jinja2 fails; we must fail too) ----
    ("err_raise_exception", "a{{ raise_exception('Bad role: ' ~ 'x') }}", {}),
    ("err_undefined_attr", "{{ missing.attr }}", {}),
    ("err_undefined_call", "{{ nothing() }}", {}),
    ("err_undefined_add", "{{ missing + 1 }}", {}),
    ("err_attr_of_undefined_attr", "{{ d.x.y }}", {"d": {}}),
    ("err_unknown_filter", "{{ 'x' | frobnicate }}", {}),
    ("err_unknown_filter_in_for", "{% if true %}{% for i in [] %}{{ i | frobnicate }}{% endfor %}{% endif %}", {}),
    ("ok_unknown_filter_in_if_not_run", "{% if false %}{{ 'x' | frobnicate }}{% endif %}ok{{ 'x' | frobnicate if false else '!' }}", {}),
    ("err_unknown_filter_in_if_run", "{% if true %}{{ 'x' | frobnicate }}{% endif %}", {}),
    ("err_unknown_test", "{{ 1 is frobnicated }}", {}),
    ("err_unterminated_if", "{% if true %}open", {}),
    ("err_unterminated_for", "{% for x in y %}{{ x }}", {}),
    ("err_unterminated_var", "{{ 'x' ", {}),
    ("err_unterminated_string", "{{ 'abc }}", {}),
    ("err_unterminated_comment", "{# never closed", {}),
    ("err_unexpected_end", "{% endif %}", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_include", "{% include 'x.html' %}", {}),
    ("err_break_outside_loop", "{% break %}", {}),
    ("err_type_add", "{{ 'a' + 1 }}", {}),
    ("err_type_compare", "{{ 1 < 'a' }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_none_iter", "{% for x in none %}{% endfor %}", {}),
    ("err_none_len", "{{ none | length }}", {}),
    ("err_list_append", "{% set l = [] %}{% set _ = l.append(1) %}", {}),
    ("err_dict_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", {}),
    ("err_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("err_not_callable", "{{ 'abc'() }}", {}),
    ("err_macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("err_macro_unknown_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", {}),
    ("err_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("err_syntax_operator", "{{ 1 + }}", {}),
    ("err_unbalanced_paren", "{{ (1 + 2 }}", {}),
    ("err_join_none", "{{ none | join(',') }}", {}),
    ("err_str_join_ints", "{{ ','.join([1, 2]) }}", {}),
    ("err_items_not_mapping", "{{ [1] | items | list }}", {}),
    ("err_slice_step_zero", "{{ [1, 2][::0] }}", {}),
    ("err_unhashable_key", "{{ {[1]: 2} }}", {}),
    ("err_in_string_non_string", "{{ 1 in 'abc' }}", {}),
    ("err_concat_binds_tighter_than_plus", "{{ 1 + 2 ~ 3 }}", {}),
    ("err_deep_nesting", "{{ " + "(" * 300 + "1" + ")" * 300 + " }}", {}),
]


class GenerationTag(jinja2.ext.Extension):
    """transformers' `{% generation %}` tag: renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", [], []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_vars(template, variables):
    """Returns {"output": str} or {"error": str, "kind": "raise_exception"|"runtime"}."""
    try:
        return {"output": template.render(**variables)}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception raises the base TemplateError; the engine's own errors are subclasses.
        kind = "raise_exception" if type(e) is jinja2.exceptions.TemplateError else "runtime"
        return {"error": str(e), "kind": kind}
    except Exception as e:  # TypeError, SecurityError, ... raised while rendering
        return {"error": f"{type(e).__name__}: {e}", "kind": "runtime"}


def chat_vars(messages, agp, bos, eos, tools=None):
    """The variables transformers' apply_chat_template passes to a template."""
    return {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": agp,
            "bos_token": bos, "eos_token": eos}


def compile_or_error(env, source):
    try:
        return env.from_string(source), None
    except (jinja2.exceptions.TemplateError, SyntaxError, RecursionError) as e:  # SyntaxError: `break` outside a loop
        return None, {"error": f"{type(e).__name__}: {e}", "kind": "compile"}


def render_all(env, source, bos, eos):
    template, err = compile_or_error(env, source)
    if err:
        return {name: dict(err) for name, _, _, _ in CASES}
    return {name: render_vars(template, chat_vars(CONVERSATIONS[conv], agp, bos, eos, TOOLS if tools else None))
            for name, conv, agp, tools in CASES}


def render_snippets(env):
    out = {}
    for name, source, context in SNIPPETS:
        template, err = compile_or_error(env, source)
        variables = {**chat_vars([], True, "<s>", "</s>"), **context}
        out[name] = {"source": source, "context": context, **(err or render_vars(template, variables))}
    return out


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fnv1a64(text):
    """FNV-1a 64 of the UTF-8 bytes, as hex: the C++ test checks the cached template is the same."""
    h = 0xcbf29ce484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return f"{h:016x}"


def read_builtins():
    """The builtin templates: {name: source} from src/chat/builtin_templates.cpp."""
    path = os.path.join(ROOT, "src", "chat", "builtin_templates.cpp")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = re.findall(r'^\s*\{"([^"]+)",\s*R"jinja\((.*?)\)jinja"', text, re.S | re.M)
    if not found:
        sys.exit(f"no builtin templates found in {path}")
    return dict(found)


def read_gguf_string(path, wanted_key):
    """Reads one string metadata value from a GGUF file (versions 2 and 3)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    pos = 8
    _, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def read_str(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return data[p + 8:p + 8 + n].decode("utf-8"), p + 8 + n

    def skip_value(t, p):
        if t == 8:
            return read_str(p)[1]
        if t == 9:
            et, count = struct.unpack_from("<IQ", data, p)
            p += 12
            for _ in range(count):
                p = skip_value(et, p)
            return p
        return p + scalar[t]

    for _ in range(n_kv):
        key, pos = read_str(pos)
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if key == wanted_key and t == 8:
            return read_str(pos)[0]
        pos = skip_value(t, pos)
    sys.exit(f"{path}: no string key {wanted_key}")


def decode_c_string(body):
    """Decodes the body of a C string literal (the escapes llama.cpp's tests use)."""
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "0": "\0"}
    while i < len(body):
        c = body[i]
        if c == "\\":
            out.append(escapes[body[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_llama_tests(path):
    """{name: template} from llama.cpp's tests/test-chat-template.cpp (automated cases)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lit = r'(?:U8C\()?"((?:[^"\\]|\\.)*)"'
    pattern = r'/\* \.name= \*/\s*' + lit + r'.*?/\* \.template_str= \*/\s*' + lit
    return {decode_c_string(n): decode_c_string(t) for n, t in re.findall(pattern, text, re.S)}


def case_selected(selector, case_name, conv):
    if case_name.startswith("tools_"):
        return False  # the builtins do not render tools
    if selector is None:
        return True
    if selector == "gen":
        return case_name.endswith("/gen")
    if selector == "with_system":
        return CONVERSATIONS[conv][0]["role"] == "system"
    raise ValueError(selector)


def cross_check(env, builtins, builtin_results, sources):
    """Checks every builtin against the real templates it stands for; returns the record."""
    record, failures = {}, []
    for name, refs in REFERENCES.items():
        bos, eos = BUILTIN_TOKENS.get(name, DEFAULT_TOKENS)
        record[name] = []
        for kind, ref_name, selector in refs:
            source = sources.get(kind, {}).get(ref_name)
            if source is None:
                print(f"  {name}: reference {kind}:{ref_name} not available, skipped")
                continue
            ref_results = render_all(env, source, bos, eos)
            agreed, rejected = [], []
            for case_name, conv, _, _ in CASES:
                if not case_selected(selector, case_name, conv):
                    continue
                ref = ref_results[case_name]
                mine = builtin_results[name][case_name]
                if "error" in ref:
                    rejected.append(case_name)
                elif mine.get("output") != ref["output"]:
                    failures.append(f"{name} vs {kind}:{ref_name} [{case_name}]\n"
                                    f"  builtin:   {mine!r}\n  reference: {ref['output']!r}")
                else:
                    agreed.append(case_name)
            record[name].append({"source": kind, "name": ref_name, "sha256": sha256(source),
                                 "agree": agreed, "reference_rejects": rejected})
            print(f"  {name}: {kind}:{ref_name}: {len(agreed)} cases agree, "
                  f"{len(rejected)} rejected by the reference")
    if failures:
        sys.exit("builtin templates differ from their references:\n" + "\n".join(failures))
    return record


def write_json(name, obj):
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)  # insertion order: contexts keep theirs
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=os.environ.get("TROUPE_VOCAB_CACHE_DIR",
                                                      os.path.join(ROOT, ".cache", "llama-data")))
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "troupe-tiny-q8_0.gguf"))
    default_llama_tests = "/tmp/llama-src/llama.cpp/tests/test-chat-template.cpp"
    ap.add_argument("--llama-tests", default=default_llama_tests if os.path.exists(default_llama_tests) else None,
                    help="llama.cpp's tests/test-chat-template.cpp (see notes on fetching the llama.cpp "
                    "source), for the cross-check of builtins against the real templates quoted there")
    args = ap.parse_args()
    env = make_env()
    meta = {"jinja2_version": jinja2.__version__, "generator": "tools/gen_chat_fixtures.py"}

    write_json("conversations.json", {**meta, "now_utc": FIXED_NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                      "conversations": CONVERSATIONS, "tools": TOOLS,
                                      "cases": [{"name": n, "conversation": c, "add_generation_prompt": a,
                                                 "tools": t} for n, c, a, t in CASES]})
    write_json("snippets.json", {**meta, "snippets": render_snippets(env)})

    template_dir = os.path.join(args.cache, "templates")
    bundle_sources = {}
    if os.path.isdir(template_dir):
        for fname in sorted(os.listdir(template_dir)):
            if fname.endswith(".jinja"):
                with open(os.path.join(template_dir, fname), encoding="utf-8") as f:
                    bundle_sources[fname] = f.read()
    else:
        print(f"warning: {template_dir} absent (run scripts/fetch-llama-data.sh); bundle skipped")
    if bundle_sources:
        bos, eos = DEFAULT_TOKENS
        bundle = {fname: {"fnv1a64": fnv1a64(src), "bos_token": bos, "eos_token": eos,
                          "cases": render_all(env, src, bos, eos)}
                  for fname, src in bundle_sources.items()}
        write_json("bundle.json", {**meta, "templates": bundle})

    gguf_template = read_gguf_string(args.gguf, "tokenizer.chat_template")
    gguf_key = os.path.relpath(args.gguf, ROOT)
    write_json("gguf.json", {**meta, "templates": {gguf_key: {
        "fnv1a64": fnv1a64(gguf_template), "bos_token": "<s>", "eos_token": "</s>",
        "cases": render_all(env, gguf_template, "<s>", "</s>")}}})

    builtins = read_builtins()
    builtin_results = {}
    for name, src in builtins.items():
        bos, eos = BUILTIN_TOKENS.get(name, DEFAULT_TOKENS)
        builtin_results[name] = render_all(env, src, bos, eos)
    sources = {"bundle": bundle_sources, "gguf": {gguf_key: gguf_template}}
    if args.llama_tests:
        sources["llama-tests"] = read_llama_tests(args.llama_tests)
    else:
        print("warning: no --llama-tests: builtins quoted only there are not cross-checked")
    print("cross-check of the builtins against real templates:")
    references = cross_check(env, builtins, builtin_results, sources)
    write_json("builtin.json", {**meta, "templates": {
        name: {"source": src, "bos_token": BUILTIN_TOKENS.get(name, DEFAULT_TOKENS)[0],
               "eos_token": BUILTIN_TOKENS.get(name, DEFAULT_TOKENS)[1],
               "verified_against": references.get(name, []), "cases": builtin_results[name]}
        for name, src in builtins.items()}})

    n_ok = sum(all("output" in c for c in t["cases"].values()) for t in
               ({"cases": render_all(env, s, *DEFAULT_TOKENS)} for s in bundle_sources.values()))
    print(f"bundle: {len(bundle_sources)} templates, {n_ok} render every case in Python")


if __name__ == "__main__":
    main()
