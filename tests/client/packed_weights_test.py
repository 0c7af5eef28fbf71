"""The Python client's decoding of compact attention weights, on hand-built messages.

decode_packed / decode_top_k / tap_rows (client/python/textgen_client.py) against blocks
whose values are known: u8 and u16 codes times their row's scale, little-endian; f16
halves (subnormals included); causal rows shorter than the map leaving zeros above the
diagonal; top-k entries at their keys' columns (pooled: cells) with their remainders;
blocks that do not add up raise ValueError. Then attention() on a scripted stream (no
server): pieces of a window in u8 placed by first_query, a pooled map in top-k, the
summaries as dicts and the rollout as an ndarray.

Needs the generated stubs (TEXTGEN_PY_STUBS, as ctest sets it) and python3-numpy.
"""

import pathlib
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "client" / "python"))
import textgen_client  # noqa: E402
from textgen_client import (TextgenClient, decode_packed, decode_top_k,  # noqa: E402
                            tap_rows, textgen_pb2)

pb = textgen_pb2


def u16(*codes):
    return struct.pack(f"<{len(codes)}H", *codes)


class DecodePackedTest(unittest.TestCase):
    def test_u8_causal_rows_scaled_zero_above_the_diagonal(self):
        block = pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_UINT8, row_keys=[1, 2, 3],
                                 packed=bytes([255, 128, 255, 1, 2, 255]),
                                 row_scales=[1 / 255, 0.6 / 255, 0.5 / 255])
        dense = decode_packed(block, 3)
        self.assertEqual(dense.dtype, np.float32)
        s = np.asarray(block.row_scales, dtype=np.float32)
        want = np.array([[255 * s[0], 0, 0], [128 * s[1], 255 * s[1], 0],
                         [1 * s[2], 2 * s[2], 255 * s[2]]], dtype=np.float32)
        np.testing.assert_array_equal(dense, want)

    def test_u16_is_little_endian(self):
        block = pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_UINT16, row_keys=[2],
                                 packed=u16(0x0102, 0xFFFF), row_scales=[0.25])
        np.testing.assert_array_equal(decode_packed(block, 4),
                                      [[258 * 0.25, 65535 * 0.25, 0, 0]])

    def test_f16_halves_subnormals_included(self):
        block = pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_FLOAT16, row_keys=[1, 2],
                                 packed=u16(0x3C00, 0x3800, 0x0001))
        np.testing.assert_array_equal(decode_packed(block, 2),
                                      [[1.0, 0.0], [0.5, 2.0 ** -24]])

    def test_top_k_at_absolute_keys_with_remainders(self):
        block = pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[2, 1],
                                 first_key=10, top_keys=[12, 10, 11],
                                 top_weights=[0.5, 0.3, 0.9], remainders=[0.2, 0.1])
        np.testing.assert_array_equal(
            decode_packed(block, 4),
            np.array([[0.3, 0, 0.5, 0], [0, 0.9, 0, 0]], dtype=np.float32))
        rows = decode_top_k(block)
        self.assertEqual([list(k) for k, _, _ in rows], [[12, 10], [11]])
        self.assertEqual([r for _, _, r in rows], [np.float32(0.2), np.float32(0.1)])

    def test_top_k_pooled_cells_by_first_key(self):
        block = pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[1],
                                 top_keys=[8], top_weights=[0.75], remainders=[0])
        np.testing.assert_array_equal(decode_packed(block, 3, key_step=4), [[0, 0, 0.75]])
        block.top_keys[0] = 9  # inside a cell, not its first key
        with self.assertRaisesRegex(ValueError, "key 9"):
            decode_packed(block, 3, key_step=4)

    def test_within_the_stated_bounds_of_a_reference_encoder(self):
        """Rows encoded as the proto says (scale = row max / levels, codes rounded)
        decode within 1/510 (u8) and 1/131070 (u16) of the row's largest weight."""
        rng = np.random.default_rng(33)
        t = 19
        exact = np.tril(rng.random((t, t), dtype=np.float32))
        exact /= exact.sum(axis=1, keepdims=True)
        for encoding, levels, bound, dtype in (
                (pb.ATTENTION_ENCODING_UINT8, 255, 1 / 510, np.uint8),
                (pb.ATTENTION_ENCODING_UINT16, 65535, 1 / 131070, np.dtype("<u2"))):
            top = exact.max(axis=1)
            codes = [np.rint(exact[q, :q + 1] / top[q] * levels).astype(dtype)
                     for q in range(t)]
            block = pb.PackedWeights(encoding=encoding, row_keys=range(1, t + 1),
                                     packed=b"".join(c.tobytes() for c in codes),
                                     row_scales=top / levels)
            error = np.abs(decode_packed(block, t) - exact)
            # The bound is half a code: float32 rounding of the code and of code x scale
            # may add an ulp or two of the weight.
            slack = 2 * np.spacing(exact)
            self.assertTrue((error <= bound * top[:, None] + slack).all(),
                            f"{pb.AttentionEncoding.Name(encoding)}: {error.max()}")

    def test_blocks_that_do_not_add_up_raise(self):
        cases = [
            (pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_UINT8, row_keys=[2],
                              packed=b"\x01", row_scales=[1]), 2, "1 bytes for 2 weights"),
            (pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_UINT16, row_keys=[1, 1],
                              packed=bytes(4), row_scales=[1]), 2, "1 row scales for 2 rows"),
            (pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_FLOAT16, row_keys=[3],
                              packed=bytes(6)), 2, "2 keys wide"),
            (pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[1],
                              top_keys=[5], top_weights=[1], remainders=[0]), 5, "key 5"),
            (pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[1, 1],
                              top_keys=[0, 1], top_weights=[1, 1], remainders=[0]), 2,
             "1 remainders for 2 rows"),
            (pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_FLOAT32, row_keys=[1]), 1,
             "not a compact one"),
        ]
        for block, width, message in cases:
            with self.subTest(message=message), self.assertRaisesRegex(ValueError, message):
                decode_packed(block, width)


