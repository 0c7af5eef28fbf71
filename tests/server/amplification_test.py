#!/usr/bin/env python3
"""Amplification attacks against textgen_server (issue 14 item 3), each now bounded up front.

Against the shipped model (6 layers x 4 heads, context 256), with a health check every
20 ms and the server's resident memory sampled every 20 ms throughout:
  - DebugAttention with layer 0 listed 10,000 times: repeats count once (OK, one layer);
    a reply over --max_attention_map_bytes is INVALID_ARGUMENT naming the flag;
  - 200 concurrent full-context DebugAttention calls: at most
    --max_concurrent_debug_attention run, the rest get RESOURCE_EXHAUSTED naming the flag;
  - a 4 MB Tokenize: INVALID_ARGUMENT naming --max_tokenize_bytes;
  - 8 clients (all the slots) that open a Generate stream and never read: each ends with
    RESOURCE_EXHAUSTED naming --stream_idle_timeout and frees its slot, so a 9th client is
    served.
(NaN weights are refused at start-up: tests/server/server_loading_test.py.)
Resident memory must grow by less than RSS_GROWTH_BOUND_MIB over the server's once it is ready
(growth, as front_door/rapid_reset_test.py bounds it: a sanitizer build starts ~190 MiB
resident, a Release one ~30 MiB, and what the attacks must not do is add to that), and health must answer within
--health_bound_ms (default 100, the issue's bound; ctest passes 300 in a sanitizer build)
throughout. The health checks run in a process of their own (see Watch).

Usage: amplification_test.py --server_bin BIN --model DIR
"""
import argparse
import os
import sys
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "client"))
# The health and memory watcher, in a process of its own (health_watch.py says why).
sys.path.insert(0, os.path.join(HERE, "front_door"))
sys.path.insert(0, os.environ.get("TEXTGEN_PY_STUBS", ""))
from health_watch import Watch, rss_mib  # noqa: E402
from live_server import LiveServer  # noqa: E402

import grpc  # noqa: E402
from textgen.v1 import textgen_pb2 as pb  # noqa: E402
from textgen.v1 import textgen_pb2_grpc  # noqa: E402

RSS_GROWTH_BOUND_MIB = 256
HEALTH_BOUND_MS = 100


failures = []


def expect(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)
    if not ok:
        failures.append(name)


def code_and_details(call):
    try:
        responses = list(call())
        return grpc.StatusCode.OK, "", responses
    except grpc.RpcError as e:
        return e.code(), e.details(), []


