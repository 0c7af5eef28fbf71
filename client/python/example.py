#!/usr/bin/python3
"""textgen from Python: health, model info, a streamed generation, and attention maps.

    /usr/bin/python3 client/python/example.py --target localhost:50051 --prompt "ROMEO:"

The stubs are generated at build time into build/client/python (target
textgen_python_stubs); --stubs points elsewhere. Needs Debian's python3-grpcio only.
"""

import argparse
import pathlib
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:50051",
                        help="gRPC target: host:port, dns:///name:port, ipv4:a:p,b:p")
    parser.add_argument("--lb_policy", default=None, help="pick_first or round_robin")
    parser.add_argument("--prompt", default="ROMEO:")
    parser.add_argument("--max_new_tokens", type=int, default=120)
    parser.add_argument("--stubs", default=None,
                        help="directory of the generated stubs (default build/client/python)")
    args = parser.parse_args()
    if args.stubs:
        sys.path.insert(0, args.stubs)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import grpc
    from textgen_client import TextgenClient

    with TextgenClient(args.target, lb_policy=args.lb_policy, timeout=60) as client:
        try:
            print("health:", client.health())
            info = client.info()
        except grpc.RpcError as e:
            sys.exit(f"example: {e.code().name}: {e.details()}")
        print(f"model: {info.name} ({info.architecture}, {info.num_layers} layers x "
              f"{info.num_heads} heads, {info.tokenizer} tokenizer)")

        # Tokens arrive one by one; print each as it comes.
        stream = client.generate(args.prompt, max_new_tokens=args.max_new_tokens,
                                 temperature=0.8, top_k=40, seed=1)
        print("---")
        print(args.prompt, end="", flush=True)
        for token in stream:
            print(token.text, end="", flush=True)
        done = stream.finished
        print(f"\n--- {done.usage.generated_tokens} tokens, seed {done.seed}, "
              f"first after {1e3 * done.timings.time_to_first_token_seconds:.1f} ms")

        # Attention maps, [layer][head][query][key]; for BertViz:
        #   head_view([torch.tensor(layer)[None] for layer in att.weights], att.tokens)
        att = client.attention(args.prompt)
        t = len(att.tokens)
        print(f"attention: {len(att.weights)} layers x {len(att.weights[0])} heads x "
              f"{t} x {t}")
        for i, layer in enumerate(att.layers):
            last = [sum(head[t - 1][k] for head in att.weights[i]) / len(att.heads)
                    for k in range(t)]
            k = max(range(t), key=last.__getitem__)
            print(f"  layer {layer}: the last token {att.tokens[-1]!r} attends most to "
                  f"#{k} {att.tokens[k]!r} ({last[k]:.2f}, mean over heads)")


if __name__ == "__main__":
    main()