class TapRowsTest(unittest.TestCase):
    def test_every_encoding_of_a_tap_row(self):
        token = pb.Token(position=3, attention=[
            pb.AttentionRow(layer=0, head=1, weights=[0.25, 0.25, 0.5]),
            pb.AttentionRow(layer=0, head=2, compact=pb.PackedWeights(
                encoding=pb.ATTENTION_ENCODING_FLOAT16, row_keys=[3],
                packed=u16(0x3400, 0x3400, 0x3800))),
            pb.AttentionRow(layer=1, head=0, compact=pb.PackedWeights(
                encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[1], top_keys=[2],
                top_weights=[0.75], remainders=[0.25])),
            pb.AttentionRow(layer=1, head=0, kind=pb.ATTENTION_KIND_CROSS,
                            compact=pb.PackedWeights(
                                encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[1],
                                top_keys=[4], top_weights=[1], remainders=[0]))])
        rows = tap_rows(token, num_source_tokens=5)
        self.assertEqual([(r.layer, r.head, r.kind) for r in rows],
                         [(0, 1, "decoder_self"), (0, 2, "decoder_self"),
                          (1, 0, "decoder_self"), (1, 0, "cross")])
        for row in rows[:2]:
            np.testing.assert_array_equal(row.weights, [0.25, 0.25, 0.5])
        np.testing.assert_array_equal(rows[2].weights, [0, 0, 0.75])  # position 3 wide
        self.assertEqual((list(rows[2].top_keys), rows[2].remainder), ([2], 0.25))
        np.testing.assert_array_equal(rows[3].weights, [0, 0, 0, 0, 1])
        with self.assertRaisesRegex(ValueError, "num_source_tokens"):
            tap_rows(token)


class _ScriptedStub:
    """Stands in for the gRPC stub: DebugAttention answers with the given messages and
    keeps the request."""

    def __init__(self, responses):
        self.responses = responses
        self.request = None

    def DebugAttention(self, request, timeout=None, metadata=()):
        self.request = request
        return iter(self.responses)


def _client(responses):
    client = TextgenClient("localhost:1")
    client._stub = _ScriptedStub(responses)
    return client


def _u8(rows):
    """rows (lists of weights) as a u8 block: scale = row max / 255."""
    scales = [max(r) / 255 for r in rows]
    codes = [round(w / s) for r, s in zip(rows, scales) for w in r]
    return pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_UINT8,
                            row_keys=[len(r) for r in rows], packed=bytes(codes),
                            row_scales=scales)