def full_prompt(n=256):
    return pb.Prompt(token_ids=pb.TokenIds(ids=[(7 * i) % 65 for i in range(n)]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server_bin", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--health_bound_ms", type=float, default=HEALTH_BOUND_MS)
    args = parser.parse_args()
    server = LiveServer(args.server_bin, args.model, "--stream_idle_timeout", "2",
                        "--max_concurrent_debug_attention", "2",
                        "--max_attention_map_bytes", str(8 << 20))
    options = [("grpc.max_receive_message_length", 64 << 20),
               ("grpc.max_send_message_length", 64 << 20)]
    channel = grpc.insecure_channel(server.target, options=options)
    stub = textgen_pb2_grpc.TextGenerationStub(channel)
    idle_rss_mib = rss_mib(server._proc.pid)
    watch = Watch(server.target, server._proc.pid)
    try:
        # Repeated layers: counted once.
        code, details, replies = code_and_details(lambda: stub.DebugAttention(
            pb.DebugAttentionRequest(prompt=full_prompt(), layers=[0] * 10000), timeout=60))
        expect("repeated_layers_count_once",
               code == grpc.StatusCode.OK and replies and replies[0].num_layers == 1
               and {m.layer for r in replies for m in r.maps} == {0}, f"{code} {details}")
        # Over the map budget (8 MiB here): 6 layers x 4 heads x 256^2 x 4 = 6 MiB fits,
        # so ask with a budget-busting list of distinct layers and heads at a longer prompt...
        # the shipped model has only 24 maps: use a server whose budget is smaller instead.
        small = LiveServer(args.server_bin, args.model, "--max_attention_map_bytes",
                           str(1 << 20))
        small_stub = textgen_pb2_grpc.TextGenerationStub(
            grpc.insecure_channel(small.target, options=options))
        code, details, _ = code_and_details(lambda: small_stub.DebugAttention(
            pb.DebugAttentionRequest(prompt=full_prompt()), timeout=60))
        small.stop()
        expect("map_bytes_over_the_limit",
               code == grpc.StatusCode.INVALID_ARGUMENT
               and "--max_attention_map_bytes" in details, f"{code} {details}")

        # 200 concurrent full-context DebugAttention calls.
        def one_call(_):
            return code_and_details(lambda: stub.DebugAttention(
                pb.DebugAttentionRequest(prompt=full_prompt()), timeout=120))[:2]
        with futures.ThreadPoolExecutor(max_workers=200) as pool:
            results = list(pool.map(one_call, range(200)))
        ok = sum(1 for c, _ in results if c == grpc.StatusCode.OK)
        refused = [d for c, d in results if c == grpc.StatusCode.RESOURCE_EXHAUSTED]
        other = [(c, d) for c, d in results
                 if c not in (grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED)]
        print(f"200 concurrent DebugAttention: {ok} OK, {len(refused)} RESOURCE_EXHAUSTED",
              flush=True)
        expect("concurrent_debug_attention_limited",
               ok >= 2 and len(refused) > 0 and not other
               and all("--max_concurrent_debug_attention" in d for d in refused),
               f"ok {ok}, refused {len(refused)}, other {other[:3]}")

        # A 4 MB Tokenize (under gRPC's 4 MiB message limit, over --max_tokenize_bytes).
        code, details, _ = code_and_details(lambda: [stub.Tokenize(
            pb.TokenizeRequest(text="a" * 4_000_000), timeout=60)])
        expect("tokenize_4mb_refused",
               code == grpc.StatusCode.INVALID_ARGUMENT and "--max_tokenize_bytes" in details,
               f"{code} {details}")

        # Eight streams (every slot) that are never read: big messages (an attention tap on
        # every token) fill the connection's window, then the stream buffer, then the idle
        # timeout frees the slots.
        # A small, fixed receive window (no BDP growth) so that unread messages back up
        # to the server quickly, as they would behind a slow or hostile reader.
        idle_channels = [grpc.insecure_channel(server.target, options=[
            ("grpc.use_local_subchannel_pool", 1), ("grpc.http2.bdp_probe", 0),
            ("grpc.http2.lookahead_bytes", 8192)]) for _ in range(8)]
        idle_calls = [textgen_pb2_grpc.TextGenerationStub(c).Generate(pb.GenerateRequest(
            prompt=full_prompt(8), max_new_tokens=240, top_logprobs=20,
            attention_tap=pb.AttentionTap()), timeout=120) for c in idle_channels]
        time.sleep(4)
        start = time.monotonic()
        code, details, replies = code_and_details(lambda: stub.Generate(pb.GenerateRequest(
            prompt=full_prompt(8), max_new_tokens=16), timeout=60))
        waited = time.monotonic() - start
        expect("ninth_client_served_while_eight_never_read",
               code == grpc.StatusCode.OK and waited < 30, f"{code} {details} {waited:.1f}s")
        idle_codes = []
        for call in idle_calls:
            try:
                for _ in call:
                    pass
                idle_codes.append((grpc.StatusCode.OK, ""))
            except grpc.RpcError as e:
                idle_codes.append((e.code(), e.details()))
        expect("idle_streams_end_with_resource_exhausted",
               all(c == grpc.StatusCode.RESOURCE_EXHAUSTED and "--stream_idle_timeout" in d
                   for c, d in idle_codes), str(idle_codes[:3]))
    finally:
        watch.stop()
        server.stop()
    growth = watch.peak_rss_mib - idle_rss_mib
    print(f"server resident memory {idle_rss_mib:.0f} MiB ready, peak {watch.peak_rss_mib:.0f} "
          f"MiB (growth {growth:.0f} MiB, bound {RSS_GROWTH_BOUND_MIB}); "
          f"slowest health check {watch.max_ms:.0f} ms (bound {args.health_bound_ms:.0f}), "
          f"{watch.failures} failed", flush=True)
    expect("resident_memory_bounded", growth < RSS_GROWTH_BOUND_MIB)
    expect("health_answers_throughout",
           watch.failures == 0 and watch.max_ms < args.health_bound_ms)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
