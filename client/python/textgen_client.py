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

import functools
import json
import os
import pathlib
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

_REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_STUBS = _REPO / "build" / "client" / "python"


def _import_stubs():
    try:
        from textgen.v1 import textgen_pb2, textgen_pb2_grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:
        stubs = os.environ.get("TEXTGEN_PY_STUBS", str(DEFAULT_STUBS))
        if not pathlib.Path(stubs, "textgen", "v1", "textgen_pb2.py").is_file():
            raise ImportError(
                f"textgen's Python stubs are not in {stubs}: build them with "
                "`cmake --build build --target textgen_python_stubs`, or put "
                "their directory on PYTHONPATH") from None
        sys.path.insert(0, stubs)
        from textgen.v1 import textgen_pb2, textgen_pb2_grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    return textgen_pb2, textgen_pb2_grpc, health_pb2, health_pb2_grpc


textgen_pb2, textgen_pb2_grpc, health_pb2, health_pb2_grpc = _import_stubs()


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
                        seed, stop, stop_token_ids, top_logprobs,
                        echo_prompt) -> "textgen_pb2.GenerateRequest":
    """The fields generate and chat share: length, sampling, stop strings and tokens."""
    sampling = textgen_pb2.SamplingParams(
        temperature=temperature, top_k=top_k, top_p=top_p,
        repetition_penalty=repetition_penalty)
    if seed is not None:
        sampling.seed = seed
    return textgen_pb2.GenerateRequest(
        max_new_tokens=max_new_tokens, sampling=sampling, stop=list(stop),
        stop_token_ids=list(stop_token_ids), top_logprobs=top_logprobs,
        echo_prompt=echo_prompt)


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


# The encodings by the names the command line and the HTTP API give them.
ENCODINGS = {"f32": textgen_pb2.ATTENTION_ENCODING_FLOAT32,
             "u8": textgen_pb2.ATTENTION_ENCODING_UINT8,
             "u16": textgen_pb2.ATTENTION_ENCODING_UINT16,
             "f16": textgen_pb2.ATTENTION_ENCODING_FLOAT16,
             "top_k": textgen_pb2.ATTENTION_ENCODING_TOP_K}


def decode_packed(packed: "textgen_pb2.PackedWeights", width: int,
                  key_step: int = 1) -> np.ndarray:
    """A PackedWeights block (proto/textgen/v1/textgen.proto) as dense float32 rows,
    shape [len(row_keys), width]; column c is key first_key + c * key_step (key_step > 1:
    a pooled map's cells, which TOP_K names by their first key).

    Row r holds row_keys[r] values: UINT8/UINT16 codes times the row's scale, FLOAT16
    halves (little-endian), for the row's leading keys (a causal map leaves out the keys
    above its diagonal: they decode to 0); TOP_K entries at their keys' columns, the keys
    it left out 0 (their sum is the row's remainder, decode_top_k). The same values as
    the C++ client's decoder (client/packed_weights.h). ValueError when the block does
    not add up (byte lengths, scales, entries, keys out of range).
    """
    enc = textgen_pb2.AttentionEncoding
    row_keys = np.asarray(packed.row_keys, dtype=np.int64)
    rows = len(row_keys)
    if (row_keys < 0).any() or (row_keys > width).any():
        raise ValueError(f"rows of {row_keys.max()} keys; rows are {width} keys wide")
    total = int(row_keys.sum())
    dense = np.zeros((rows, width), dtype=np.float32)
    row_of = np.repeat(np.arange(rows), row_keys)
    if packed.encoding == enc.ATTENTION_ENCODING_TOP_K:
        if len(packed.top_keys) != total or len(packed.top_weights) != total:
            raise ValueError(f"top_k: {len(packed.top_keys)} keys and "
                             f"{len(packed.top_weights)} weights for {total} entries")
        if len(packed.remainders) != rows:
            raise ValueError(f"top_k: {len(packed.remainders)} remainders for {rows} rows")
        offset = np.asarray(packed.top_keys, dtype=np.int64) - packed.first_key
        column = offset // key_step
        bad = (offset < 0) | (offset % key_step != 0) | (column >= width)
        if bad.any():
            raise ValueError(f"top_k: key {np.asarray(packed.top_keys)[bad][0]} is not one of "
                             f"the {width} columns from key {packed.first_key} by {key_step}")
        dense[row_of, column] = np.asarray(packed.top_weights, dtype=np.float32)
        return dense
    dtypes = {enc.ATTENTION_ENCODING_UINT8: np.dtype(np.uint8),
              enc.ATTENTION_ENCODING_UINT16: np.dtype("<u2"),
              enc.ATTENTION_ENCODING_FLOAT16: np.dtype("<f2")}
    dtype = dtypes.get(packed.encoding)
    name = enc.Name(packed.encoding)
    if dtype is None:
        raise ValueError(f"packed weights in encoding {name}, not a compact one "
                         "(u8, u16, f16, top_k)")
    if len(packed.packed) != total * dtype.itemsize:
        raise ValueError(f"{name}: {len(packed.packed)} bytes for {total} weights")
    values = np.frombuffer(packed.packed, dtype=dtype).astype(np.float32)
    if dtype != np.dtype("<f2"):
        if len(packed.row_scales) != rows:
            raise ValueError(f"{name}: {len(packed.row_scales)} row scales for {rows} rows")
        values *= np.asarray(packed.row_scales, dtype=np.float32)[row_of]
    starts = np.repeat(np.cumsum(row_keys) - row_keys, row_keys)
    dense[row_of, np.arange(total) - starts] = values
    return dense


