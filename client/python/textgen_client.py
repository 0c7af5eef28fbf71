"""A small Python client for textgen's gRPC API (textgen.v1.TextGeneration).

    from textgen_client import TextgenClient
    client = TextgenClient("localhost:50051")
    for token in client.generate("ROMEO:", max_new_tokens=64, temperature=0.8, seed=1):
        print(token.text, end="", flush=True)
    att = client.attention("ROMEO:")   # att.tokens, att.weights[layer][head][q][k]
    # numpy, in any encoding; summaries and rollout; a window or a pooled overview:
    att = client.attention("ROMEO:", encoding="u8", summary=True)
    att.maps["decoder_self"]           # float32 ndarray [layers, heads, queries, keys]
    att.summaries, att.rollout         # [{"layer", "head", "entropy", ...}], ndarray [n, n]
    client.attention(text, queries=(100, 200), keys=(0, 200), overview=(32, "mean"))
    # Token ids instead of text; top alternatives, the prompt echoed, an attention tap:
    for token in client.generate(prompt_ids=[18, 15], top_logprobs=5, echo_prompt=True,
                                 tap_layers=[0], tap_heads=[1]):
        token.top_logprobs, token.attention   # (.id, .text, .logprob), (.layer, .head, .weights)
    # An encoder-decoder model (info().architecture == "encoder-decoder") reads a source;
    # its prompt is optional (the start of the answer):
    answer = client.generate(source="3rd of March 99", max_new_tokens=16).text()
    att = client.attention(source="3rd of March 99")   # + att.cross_weights, .encoder_weights
    # Chat (info().chat: the model has a chat template): the answer's text as it comes.
    messages = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "What is 2 + 3?"}]
    stream = client.chat(messages, max_new_tokens=32)
    for piece in stream:
        print(piece, end="", flush=True)
    result = stream.result()   # .text, .finish_reason ("eos"), .usage, .finished
    messages.append(result.message())   # {"role": "assistant", "content": ...}

The message classes are generated from proto/textgen/v1/textgen.proto at build time
(target textgen_python_stubs, into build/client/python). They are found on sys.path
(PYTHONPATH), else in $TEXTGEN_PY_STUBS, else in build/client/python of this repository.
Errors are grpc.RpcError, as raised by grpcio: .code() and .details() say what went wrong.

A server with TLS, mutual TLS and bearer tokens (server/README.md "Security"):

    client = TextgenClient("textgen.example:50051", tls=True, ca_cert="ca.pem",
                           client_cert="client.pem", client_key="client.key",
                           token="...")   # token defaults to $TEXTGEN_TOKEN

Needs only Debian's python3-grpcio, python3-protobuf and python3-numpy.
"""

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

# The stubs (textgen_stubs.py says where they are found) and the attention decoders
# (textgen_attention.py), re-exported: `from textgen_client import decode_packed` works.
from textgen_attention import (ENCODINGS, Attention, MapGrid, TapRow,  # noqa: F401
                               assemble_attention, attention_request, decode_packed,
                               decode_top_k, tap_rows)
from textgen_stubs import (DEFAULT_STUBS, health_pb2, health_pb2_grpc,  # noqa: F401
                           textgen_pb2, textgen_pb2_grpc)

__all__ = ["TextgenClient", "GenerateStream", "ChatStream", "ChatResult", "Attention",
           "MapGrid", "TapRow", "ENCODINGS", "decode_packed", "decode_top_k", "tap_rows",
           "DEFAULT_STUBS", "textgen_pb2", "textgen_pb2_grpc", "health_pb2",
           "health_pb2_grpc"]


