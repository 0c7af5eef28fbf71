"""Attention over textgen's gRPC API, decoded to numpy: the compact encodings
(PackedWeights: u8, u16, f16, top_k), the Generate tap's rows, and DebugAttention's streamed
pieces assembled into [layer, head, query, key] arrays (TextgenClient.attention). The same
values as the C++ client's decoder (client/packed_weights.h)."""

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from textgen_stubs import textgen_pb2

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


def attention_request(layers: Sequence[int] = (), heads: Sequence[int] = (), *,
                      encoding: Optional[str] = None, top_k: int = 0,
                      queries: Optional[Tuple[int, int]] = None,
                      keys: Optional[Tuple[int, int]] = None,
                      overview: Optional[Union[int, Tuple[int, str]]] = None,
                      summary: bool = False, summary_only: bool = False
                      ) -> "textgen_pb2.DebugAttentionRequest":
    """A DebugAttentionRequest with TextgenClient.attention's selection, encoding and
    summaries (its prompt and source are the caller's to set). ValueError for an encoding or
    a pooling it does not know."""
    request = textgen_pb2.DebugAttentionRequest(
        layers=list(layers), heads=list(heads), top_k=top_k,
        summary=summary or summary_only, summary_only=summary_only)
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
    return request


def assemble_attention(request: "textgen_pb2.DebugAttentionRequest",
                       responses: Iterable["textgen_pb2.DebugAttentionResponse"],
                       summary_only: bool = False) -> Attention:
    """The reply to `request`, a stream of DebugAttentionResponse pieces, as one Attention:
    each map's rows placed by their first query, every encoding decoded. ValueError when the
    pieces do not add up (rows missing or twice, grids that disagree, sizes)."""
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

    for response in responses:
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