def decode_top_k(packed: "textgen_pb2.PackedWeights"
                 ) -> List[Tuple[np.ndarray, np.ndarray, float]]:
    """A TOP_K block's rows as sent: (keys, weights, remainder) per row, keys absolute
    positions, largest weight first; remainder the weight the row left out."""
    if packed.encoding != textgen_pb2.AttentionEncoding.ATTENTION_ENCODING_TOP_K:
        raise ValueError("not a top_k block")
    ends = np.cumsum(np.asarray(packed.row_keys, dtype=np.int64))
    if (len(packed.remainders) != len(ends) or len(packed.top_keys) != ends[-1:].sum()
            or len(packed.top_weights) != len(packed.top_keys)):
        raise ValueError("top_k: entries or remainders do not match row_keys")
    keys = np.asarray(packed.top_keys, dtype=np.int64)
    weights = np.asarray(packed.top_weights, dtype=np.float32)
    starts = ends - np.asarray(packed.row_keys, dtype=np.int64)
    return [(keys[a:b], weights[a:b], float(r))
            for a, b, r in zip(starts, ends, packed.remainders)]


def _compact(block) -> bool:
    """Whether a message's `compact` holds the weights (else its float `weights` do)."""
    enc = textgen_pb2.AttentionEncoding
    return block.HasField("compact") and block.compact.encoding not in (
        enc.ATTENTION_ENCODING_UNSPECIFIED, enc.ATTENTION_ENCODING_FLOAT32)


@dataclass
class TapRow:
    """One attention row of a generated token (the Generate tap), decoded.

    weights: float32 ndarray over the query's keys (decoder self: keys 0..position-1;
    cross: the source's tokens); TOP_K leaves the keys it did not keep at 0, and
    top_keys / top_weights / remainder then hold what was sent.
    """
    layer: int
    head: int
    kind: str  # "decoder_self" or "cross"
    weights: np.ndarray
    top_keys: Optional[np.ndarray] = None
    top_weights: Optional[np.ndarray] = None
    remainder: Optional[float] = None


def _kind_name(kind: int) -> str:
    """An AttentionKind as the HTTP API names it: decoder_self, encoder_self, cross."""
    kinds = textgen_pb2.AttentionKind
    return {kinds.ATTENTION_KIND_ENCODER_SELF: "encoder_self",
            kinds.ATTENTION_KIND_CROSS: "cross"}.get(kind, "decoder_self")


