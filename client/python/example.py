#!/usr/bin/python3
"""textgen from Python: health, model info, a chat (when the model has a chat template),
a streamed generation, attention maps, and a greedy look inside: each token's top
alternatives and where one head looked.

    /usr/bin/python3 client/python/example.py --target localhost:50051 --prompt "ROMEO:"
    /usr/bin/python3 client/python/example.py --prompt_ids 30,27,25 --top_logprobs 5 \
        --tap_layer 2 --tap_head 1
    /usr/bin/python3 client/python/example.py --system "Answer briefly." \
        --chat "What is 2 + 3?" --chat "And 10 - 4?"

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
    parser.add_argument("--prompt", default=None, help='the prompt text (default "ROMEO:")')
    parser.add_argument("--prompt_ids", default=None,
                        help="the prompt as token ids, e.g. 30,27,25 (instead of --prompt)")
    parser.add_argument("--max_new_tokens", type=int, default=120)
    parser.add_argument("--top_logprobs", type=int, default=3,
                        help="the look inside: alternatives shown per token")
    parser.add_argument("--tap_layer", type=int, default=0,
                        help="the look inside: the attention tap's layer")
    parser.add_argument("--tap_head", type=int, default=0,
                        help="the look inside: the attention tap's head")
    parser.add_argument("--inside_tokens", type=int, default=5,
                        help="the look inside: tokens to generate")
    parser.add_argument("--chat", action="append", default=None, metavar="MESSAGE",
                        help="the chat's user messages, one turn each (repeat the flag); "
                             "default two questions; only with a model that has a chat "
                             "template")
    parser.add_argument("--system", default=None, help="the chat's system prompt")
    parser.add_argument("--stubs", default=None,
                        help="directory of the generated stubs (default build/client/python)")
    args = parser.parse_args()
    if args.prompt is not None and args.prompt_ids is not None:
        parser.error("give --prompt or --prompt_ids, not both")
    ids = [int(i) for i in args.prompt_ids.split(",")] if args.prompt_ids else None
    text = None if ids else (args.prompt if args.prompt is not None else "ROMEO:")
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

        # A chat: the whole conversation goes with every turn; the answer streams in pieces,
        # then result() has its text, finish reason and token counts.
        if info.chat:
            messages = [{"role": "system", "content": args.system}] if args.system else []
            for question in args.chat or ["What is 2 + 3?", "And 10 - 4?"]:
                messages.append({"role": "user", "content": question})
                print(f"user: {question}\nassistant: ", end="", flush=True)
                stream = client.chat(messages, max_new_tokens=64)
                for piece in stream:
                    print(piece, end="", flush=True)
                result = stream.result()
                print(f"\n  ({result.usage.prompt_tokens} prompt + "
                      f"{result.usage.generated_tokens} generated tokens, "
                      f"{result.finish_reason})")
                messages.append(result.message())
        elif args.chat:
            sys.exit("example: the server's model has no chat template (start "
                     "textgen_server with --chat_template FILE.jinja)")
        else:
            print("chat: skipped, the model has no chat template")

        # Tokens arrive one by one; print each as it comes.
        # echo_prompt: the prompt's tokens come first (is_prompt), so the text reads whole
        # even when the prompt was given as token ids.
        stream = client.generate(text, prompt_ids=ids, max_new_tokens=args.max_new_tokens,
                                 temperature=0.8, top_k=40, seed=1, echo_prompt=True)
        print("---")
        for token in stream:
            print(token.text, end="", flush=True)
        done = stream.finished
        print(f"\n--- {done.usage.generated_tokens} tokens, seed {done.seed}, "
              f"first after {1e3 * done.timings.time_to_first_token_seconds:.1f} ms")

        # Attention maps, [layer][head][query][key]; for BertViz:
        #   head_view([torch.tensor(layer)[None] for layer in att.weights], att.tokens)
        att = client.attention(text, prompt_ids=ids)
        t = len(att.tokens)
        print(f"attention: {len(att.weights)} layers x {len(att.weights[0])} heads x "
              f"{t} x {t}")
        for i, layer in enumerate(att.layers):
            last = [sum(head[t - 1][k] for head in att.weights[i]) / len(att.heads)
                    for k in range(t)]
            k = max(range(t), key=last.__getitem__)
            print(f"  layer {layer}: the last token {att.tokens[-1]!r} attends most to "
                  f"#{k} {att.tokens[k]!r} ({last[k]:.2f}, mean over heads)")


        # A greedy look inside: each token with its most likely rivals (log-probabilities),
        # and the earlier token that one head, tapped, attended to most when predicting it.
        print(f"inside (greedy; layer {args.tap_layer} head {args.tap_head}):")
        tokens = list(att.tokens)
        for token in client.generate(text, prompt_ids=ids, max_new_tokens=args.inside_tokens,
                                     top_logprobs=args.top_logprobs,
                                     tap_layers=[args.tap_layer], tap_heads=[args.tap_head]):
            row = token.attention[0].weights  # keys 0 .. position - 1
            k = max(range(len(row)), key=row.__getitem__)
            rivals = ", ".join(f"{alt.text!r} {alt.logprob:.2f}" for alt in token.top_logprobs)
            print(f"  #{token.position} {token.text!r} (logprob {token.logprob:.2f}; top: "
                  f"{rivals}) looked most at #{k} {tokens[k]!r} ({row[k]:.2f})")
            tokens.append(token.text)


if __name__ == "__main__":
    main()
