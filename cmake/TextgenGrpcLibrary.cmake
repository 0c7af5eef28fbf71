# textgen_grpc_cpp_library(TARGET PROTO_DIR PROTO OUT_DIR)
#
# Generates the C++ messages and gRPC stubs of PROTO (a file under PROTO_DIR, the import
# root) into OUT_DIR with Debian's protoc and grpc_cpp_plugin, and compiles them as the
# static library TARGET, whose users include "<path under PROTO_DIR>.grpc.pb.h".
# Used for textgen.v1 (proto/) and grpc.health.v1 (client/).
function(textgen_grpc_cpp_library target proto_dir proto out_dir)
  file(RELATIVE_PATH rel ${proto_dir} ${proto})
  string(REGEX REPLACE "\\.proto$" "" stem ${rel})
  set(srcs ${out_dir}/${stem}.pb.cc ${out_dir}/${stem}.grpc.pb.cc)
  set(hdrs ${out_dir}/${stem}.pb.h ${out_dir}/${stem}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${srcs} ${hdrs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
    COMMAND protobuf::protoc
      --proto_path=${proto_dir}
      --cpp_out=${out_dir}
      --grpc_out=${out_dir}
      --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
      ${proto}
    DEPENDS ${proto}
    COMMENT "Generating C++ code for ${rel}"
    VERBATIM)
  add_library(${target} ${srcs})
  target_include_directories(${target} PUBLIC ${out_dir})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  # Generated code is not ours to warn about.
  target_compile_options(${target} PRIVATE -w)
endfunction()