class GenerateStream:
    """The tokens of one Generate call, as they arrive.

    Iterating yields textgen_pb2.Token messages (.text, .id, .logprob, .position,
    .is_prompt, .top_logprobs, .attention, .completion_index), the echoed prompt's tokens
    first. After the loop, .finished holds the Finished message (reason, usage, timings,
    seed); with n completions, .finishes holds all n (by completion_index) and .finished
    the last to end.
    cancel() ends the call early; the server frees the sequence's slot.
    """

    def __init__(self, call):
        self._call = call
        self.finished: Optional["textgen_pb2.Finished"] = None
        self.finishes: Dict[int, "textgen_pb2.Finished"] = {}

    def __iter__(self) -> Iterator["textgen_pb2.Token"]:
        for response in self._call:
            kind = response.WhichOneof("event")
            if kind == "token":
                yield response.token
            elif kind == "finished":
                self.finished = response.finished
                self.finishes[response.finished.completion_index] = response.finished

    def cancel(self) -> None:
        self._call.cancel()

    def text(self) -> str:
        """Drains the stream and returns the generated text (with n > 1, completion 0's)."""
        return "".join(token.text for token in self
                       if not token.is_prompt and token.completion_index == 0)

    def texts(self) -> List[str]:
        """Drains the stream and returns each completion's generated text, by index."""
        texts: Dict[int, str] = {}
        for token in self:
            if not token.is_prompt:
                texts[token.completion_index] = texts.get(token.completion_index, "") + token.text
        return [texts.get(i, "") for i in range(max(self.finishes, default=-1) + 1)]


@dataclass
class ChatResult:
    """One chat answer, once its stream has ended.

    text: the answer; finish_reason: "eos" (the model ended its turn), "length", "stop" or
    "context_full"; usage: prompt_tokens (the rendered conversation's) and
    generated_tokens; finished: the whole Finished message (timings, seed); prompt: the
    rendered conversation the model was given, with echo_prompt=True (else "").
    """
    text: str
    finish_reason: str
    usage: "textgen_pb2.Usage"
    finished: "textgen_pb2.Finished"
    prompt: str = ""

    def message(self) -> Dict[str, str]:
        """The answer as a message, to append to the conversation for the next turn."""
        return {"role": "assistant", "content": self.text}


class ChatStream:
    """The answer of one chat call, as it arrives.

    Iterating yields the answer's text pieces (str, none empty); the echoed prompt's tokens
    (echo_prompt=True) are not yielded but gathered in .prompt. After the loop, result()
    returns the ChatResult; called before, it drains the stream first. .tokens holds the
    answer's textgen_pb2.Token messages (ids, logprobs, top_logprobs). cancel() ends the
    call early.
    """

    def __init__(self, call):
        self._stream = GenerateStream(call)
        self._result: Optional[ChatResult] = None
        self._text: List[str] = []
        self.prompt = ""
        self.tokens: List["textgen_pb2.Token"] = []

    def __iter__(self) -> Iterator[str]:
        for token in self._stream:
            if token.is_prompt:
                self.prompt += token.text
                continue
            self.tokens.append(token)
            if token.text:
                self._text.append(token.text)
                yield token.text
        finished = self._stream.finished
        if finished is not None:
            reason = textgen_pb2.FinishReason.Name(finished.reason)
            self._result = ChatResult(
                text="".join(self._text),
                finish_reason=reason.removeprefix("FINISH_REASON_").lower(),
                usage=finished.usage, finished=finished, prompt=self.prompt)

    def cancel(self) -> None:
        self._stream.cancel()

    def result(self) -> ChatResult:
        """Drains the stream (if not done yet) and returns the answer."""
        if self._result is None:
            for _ in self:
                pass
        if self._result is None:
            raise RuntimeError("the stream ended without a Finished message")
        return self._result

    def text(self) -> str:
        """Drains the stream and returns the answer's text."""
        return self.result().text


_MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name",
                   "reasoning_content")


def _arguments(value) -> str:
    """A tool call's arguments as JSON text (as OpenAI sends them); a dict is encoded."""
    return value if isinstance(value, str) else json.dumps(value)


def _tool_call(call: Mapping[str, Any]) -> "textgen_pb2.ToolCall":
    """OpenAI's {"id", "type": "function", "function": {"name", "arguments"}}, or flat
    {"id", "name", "arguments"}."""
    function = call.get("function")
    if function is not None:
        return textgen_pb2.ToolCall(id=call.get("id", ""), name=function.get("name", ""),
                                    arguments=_arguments(function.get("arguments", "")))
    return textgen_pb2.ToolCall(id=call.get("id", ""), name=call.get("name", ""),
                                arguments=_arguments(call.get("arguments", "")))


