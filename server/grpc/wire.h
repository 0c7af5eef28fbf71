// Requests arrive, and replies leave, as bytes: every TextGeneration method is
// one of gRPC's raw callback methods (server/grpc/service.h), and these two
// functions are where its messages cross between bytes and protobuf.
//
// Why not gRPC's typed handlers: when a request does not parse (truncated or
// garbled bytes, or a string field holding invalid UTF-8, which proto3
// refuses), a typed callback handler answers UNIMPLEMENTED with no message,
// as if the method did not exist. Parsing here answers INVALID_ARGUMENT and
// says what was wrong.
#ifndef TEXTGEN_SERVER_GRPC_WIRE_H_
#define TEXTGEN_SERVER_GRPC_WIRE_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace textgen {

// Parses `bytes` into `message` (cleared first). INVALID_ARGUMENT naming the
// message type, and the field when protobuf says which (invalid UTF-8), if
// the bytes are not a valid `message`, or if there are none.
absl::Status ParseMessage(const grpc::ByteBuffer& bytes,
                          google::protobuf::MessageLite& message);

// Serializes `message` into `bytes` (what it held is dropped). INTERNAL only if
// protobuf cannot (a message over 2 GiB: every reply here is bounded far below
// that).
absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer& bytes);

// Sends protobuf's own log messages to spdlog instead of stderr, once per
// process; those written while ParseMessage runs (the UTF-8 complaint) go
// into its status instead, so a client cannot fill the server's log with
// them. Called by the service's constructor.
void RouteProtobufLogs();

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_WIRE_H_
