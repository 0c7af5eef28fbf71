"""Server reflection v1 and v1alpha on a live textgen_server (server/grpc/reflection_v1.h).

grpcurl and newer tools ask for grpc.reflection.v1 first; gRPC 1.51 serves only v1alpha, so
the server adds v1 itself. Here, with Python stubs generated from Debian's grpc-proto copies
of both protos (target reflection_python_stubs): v1 lists the services, textgen.v1 among them;
its file answers describe textgen.v1.TextGeneration; unknown names are NOT_FOUND error
responses; several requests on one stream are answered one by one; and for every single
request v1's answer is byte for byte v1alpha's (the two protocols are the same messages).

    TEXTGEN_REFLECTION_STUBS=build/tests/client/python /usr/bin/python3 \\
        tests/client/reflection_test.py --server_bin build/server/textgen_server \\
        --model models/shakespeare-char --cli build/client/textgen
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.environ.get("TEXTGEN_REFLECTION_STUBS",
                                  os.path.join(HERE, "..", "..", "build", "tests", "client",
                                               "python")))
from live_server import LiveServer, parse_args  # noqa: E402

import grpc  # noqa: E402
from google.protobuf import descriptor_pb2  # noqa: E402
# Generated under textgen_reflection/ so they do not shadow grpcio's own `grpc` package.
from textgen_reflection.v1 import reflection_pb2 as v1  # noqa: E402
from textgen_reflection.v1 import reflection_pb2_grpc as v1_grpc  # noqa: E402
from textgen_reflection.v1alpha import reflection_pb2 as v1alpha  # noqa: E402
from textgen_reflection.v1alpha import reflection_pb2_grpc as v1alpha_grpc  # noqa: E402

ARGS = None
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]


class ReflectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.model)
        cls.channel = grpc.insecure_channel(cls.server.target)
        cls.v1 = v1_grpc.ServerReflectionStub(cls.channel)
        cls.v1alpha = v1alpha_grpc.ServerReflectionStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def ask(self, requests, version=v1):
        """Sends the requests (dicts of ServerReflectionRequest fields) on one stream."""
        stub = self.v1 if version is v1 else self.v1alpha
        messages = [version.ServerReflectionRequest(**r) for r in requests]
        return list(stub.ServerReflectionInfo(iter(messages), timeout=60))

    def files(self, response):
        files = []
        for data in response.file_descriptor_response.file_descriptor_proto:
            files.append(descriptor_pb2.FileDescriptorProto.FromString(data))
        return files

    def test_v1_lists_the_services(self):
        [response] = self.ask([{"list_services": "", "host": "localhost"}])
        self.assertEqual(response.WhichOneof("message_response"), "list_services_response")
        names = [s.name for s in response.list_services_response.service]
        self.assertCountEqual(names, ["textgen.v1.TextGeneration", "grpc.health.v1.Health",
                                      "grpc.reflection.v1.ServerReflection",
                                      "grpc.reflection.v1alpha.ServerReflection"])
        self.assertEqual(response.valid_host, "localhost")
        self.assertEqual(response.original_request.list_services, "")
        self.assertEqual(response.original_request.WhichOneof("message_request"),
                         "list_services")

    def test_v1_describes_the_textgen_service(self):
        for request in ({"file_containing_symbol": "textgen.v1.TextGeneration"},
                        {"file_containing_symbol": "textgen.v1.TextGeneration.Generate"},
                        {"file_containing_symbol": "textgen.v1.GenerateRequest"},
                        {"file_by_filename": "textgen/v1/textgen.proto"}):
            with self.subTest(request=request):
                [response] = self.ask([request])
                [textgen] = self.files(response)  # it imports nothing
                self.assertEqual(textgen.name, "textgen/v1/textgen.proto")
                self.assertEqual(textgen.package, "textgen.v1")
                [service] = textgen.service
                self.assertEqual([m.name for m in service.method],
                                 ["Generate", "DebugAttention", "GetModelInfo", "Tokenize"])
                self.assertTrue(service.method[0].server_streaming)
                generate = next(m for m in textgen.message_type if m.name == "GenerateRequest")
                self.assertIn("attention_tap", [f.name for f in generate.field])
        # Reflection describes itself too.
        [response] = self.ask([{"file_containing_symbol":
                                "grpc.reflection.v1.ServerReflection"}])
        self.assertEqual([f.package for f in self.files(response)], ["grpc.reflection.v1"])

    def test_unknown_names_are_not_found_and_no_request_is_unimplemented(self):
        cases = [({"file_containing_symbol": "textgen.v1.Nope"}, NOT_FOUND, "Symbol not found."),
                 ({"file_by_filename": "nope.proto"}, NOT_FOUND, "File not found."),
                 ({"file_containing_extension": {"containing_type": "textgen.v1.Nope",
                                                 "extension_number": 1}},
                  NOT_FOUND, "Type not found."),
                 ({"file_containing_extension": {"containing_type": "textgen.v1.Token",
                                                 "extension_number": 100}},
                  NOT_FOUND, "Extension not found."),
                 ({"all_extension_numbers_of_type": "textgen.v1.Nope"}, NOT_FOUND,
                  "Type not found."),
                 ({"host": "only a host"}, UNIMPLEMENTED, "")]
        for request, code, message in cases:
            with self.subTest(request=request):
                [response] = self.ask([request])
                self.assertEqual(response.WhichOneof("message_response"), "error_response")
                self.assertEqual((response.error_response.error_code,
                                  response.error_response.error_message), (code, message))

    def test_extension_numbers_of_a_type_without_extensions(self):
        [response] = self.ask([{"all_extension_numbers_of_type": "textgen.v1.Token"}])
        answer = response.all_extension_numbers_response
        self.assertEqual((answer.base_type_name, list(answer.extension_number)),
                         ("textgen.v1.Token", []))

    def test_one_stream_answers_each_request_in_order(self):
        responses = self.ask([{"list_services": ""},
                              {"file_containing_symbol": "textgen.v1.TextGeneration"},
                              {"file_containing_symbol": "textgen.v1.Nope"},
                              {"file_containing_symbol": "grpc.reflection.v1.ServerReflection"}])
        self.assertEqual([r.WhichOneof("message_response") for r in responses],
                         ["list_services_response", "file_descriptor_response",
                          "error_response", "file_descriptor_response"])
        # Each answer holds only its own file, not the ones before it on the stream.
        self.assertEqual([f.name for f in self.files(responses[1])],
                         ["textgen/v1/textgen.proto"])
        self.assertEqual([f.package for f in self.files(responses[3])], ["grpc.reflection.v1"])

    def test_v1_answers_as_v1alpha_does(self):
        for request in ({"list_services": "*"},
                        {"file_containing_symbol": "textgen.v1.TextGeneration"},
                        {"file_by_filename": "textgen/v1/textgen.proto"},
                        # gRPC's built-in health service has no descriptor to give: both
                        # answer NOT_FOUND.
                        {"file_containing_symbol": "grpc.health.v1.Health"},
                        {"file_containing_symbol": "textgen.v1.Nope"},
                        {"all_extension_numbers_of_type": "textgen.v1.Token"},
                        {"host": "h"}):
            with self.subTest(request=request):
                [new] = self.ask([request], v1)
                [old] = self.ask([request], v1alpha)
                self.assertEqual(new.SerializeToString(deterministic=True),
                                 old.SerializeToString(deterministic=True))


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