class AttentionAssemblyTest(unittest.TestCase):
    TOKENS = [pb.PromptToken(id=i, text=c) for i, c in enumerate("abcdefgh")]

    def test_window_in_u8_pieces_placed_by_first_query(self):
        # Queries 4..8, keys 2..8 of an 8-token causal map: query q holds keys 2..q, so
        # the rows are 3, 4, 5, 6 keys long in a 6-key window.
        rows = [[1.0] * n for n in (3, 4, 5, 6)]
        first = pb.DebugAttentionResponse(tokens=self.TOKENS, num_layers=1, num_heads=1,
                                          maps=[pb.AttentionMap(
                                              layer=0, head=0, first_query=6, first_key=2,
                                              rows=2, compact=_u8(rows[2:]),
                                              kind=pb.ATTENTION_KIND_DECODER_SELF)])
        second = pb.DebugAttentionResponse(maps=[pb.AttentionMap(
            layer=0, head=0, first_query=4, first_key=2, rows=2, compact=_u8(rows[:2]),
            kind=pb.ATTENTION_KIND_DECODER_SELF)])
        client = _client([first, second])
        att = client.attention("abcdefgh", encoding="u8", queries=(4, 0), keys=(2, 8))
        request = client._stub.request
        self.assertEqual((request.encoding, request.queries.begin, request.keys.end),
                         (pb.ATTENTION_ENCODING_UINT8, 4, 8))
        m = att.maps["decoder_self"]
        self.assertEqual(m.shape, (1, 1, 4, 6))
        np.testing.assert_allclose(m[0, 0], np.tril(np.ones((4, 6)), k=2), rtol=1e-6)
        self.assertEqual(att.grids["decoder_self"], textgen_client.MapGrid(4, 2, 1, 1))
        self.assertEqual(att.weights, m.tolist())

    def test_pooled_top_k_summaries_and_rollout(self):
        # 8 tokens pooled to 2 x 2 cells of 4: causal cell (0, 1) is left out.
        block = pb.PackedWeights(encoding=pb.ATTENTION_ENCODING_TOP_K, row_keys=[1, 2],
                                 top_keys=[0, 4, 0], top_weights=[0.9, 0.6, 0.4],
                                 remainders=[0.1, 0])
        rollout = _u8([[1.0]] + [[0.5] * 2] + [[0.25] * 4] * 6)
        rollout.row_keys[:] = [1, 2] + [4] * 6  # rows leave out the keys after them
        response = pb.DebugAttentionResponse(
            tokens=self.TOKENS, num_layers=1, num_heads=1,
            maps=[pb.AttentionMap(layer=0, head=0, first_query=0, rows=2, compact=block,
                                  query_step=4, key_step=4,
                                  kind=pb.ATTENTION_KIND_DECODER_SELF)],
            summaries=[pb.AttentionSummary(layer=0, head=0, entropy=1.5, sink=0.25,
                                           mean_distance=2, distance_profile=[0.5, 0.5],
                                           max_weight=0.75,
                                           kind=pb.ATTENTION_KIND_DECODER_SELF)],
            rollout=pb.AttentionRollout(compact=rollout))
        att = _client([response]).attention("abcdefgh", encoding="top_k", top_k=2,
                                            overview=(2, "mean"), summary=True)
        np.testing.assert_array_equal(att.maps["decoder_self"][0, 0],
                                      np.array([[0.9, 0], [0.4, 0.6]], dtype=np.float32))
        self.assertEqual(att.grids["decoder_self"], textgen_client.MapGrid(0, 0, 4, 4))
        self.assertEqual(att.summaries, [{
            "layer": 0, "head": 0, "kind": "decoder_self", "entropy": 1.5, "sink": 0.25,
            "mean_distance": 2.0, "distance_profile": [0.5, 0.5], "max_weight": 0.75}])
        self.assertEqual(att.rollout.shape, (8, 8))
        np.testing.assert_allclose(att.rollout[1], [0.5, 0.5, 0, 0, 0, 0, 0, 0], rtol=1e-6)
        self.assertEqual(att.rollout[7, 4], 0)

    def test_a_missing_row_is_an_error(self):
        response = pb.DebugAttentionResponse(tokens=self.TOKENS[:2], maps=[pb.AttentionMap(
            layer=0, head=0, first_query=0, rows=1, weights=[1, 0],
            kind=pb.ATTENTION_KIND_DECODER_SELF)])
        with self.assertRaisesRegex(ValueError, "expected 0..1"):
            _client([response]).attention("ab")


if __name__ == "__main__":
    unittest.main(verbosity=2)
