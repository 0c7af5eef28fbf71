#include "server/grpc/wire.h"

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

// What protobuf logged on this thread during the current ParseMessage; null
// outside of one, so that other messages go to spdlog.
thread_local std::string* parse_complaint = nullptr;

void LogToSpdlog(google::protobuf::LogLevel level, const char* filename,
                 int line, const std::string& message) {
  if (parse_complaint != nullptr) {
    if (parse_complaint->empty()) *parse_complaint = message;
    return;
  }
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      spdlog::debug("protobuf {}:{}: {}", filename, line, message);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      spdlog::warn("protobuf {}:{}: {}", filename, line, message);
      break;
    default:  // ERROR, and FATAL just before protobuf aborts.
      spdlog::error("protobuf {}:{}: {}", filename, line, message);
      break;
  }
}

}  // namespace

absl::Status ParseMessage(const grpc::ByteBuffer& bytes,
                          google::protobuf::MessageLite& message) {
  message.Clear();
  const std::string type = message.GetTypeName();
  if (!bytes.Valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the call carried no ", type, " message"));
  }
  grpc::ByteBuffer copy(bytes);  // The reader needs a mutable buffer; a copy
                                 // shares the slices.
  grpc::ProtoBufferReader reader(&copy);
  if (!reader.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request's bytes cannot be read: ",
                     reader.status().error_message()));
  }
  std::string complaint;
  parse_complaint = &complaint;
  const bool parsed = message.ParseFromZeroCopyStream(&reader);
  parse_complaint = nullptr;
  if (parsed) return absl::OkStatus();
  message.Clear();
  // Protobuf's UTF-8 complaint reads "String field 'F' contains invalid UTF-8
  // data when parsing a protocol buffer. Use the 'bytes' type ...".
  std::string why =
      "malformed protobuf (truncated, or a wire type that does "
      "not match the field)";
  if (!complaint.empty()) {
    absl::string_view first = complaint;
    const size_t end = first.find('.', first.find("UTF-8"));
    if (end != absl::string_view::npos) first = first.substr(0, end);
    why = std::string(absl::StripAsciiWhitespace(first));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", type, ": ", why));
}

absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer& bytes) {
  bytes.Clear();  // The writer appends to an empty buffer only.
  bool own_buffer = false;
  const grpc::Status status =
      grpc::GenericSerialize<grpc::ProtoBufferWriter,
                             google::protobuf::MessageLite>(message, &bytes,
                                                            &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize ",
                                          message.GetTypeName(), ": ",
                                          status.error_message()));
}

void RouteProtobufLogs() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&LogToSpdlog); });
}

}  // namespace textgen