def tap_rows(token: "textgen_pb2.Token",
             num_source_tokens: Optional[int] = None) -> List[TapRow]:
    """A generated token's attention rows (token.attention) decoded to numpy, whatever
    the tap's encoding. A TOP_K cross row needs num_source_tokens (its width: the
    source's length, which the row itself does not carry); a TOP_K decoder row is
    token.position keys wide."""
    rows = []
    for row in token.attention:
        kind = _kind_name(row.kind)
        if not _compact(row):
            rows.append(TapRow(row.layer, row.head, kind,
                               np.asarray(row.weights, dtype=np.float32)))
            continue
        if len(row.compact.row_keys) != 1:
            raise ValueError(f"a tap row's block holds {len(row.compact.row_keys)} rows")
        if row.compact.encoding != textgen_pb2.AttentionEncoding.ATTENTION_ENCODING_TOP_K:
            # A tap row is whole (every key of its query): its length is its width.
            weights = decode_packed(row.compact, row.compact.row_keys[0])[0]
            rows.append(TapRow(row.layer, row.head, kind, weights))
            continue
        if kind == "cross" and num_source_tokens is None:
            raise ValueError("a top_k cross row needs num_source_tokens (its width)")
        width = num_source_tokens if kind == "cross" else token.position
        keys, weights, remainder = decode_top_k(row.compact)[0]
        rows.append(TapRow(row.layer, row.head, kind, decode_packed(row.compact, width)[0],
                           keys, weights, remainder))
    return rows


@dataclass
class MapGrid:
    """Where a kind's maps sit in the whole map: row r covers queries first_query +
    r * query_step onwards (query_step of them, the last row perhaps fewer), column c keys
    first_key + c * key_step onwards. Whole maps: 0, 0, 1, 1."""
    first_query: int = 0
    first_key: int = 0
    query_step: int = 1
    key_step: int = 1


