// gRPC server reflection, version 1 (grpc.reflection.v1.ServerReflection),
// served next to the v1alpha service of Debian's grpc++_reflection.
//
// gRPC 1.51 only ships v1alpha, but grpcurl and newer tools ask for v1 first
// (and some never fall back). v1 is the same protocol under a new package
// name: the same messages with the same field numbers. This service answers it
// from the same source as v1alpha, the descriptors compiled into the binary
// (DescriptorPool::generated_pool()), with the same rules: list_services names
// every service registered on the server; a file request returns the file and
// its transitive dependencies; a name that is not known is an error_response
// NOT_FOUND on the stream, not a failed call. Unlike 1.51's v1alpha, each
// response holds only what its own request asked for (v1alpha reuses one
// response message for a whole stream, so files pile up).
//
//   grpc::ServerBuilder builder;
//   grpc::reflection::InitProtoReflectionServerBuilderPlugin();  // v1alpha
//   textgen::AddReflectionV1(builder);                           // v1
//   ... register services ...; builder.BuildAndStart();
//
// The proto is Debian's (package grpc-proto,
// /usr/share/grpc-proto/grpc/reflection/v1/reflection.proto), compiled by
// server/CMakeLists.txt.
#ifndef TEXTGEN_SERVER_GRPC_REFLECTION_V1_H_
#define TEXTGEN_SERVER_GRPC_REFLECTION_V1_H_

#include <grpcpp/grpcpp.h>

namespace textgen {

// Adds the v1 reflection service to the server `builder` is about to build.
// It lists the services registered on that server, itself included. Call
// before BuildAndStart.
void AddReflectionV1(grpc::ServerBuilder& builder);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_GRPC_REFLECTION_V1_H_
