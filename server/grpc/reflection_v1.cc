#include "server/grpc/reflection_v1.h"

#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace textgen {
namespace {

namespace pb = ::grpc::reflection::v1;
using ::google::protobuf::Descriptor;
using ::google::protobuf::DescriptorPool;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::FileDescriptor;

// Answers each request of a ServerReflectionInfo stream with one response, in
// order, until the client half-closes.
class ReflectionV1Service final : public pb::ServerReflection::Service {
 public:
  // The server's service names; the server owns the list and fills it before
  // it starts (see ReflectionV1Plugin::Finish).
  void set_service_names(const std::vector<std::string>* names) {
    service_names_ = names;
  }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<pb::ServerReflectionResponse,
                               pb::ServerReflectionRequest>* stream) override {
    pb::ServerReflectionRequest request;
    while (stream->Read(&request)) {
      pb::ServerReflectionResponse response = Answer(request);
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  pb::ServerReflectionResponse Answer(
      const pb::ServerReflectionRequest& request) const {
    pb::ServerReflectionResponse response;
    grpc::Status status;
    switch (request.message_request_case()) {
      case pb::ServerReflectionRequest::kListServices:
        status = ListServices(*response.mutable_list_services_response());
        break;
      case pb::ServerReflectionRequest::kFileByFilename:
        status = AddFile(pool_->FindFileByName(request.file_by_filename()),
                         "File not found.", response);
        break;
      case pb::ServerReflectionRequest::kFileContainingSymbol:
        status = AddFile(
            pool_->FindFileContainingSymbol(request.file_containing_symbol()),
            "Symbol not found.", response);
        break;
      case pb::ServerReflectionRequest::kFileContainingExtension:
        status = FileContainingExtension(request.file_containing_extension(),
                                         response);
        break;
      case pb::ServerReflectionRequest::kAllExtensionNumbersOfType:
        status = AllExtensionNumbers(
            request.all_extension_numbers_of_type(),
            *response.mutable_all_extension_numbers_response());
        break;
      default:
        status = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
    }
    if (!status.ok()) {
      // Setting the error replaces whatever part of an answer was filled in.
      pb::ErrorResponse* error = response.mutable_error_response();
      error->set_error_code(status.error_code());
      error->set_error_message(status.error_message());
    }
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    return response;
  }

  grpc::Status ListServices(pb::ListServiceResponse& out) const {
    if (service_names_ == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "Services not found.");
    }
    for (const std::string& name : *service_names_) {
      out.add_service()->set_name(name);
    }
    return grpc::Status::OK;
  }

  grpc::Status FileContainingExtension(
      const pb::ExtensionRequest& request,
      pb::ServerReflectionResponse& out) const {
    const Descriptor* type =
        pool_->FindMessageTypeByName(request.containing_type());
    if (type == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "Type not found.");
    }
    const FieldDescriptor* extension =
        pool_->FindExtensionByNumber(type, request.extension_number());
    if (extension == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "Extension not found.");
    }
    return AddFile(extension->file(), "", out);
  }

  grpc::Status AllExtensionNumbers(const std::string& type_name,
                                   pb::ExtensionNumberResponse& out) const {
    const Descriptor* type = pool_->FindMessageTypeByName(type_name);
    if (type == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "Type not found.");
    }
    std::vector<const FieldDescriptor*> extensions;
    pool_->FindAllExtensions(type, &extensions);
    for (const FieldDescriptor* extension : extensions) {
      out.add_extension_number(extension->number());
    }
    out.set_base_type_name(type_name);
    return grpc::Status::OK;
  }

  // `file` (NOT_FOUND with `not_found` if null) and every file it imports,
  // directly or not, each once, the file itself first.
  static grpc::Status AddFile(const FileDescriptor* file,
                              const std::string& not_found,
                              pb::ServerReflectionResponse& out) {
    if (file == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, not_found);
    }
    std::set<std::string> seen;
    AddFileAndImports(*file, seen, *out.mutable_file_descriptor_response());
    return grpc::Status::OK;
  }

  static void AddFileAndImports(const FileDescriptor& file,
                                std::set<std::string>& seen,
                                pb::FileDescriptorResponse& out) {
    if (!seen.insert(file.name()).second) return;
    google::protobuf::FileDescriptorProto proto;
    file.CopyTo(&proto);
    proto.SerializeToString(out.add_file_descriptor_proto());
    for (int i = 0; i < file.dependency_count(); ++i) {
      AddFileAndImports(*file.dependency(i), seen, out);
    }
  }

  const DescriptorPool* pool_ = DescriptorPool::generated_pool();
  const std::vector<std::string>* service_names_ = nullptr;
};

// Registers the service on the server being built and, once every service is
// registered, hands it the server's list of names: the same two hooks gRPC's
// v1alpha plugin uses, but for one builder rather than every server in the
// process.
class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "textgen_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override {
    si->RegisterService(service_);
  }
  void Finish(grpc::ServerInitializer* si) override {
    service_->set_service_names(si->GetServiceList());
  }
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}
  bool has_sync_methods() const override { return true; }
  bool has_async_methods() const override { return false; }

 private:
  std::shared_ptr<ReflectionV1Service> service_ =
      std::make_shared<ReflectionV1Service>();
};

class ReflectionV1Option final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

void AddReflectionV1(grpc::ServerBuilder& builder) {
  builder.SetOption(std::make_unique<ReflectionV1Option>());
}

}  // namespace textgen