def _chat_message(message) -> "textgen_pb2.ChatMessage":
    """A dict with OpenAI's message keys (role, content, tool_calls, tool_call_id, name,
    reasoning_content) as a textgen_pb2.ChatMessage; a ChatMessage passes as it is.
    content may be None (an assistant message with tool calls only) or a list of
    {"type": "text", "text": ...} parts, joined."""
    if isinstance(message, textgen_pb2.ChatMessage):
        return message
    unknown = sorted(set(message) - set(_MESSAGE_FIELDS))
    if unknown:
        raise ValueError(f"chat message keys {unknown} are not ChatMessage fields "
                         f"{list(_MESSAGE_FIELDS)}")
    if not message.get("role"):
        raise ValueError(f"a chat message needs a role: {message!r}")
    content = message.get("content") or ""
    if not isinstance(content, str):
        parts = list(content)
        if any(not isinstance(p, Mapping) or p.get("type") != "text" for p in parts):
            raise ValueError("a message's content is text or a list of "
                             '{"type": "text", "text": ...} parts')
        content = "".join(p.get("text", "") for p in parts)
    return textgen_pb2.ChatMessage(
        role=message["role"], content=content,
        tool_calls=[_tool_call(c) for c in message.get("tool_calls") or ()],
        tool_call_id=message.get("tool_call_id") or "", name=message.get("name") or "",
        reasoning_content=message.get("reasoning_content") or "")


def _conversation(messages, tools, add_generation_prompt, continue_final_message,
                  chat_template_kwargs) -> "textgen_pb2.Conversation":
    conversation = textgen_pb2.Conversation(
        messages=[_chat_message(m) for m in messages],
        continue_final_message=continue_final_message)
    if tools is not None:
        conversation.tools_json = tools if isinstance(tools, str) else json.dumps(list(tools))
    if add_generation_prompt is not None:
        conversation.add_generation_prompt = add_generation_prompt
    if chat_template_kwargs is not None:
        conversation.chat_template_kwargs_json = (
            chat_template_kwargs if isinstance(chat_template_kwargs, str)
            else json.dumps(dict(chat_template_kwargs)))
    return conversation


def _generation_request(max_new_tokens, temperature, top_k, top_p, repetition_penalty,
                        seed, stop, stop_token_ids, top_logprobs, echo_prompt,
                        speculative_tokens=None) -> "textgen_pb2.GenerateRequest":
    """The fields generate and chat share: length, sampling, stop strings and tokens."""
    sampling = textgen_pb2.SamplingParams(
        temperature=temperature, top_k=top_k, top_p=top_p,
        repetition_penalty=repetition_penalty)
    if seed is not None:
        sampling.seed = seed
    request = textgen_pb2.GenerateRequest(
        max_new_tokens=max_new_tokens, sampling=sampling, stop=list(stop),
        stop_token_ids=list(stop_token_ids), top_logprobs=top_logprobs,
        echo_prompt=echo_prompt)
    if speculative_tokens is not None:
        request.speculative_tokens = speculative_tokens
    return request


def _constraint(json_schema, json_object, regex, grammar,
                choice) -> Optional["textgen_pb2.Constraint"]:
    """At most one of the structured-output arguments, as a textgen_pb2.Constraint."""
    given = [name for name, value in (("json_schema", json_schema),
                                      ("json_object", json_object), ("regex", regex),
                                      ("grammar", grammar), ("choice", choice)) if value]
    if len(given) > 1:
        raise ValueError("give at most one of json_schema, json_object, regex, grammar "
                         f"and choice, not {', '.join(given)}")
    if json_schema:
        return textgen_pb2.Constraint(json_schema=json_schema if isinstance(json_schema, str)
                                      else json.dumps(json_schema))
    if json_object:
        return textgen_pb2.Constraint(json_object=True)
    if regex:
        return textgen_pb2.Constraint(regex=regex)
    if grammar:
        return textgen_pb2.Constraint(grammar=grammar)
    if choice:
        return textgen_pb2.Constraint(choice=textgen_pb2.Choices(values=list(choice)))
    return None


