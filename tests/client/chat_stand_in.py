"""A stand-in chat server for the clients' chat tests (tests/client/*_test.py): it needs no
model, records what each call sends, and answers predictably.

    servicer, target, server = start_chat_stand_in(chat=True)
"""

import os
import sys
import threading
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "client", "python"))

import grpc  # noqa: E402
from textgen_client import textgen_pb2, textgen_pb2_grpc  # noqa: E402


class ChatServicer(textgen_pb2_grpc.TextGenerationServicer):
    """A stand-in chat server: it records every GenerateRequest and answers a conversation
    with its last message's content and "!" (two tokens; a request without a conversation
    with its prompt's text, else its source's), after the rendered prompt's
    tokens when echo_prompt asks (text "<rendered N>", N the number of messages).
    chat=False makes it a model without a chat template; fail_on makes a user message
    with that content an INVALID_ARGUMENT; hold_on holds the stream after the first token
    of such an answer until release is set."""

    def __init__(self, chat=True, fail_on=None, hold_on=None):
        self.chat = chat
        self.fail_on = fail_on
        self.hold_on = hold_on
        self.requests = []
        self.release = threading.Event()
        self.ended = threading.Event()

    def GetModelInfo(self, request, context):
        return textgen_pb2.ModelInfo(name="stand-in", architecture="llama", chat=self.chat)

    def Generate(self, request, context):
        self.requests.append(request)
        messages = request.prompt.conversation.messages
        # Not a conversation: the prompt's text, else the source's (encoder-decoder).
        last = messages[-1].content if messages else (request.prompt.text or
                                                      request.source.text)
        if last == self.fail_on:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"refused: {last}")
        position = 0
        if request.echo_prompt:
            yield textgen_pb2.GenerateResponse(token=textgen_pb2.Token(
                id=1, text=f"<rendered {len(messages)}>", is_prompt=True))
            position = 1
        yield textgen_pb2.GenerateResponse(token=textgen_pb2.Token(
            id=2, text=last, position=position))
        if last == self.hold_on:
            context.add_callback(self.ended.set)
            self.release.wait(timeout=60)
            if not context.is_active():
                return
        yield textgen_pb2.GenerateResponse(token=textgen_pb2.Token(
            id=3, text="!", position=position + 1))
        yield textgen_pb2.GenerateResponse(finished=textgen_pb2.Finished(
            reason=textgen_pb2.FINISH_REASON_EOS, seed=5,
            usage=textgen_pb2.Usage(prompt_tokens=10 * len(messages), generated_tokens=2)))


def conversation(request):
    """A recorded request's messages as (role, content) pairs."""
    return [(m.role, m.content) for m in request.prompt.conversation.messages]


def start_chat_stand_in(**kwargs):
    """A ChatServicer(**kwargs) serving on a free local port: (servicer, target, server);
    stop it with server.stop(None) (and servicer.release.set() if it holds a stream)."""
    servicer = ChatServicer(**kwargs)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    textgen_pb2_grpc.add_TextGenerationServicer_to_server(servicer, server)
    target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    return servicer, target, server