@dataclass
class Attention:
    """A prompt's attention maps.

    maps: float32 ndarrays [layer, head, query, key] by kind ("decoder_self", and for an
    encoder-decoder model "encoder_self" and "cross"), decoded whatever the encoding
    (TOP_K: the keys left out are 0); with queries/keys/overview the selected window or
    its pooled cells, placed by grids[kind] (MapGrid). layers[i], heads[j] name
    maps["decoder_self"][i, j] (encoder_layers[i] the encoder's).
    summaries: with summary=True, one dict per map as the server computed it: layer,
    head, kind, entropy, sink, mean_distance, distance_profile (list), max_weight.
    rollout: the decoder's attention rollout, ndarray [n, n], when the server sent one.

    weights[i][j][q][k], as nested lists, is maps["decoder_self"] in the shape BertViz's
    head_view takes (rows sum to 1; 0 above the diagonal, where the mask is).

    An encoder-decoder model's (a source was sent) also has, as BertViz's model_view takes
    them: source_tokens (S of them); encoder_weights[i][j][q][k], encoder layer
    encoder_layers[i], head heads[j], source token q over source token k (S x S, no mask);
    cross_weights[i][j][q][k], decoder layer layers[i], head heads[j], target token q
    over source token k (T x S). Empty for a decoder-only model.
    """
    tokens: List[str]
    token_ids: List[int]
    layers: List[int]
    heads: List[int]
    maps: Dict[str, np.ndarray] = field(default_factory=dict)
    grids: Dict[str, MapGrid] = field(default_factory=dict)
    source_tokens: List[str] = field(default_factory=list)
    source_token_ids: List[int] = field(default_factory=list)
    encoder_layers: List[int] = field(default_factory=list)
    summaries: List[Dict[str, Any]] = field(default_factory=list)
    rollout: Optional[np.ndarray] = None

    def _lists(self, kind: str) -> List[List[List[List[float]]]]:
        return self.maps[kind].tolist() if kind in self.maps else []

    # Nested lists on demand (once): a long prompt's maps as Python floats take ~8x the
    # memory of the arrays.
    @functools.cached_property
    def weights(self) -> List[List[List[List[float]]]]:
        return self._lists("decoder_self")

    @functools.cached_property
    def encoder_weights(self) -> List[List[List[List[float]]]]:
        return self._lists("encoder_self")

    @functools.cached_property
    def cross_weights(self) -> List[List[List[List[float]]]]:
        return self._lists("cross")


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
        """
        request = _generation_request(max_new_tokens, temperature, top_k, top_p,
                                      repetition_penalty, seed, stop, stop_token_ids,
                                      top_logprobs, echo_prompt)
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
                                      top_logprobs, echo_prompt)
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
        request = textgen_pb2.DebugAttentionRequest(
            layers=list(layers), heads=list(heads), top_k=top_k,
            summary=summary or summary_only, summary_only=summary_only)
        _source_and_prompt(request, prompt, prompt_ids, source, source_ids)
        if encoding is not None:
            if encoding not in ENCODINGS:
                raise ValueError(f"encoding must be one of {sorted(ENCODINGS)}, "
                                 f"not {encoding!r}")
            request.encoding = ENCODINGS[encoding]
        for name, span in (("queries", queries), ("keys", keys)):
            if span is not None:
                getattr(request, name).CopyFrom(
                    textgen_pb2.AttentionRange(begin=span[0], end=span[1]))
        if overview is not None:
            cells, pooling = (overview, "max") if isinstance(overview, int) else overview
            if pooling not in ("max", "mean"):
                raise ValueError(f'overview pooling is "max" or "mean", not {pooling!r}')
            request.overview.CopyFrom(textgen_pb2.AttentionOverview(
                cells=cells, pooling=textgen_pb2.POOLING_MAX if pooling == "max"
                else textgen_pb2.POOLING_MEAN))

        kinds = textgen_pb2.AttentionKind
        tokens: List[str] = []
        ids: List[int] = []
        source_tokens: List[str] = []
        source_token_ids: List[int] = []
        # (kind, layer, head) -> its rows so far by index (0 = the selection's first
        # query or cell); kind -> its grid, from the first piece.
        rows: Dict[Tuple[int, int, int], Dict[int, np.ndarray]] = {}
        grids: Dict[int, MapGrid] = {}
        spans: Dict[int, Tuple[int, int, int, int]] = {}
        summaries: List[Dict[str, Any]] = []
        rollout_message = None

        def span(selected, n):
            """[begin, end) of n positions that the request selects."""
            if not request.HasField(selected):
                return 0, n
            r = getattr(request, selected)
            return r.begin, (n if r.end == 0 else min(r.end, n))

        for response in self._stub.DebugAttention(request, timeout=self._timeout(timeout),
                                                  metadata=self._metadata):
            if response.tokens:
                tokens = [t.text for t in response.tokens]
                ids = [t.id for t in response.tokens]
            if response.source_tokens:
                source_tokens = [t.text for t in response.source_tokens]
                source_token_ids = [t.id for t in response.source_tokens]
            for m in response.maps:
                name = f"map {kinds.Name(m.kind)} L{m.layer} H{m.head}"
                encoder = m.kind == kinds.ATTENTION_KIND_ENCODER_SELF
                decoder = m.kind in (kinds.ATTENTION_KIND_DECODER_SELF,
                                     kinds.ATTENTION_KIND_UNSPECIFIED)
                q_begin, q_end = span("queries", len(source_tokens if encoder else tokens))
                _, k_end = span("keys", len(tokens if decoder else source_tokens))
                grid = MapGrid(q_begin, m.first_key, max(m.query_step, 1),
                               max(m.key_step, 1))
                if grids.setdefault(m.kind, grid) != grid:
                    raise ValueError(f"{name}: pieces disagree on where their rows sit")
                spans[m.kind] = (q_begin, q_end, m.first_key, k_end)
                width = -(-(k_end - m.first_key) // grid.key_step)
                if width <= 0:
                    raise ValueError(f"{name}: no keys")
                if _compact(m):
                    if m.rows and m.rows != len(m.compact.row_keys):
                        raise ValueError(f"{name}: a piece of {m.rows} rows holds "
                                         f"{len(m.compact.row_keys)}")
                    block = decode_packed(m.compact, width, grid.key_step)
                else:
                    count = m.rows or len(m.weights) // width
                    if len(m.weights) != count * width:
                        raise ValueError(f"{name}: {len(m.weights)} weights are not "
                                         f"{count} whole rows of {width} keys")
                    block = np.asarray(m.weights, dtype=np.float32).reshape(count, width)
                offset = m.first_query - q_begin
                if offset < 0 or offset % grid.query_step:
                    raise ValueError(f"{name}: a piece from query {m.first_query}, not a row "
                                     f"of the selection from {q_begin} by {grid.query_step}")
                piece = rows.setdefault((m.kind, m.layer, m.head), {})
                for r, row in enumerate(block):
                    piece[offset // grid.query_step + r] = row
            for x in response.summaries:
                summaries.append({
                    "layer": x.layer, "head": x.head, "kind": _kind_name(x.kind),
                    "entropy": x.entropy, "sink": x.sink, "mean_distance": x.mean_distance,
                    "distance_profile": list(x.distance_profile),
                    "max_weight": x.max_weight})
            if response.HasField("rollout"):
                rollout_message = response.rollout

        def assemble(kind):
            """[layer, head, row, column] of one kind, and its layers and heads."""
            layer_ids = sorted({layer for k, layer, _ in rows if k == kind})
            head_ids = sorted({head for k, _, head in rows if k == kind})
            if not layer_ids:
                return layer_ids, head_ids, None
            q_begin, q_end, _, _ = spans[kind]
            count = -(-(q_end - q_begin) // grids[kind].query_step)
            out = []
            for layer in layer_ids:
                for head in head_ids:
                    piece = rows.get((kind, layer, head), {})
                    if sorted(piece) != list(range(count)):
                        raise ValueError(f"map {kinds.Name(kind)} L{layer} H{head}: got rows "
                                         f"{sorted(piece)[:5]}..., expected 0..{count - 1}")
                    out.append(np.stack([piece[r] for r in range(count)]))
            stacked = np.stack(out)
            return layer_ids, head_ids, stacked.reshape(
                len(layer_ids), len(head_ids), *stacked.shape[1:])

        maps: Dict[str, np.ndarray] = {}
        map_grids: Dict[str, MapGrid] = {}
        assembled = {}
        for kind in (kinds.ATTENTION_KIND_DECODER_SELF, kinds.ATTENTION_KIND_ENCODER_SELF,
                     kinds.ATTENTION_KIND_CROSS):
            layer_ids, head_ids, array = assemble(kind)
            assembled[kind] = (layer_ids, head_ids)
            if array is not None:
                maps[_kind_name(kind)] = array
                map_grids[_kind_name(kind)] = grids[kind]
        if not maps and not summary_only:
            raise ValueError("the reply has no maps")

        rollout = None
        if rollout_message is not None:
            n = len(tokens)
            if _compact(rollout_message):
                if len(rollout_message.compact.row_keys) != n:
                    raise ValueError(f"a rollout of {len(rollout_message.compact.row_keys)} "
                                     f"rows for {n} tokens")
                rollout = decode_packed(rollout_message.compact, n)
            elif rollout_message.weights:
                if len(rollout_message.weights) != n * n:
                    raise ValueError(f"a rollout of {len(rollout_message.weights)} weights "
                                     f"for {n} tokens")
                rollout = np.asarray(rollout_message.weights, dtype=np.float32).reshape(n, n)
        layer_ids, head_ids = assembled[kinds.ATTENTION_KIND_DECODER_SELF]
        encoder_layers, encoder_heads = assembled[kinds.ATTENTION_KIND_ENCODER_SELF]
        return Attention(tokens=tokens, token_ids=ids, layers=layer_ids,
                         heads=head_ids or encoder_heads, maps=maps, grids=map_grids,
                         source_tokens=source_tokens, source_token_ids=source_token_ids,
                         encoder_layers=encoder_layers, summaries=summaries,
                         rollout=rollout)

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