def _prompt(prompt: Optional[str], prompt_ids: Optional[Sequence[int]],
            optional: bool = False, name: str = "prompt") -> Optional["textgen_pb2.Prompt"]:
    """Exactly one of prompt (text) and prompt_ids (token ids), as a textgen_pb2.Prompt;
    or neither (None) when optional."""
    if prompt is None and prompt_ids is None and optional:
        return None
    if (prompt is None) == (prompt_ids is None):
        raise ValueError(f"give exactly one of {name} (text) and {name}_ids (token ids)")
    if prompt is not None:
        return textgen_pb2.Prompt(text=prompt)
    return textgen_pb2.Prompt(token_ids=textgen_pb2.TokenIds(ids=list(prompt_ids)))


def _source_and_prompt(request, prompt, prompt_ids, source, source_ids):
    """Sets request.source (optional) and request.prompt (optional with a source: an
    encoder-decoder model then starts from its BOS)."""
    src = _prompt(source, source_ids, optional=True, name="source")
    if src is not None:
        request.source.CopyFrom(src)
    given = _prompt(prompt, prompt_ids, optional=src is not None)
    if given is not None:
        request.prompt.CopyFrom(given)


class TextgenClient:
    """One channel to a textgen server (or a set of them).

    target: any gRPC target: "host:port", "dns:///name:port",
      "ipv4:127.0.0.1:5001,127.0.0.1:5002". lb_policy: "pick_first" (gRPC's default) or
      "round_robin" (spread calls over every address the target resolves to).
    timeout: default deadline in seconds for each call (None = none).
    tls: connect with TLS (implied by ca_cert, client_cert or client_key); ca_cert: PEM file
      of the CA that signed the server's certificate (default: the system's roots);
      client_cert, client_key: PEM files of this client's certificate (mutual TLS).
    token: bearer token sent with every call (default: $TEXTGEN_TOKEN; "" sends none).
    """

    def __init__(self, target: str = "localhost:50051", lb_policy: Optional[str] = None,
                 timeout: Optional[float] = None, *, tls: bool = False,
                 ca_cert: Optional[str] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None, token: Optional[str] = None,
                 options: Sequence[Tuple[str, object]] = ()):
        options = list(options)
        if lb_policy:
            options.append(("grpc.lb_policy_name", lb_policy))
        self.target = target
        self.timeout = timeout
        if token is None:
            token = os.environ.get("TEXTGEN_TOKEN", "")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        if (client_cert is None) != (client_key is None):
            raise ValueError("client_cert and client_key go together")
        if tls or ca_cert or client_cert:
            def read(path):
                with open(path, "rb") as f:
                    return f.read()
            credentials = grpc.ssl_channel_credentials(
                root_certificates=read(ca_cert) if ca_cert else None,
                private_key=read(client_key) if client_key else None,
                certificate_chain=read(client_cert) if client_cert else None)
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = textgen_pb2_grpc.TextGenerationStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _timeout(self, timeout):
        return self.timeout if timeout is None else timeout

    def generate(self, prompt: Optional[str] = None, *,
                 prompt_ids: Optional[Sequence[int]] = None, max_new_tokens: int = 0,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0,
                 repetition_penalty: float = 0.0, seed: Optional[int] = None,
                 stop: Sequence[str] = (), stop_token_ids: Sequence[int] = (),
                 top_logprobs: int = 0, echo_prompt: bool = False, attention_tap: bool = False, tap_layers: Sequence[int] = (),
                 tap_heads: Sequence[int] = (), tap_encoding: Optional[str] = None,
                 tap_top_k: int = 0, prompt_logprobs: int = 0, n: int = 1,
                 source: Optional[str] = None, source_ids: Optional[Sequence[int]] = None,
                 json_schema: Optional[Union[str, Mapping[str, Any]]] = None,
                 json_object: bool = False, regex: Optional[str] = None,
                 grammar: Optional[str] = None, choice: Optional[Sequence[str]] = None,
                 speculative_tokens: Optional[int] = None,
                 timeout: Optional[float] = None) -> GenerateStream:
        """Starts a generation; iterate the result for its tokens (see GenerateStream).

        Every field of textgen.v1.GenerateRequest:
          prompt or prompt_ids: the prompt as text or as token ids (exactly one; for an
            encoder-decoder model optional: the start of the answer).
          source or source_ids: an encoder-decoder model's source, as text or token ids
            (what its encoder reads; required by such a model, refused by others).
          max_new_tokens: 0 is the server's default. temperature 0 is greedy.
          top_k, top_p, repetition_penalty, seed (None: the server picks, see .finished.seed),
          stop: strings that end the generation; stop_token_ids: token ids that end it as
            the model's EOS does (their text is not sent).
          top_logprobs: each token also carries the N most likely tokens (0..20).
          echo_prompt: the prompt's tokens come first, is_prompt set.
          prompt_logprobs: score the prompt (0 = off): its tokens come first, each with
            its log-probability given the ones before and the N most likely tokens at
            its place (the first has none); max_new_tokens 0 then generates nothing.
          n: completions of the prompt, interleaved, each token and Finished tagged with
            its completion_index; completion i samples with seed + i.
          attention_tap: each generated token carries its attention rows (token.attention),
            every layer and head unless tap_layers / tap_heads narrow it (either implies
            the tap). tap_encoding ("f32", "u8", "u16", "f16", "top_k" with tap_top_k
            weights kept per row; implies the tap): how the rows travel; tap_rows(token)
            decodes them to numpy whatever the encoding.
          Structured output, at most one of: json_schema (a dict or its JSON text): the
            output validates against it; json_object: any JSON object; regex: the whole
            output matches it; grammar: GBNF text (llama.cpp's notation, rule root);
            choice: exactly one of these strings. Each token then carries
            allowed_tokens, how many tokens the constraint allowed at its step.
          speculative_tokens: speculative decoding's proposals per step at most for this
            call (0 = off; None = the server's, info().speculation); the output is the
            same either way, only its speed differs.
        """
        request = _generation_request(max_new_tokens, temperature, top_k, top_p,
                                      repetition_penalty, seed, stop, stop_token_ids,
                                      top_logprobs, echo_prompt, speculative_tokens)
        request.prompt_logprobs = prompt_logprobs
        request.n = n
        constraint = _constraint(json_schema, json_object, regex, grammar, choice)
        if constraint is not None:
            request.constraint.CopyFrom(constraint)
        _source_and_prompt(request, prompt, prompt_ids, source, source_ids)
        if attention_tap or tap_layers or tap_heads or tap_encoding or tap_top_k:
            if tap_encoding is not None and tap_encoding not in ENCODINGS:
                raise ValueError(f"tap_encoding must be one of {sorted(ENCODINGS)}, "
                                 f"not {tap_encoding!r}")
            request.attention_tap.CopyFrom(textgen_pb2.AttentionTap(
                layers=list(tap_layers), heads=list(tap_heads), top_k=tap_top_k,
                encoding=ENCODINGS[tap_encoding] if tap_encoding else 0))
        return GenerateStream(self._stub.Generate(request, timeout=self._timeout(timeout),
                                                  metadata=self._metadata))

    def chat(self, messages: Sequence[Union[Mapping[str, Any], "textgen_pb2.ChatMessage"]], *,
             tools: Optional[Union[str, Sequence[Mapping[str, Any]]]] = None,
             add_generation_prompt: Optional[bool] = None,
             continue_final_message: bool = False,
             chat_template_kwargs: Optional[Union[str, Mapping[str, Any]]] = None,
             max_new_tokens: int = 0, temperature: float = 0.0, top_k: int = 0,
             top_p: float = 0.0, repetition_penalty: float = 0.0,
             seed: Optional[int] = None, stop: Sequence[str] = (),
             stop_token_ids: Sequence[int] = (), top_logprobs: int = 0,
             echo_prompt: bool = False,
             json_schema: Optional[Union[str, Mapping[str, Any]]] = None,
             json_object: bool = False, regex: Optional[str] = None,
             grammar: Optional[str] = None, choice: Optional[Sequence[str]] = None,
             speculative_tokens: Optional[int] = None,
             timeout: Optional[float] = None) -> ChatStream:
        """Answers a conversation with the model's chat template (info().chat; a model
        without one is FAILED_PRECONDITION); iterate the result for the answer's text
        pieces, then result() (see ChatStream).

          messages: dicts with OpenAI's keys, {"role", "content"} and where needed
            "tool_calls" (each {"id", "type": "function", "function": {"name",
            "arguments"}}, arguments a dict or JSON text), "tool_call_id", "name",
            "reasoning_content"; or textgen_pb2.ChatMessage. The server renders them as
            Hugging Face's apply_chat_template does and stops at the end of the turn.
          tools: OpenAI's tool definitions (a list, or its JSON text), the template's
            `tools`. add_generation_prompt: None = the template's default (true unless
            continue_final_message). continue_final_message: the last message is an
            assistant's to continue. chat_template_kwargs: extra template variables (a
            dict or JSON text), e.g. {"enable_thinking": False}.
          The rest as generate's (structured output included: the answer is then
          what json_schema, json_object, regex, grammar or choice allows); echo_prompt
          gathers the rendered prompt in .prompt.
        """
        request = _generation_request(max_new_tokens, temperature, top_k, top_p,
                                      repetition_penalty, seed, stop, stop_token_ids,
                                      top_logprobs, echo_prompt, speculative_tokens)
        constraint = _constraint(json_schema, json_object, regex, grammar, choice)
        if constraint is not None:
            request.constraint.CopyFrom(constraint)
        request.prompt.conversation.CopyFrom(_conversation(
            messages, tools, add_generation_prompt, continue_final_message,
            chat_template_kwargs))
        return ChatStream(self._stub.Generate(request, timeout=self._timeout(timeout),
                                              metadata=self._metadata))

    def attention(self, prompt: Optional[str] = None, *,
                  prompt_ids: Optional[Sequence[int]] = None, layers: Sequence[int] = (),
                  heads: Sequence[int] = (), source: Optional[str] = None,
                  source_ids: Optional[Sequence[int]] = None,
                  encoding: Optional[str] = None, top_k: int = 0,
                  queries: Optional[Tuple[int, int]] = None,
                  keys: Optional[Tuple[int, int]] = None,
                  overview: Optional[Union[int, Tuple[int, str]]] = None,
                  summary: bool = False, summary_only: bool = False,
                  timeout: Optional[float] = None) -> Attention:
        """The prompt's (text or token ids) attention maps (empty layers/heads = all),
        assembled from the stream and decoded to numpy (Attention.maps). With a source
        (encoder-decoder models; the prompt is then optional) also the encoder's and the
        cross-attention maps.

          encoding: how the weights travel: "f32" (None: exact floats), "u8", "u16",
            "f16" or "top_k" (keeping top_k weights per row); each within the bound the
            proto states of the float path.
          queries, keys: (begin, end) positions, end exclusive (0 = to the last): only
            that window of each map (Attention.grids says where it sits).
          overview: cells, or (cells, "max" | "mean"): each map pooled to at most
            cells x cells cells.
          summary: also the per-map summaries and (whole prompts) the rollout;
            summary_only: those alone, no maps.
        """
        request = attention_request(
            layers, heads, encoding=encoding, top_k=top_k, queries=queries, keys=keys,
            overview=overview, summary=summary, summary_only=summary_only)
        _source_and_prompt(request, prompt, prompt_ids, source, source_ids)
        return assemble_attention(
            request, self._stub.DebugAttention(request, timeout=self._timeout(timeout),
                                               metadata=self._metadata), summary_only)

    def info(self, timeout: Optional[float] = None) -> "textgen_pb2.ModelInfo":
        """The model's architecture, sizes, tokenizer and the server's limits."""
        return self._stub.GetModelInfo(textgen_pb2.GetModelInfoRequest(),
                                       timeout=self._timeout(timeout), metadata=self._metadata)

    def tokenize(self, text: str, timeout: Optional[float] = None) -> List[Tuple[int, str]]:
        """(id, text) per token of text, with the model's tokenizer."""
        response = self._stub.Tokenize(textgen_pb2.TokenizeRequest(text=text),
                                       timeout=self._timeout(timeout), metadata=self._metadata)
        return [(t.id, t.text) for t in response.tokens]

    def health(self, timeout: Optional[float] = None) -> str:
        """The server's grpc.health.v1 status: "SERVING", "NOT_SERVING" or "UNKNOWN"."""
        response = self._health.Check(health_pb2.HealthCheckRequest(service=""),
                                      timeout=self._timeout(timeout))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
