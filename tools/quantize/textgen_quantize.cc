// textgen_quantize: a GGUF model (F32, F16 or BF16 tensors) quantized to one
// of llama-quantize's file types, byte for byte the file llama.cpp's
// llama-quantize writes from the same input (tools/quantize/gguf_quantize.h).
//
//   build/tools/textgen_quantize model-f32.gguf model-Q4_K_M.gguf Q4_K_M
//
// A Hugging Face checkpoint (safetensors, one file or shards) goes through
// tools/hf_to_gguf.py first:
//   python3 tools/hf_to_gguf.py DIR model-f32.gguf --type f32 [tokenizer]
//   build/tools/textgen_quantize model-f32.gguf model-Q4_K_M.gguf Q4_K_M
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "tools/quantize/gguf_quantize.h"
#include "tools/quantize/llama_ftype.h"

ABSL_FLAG(bool, pure, false,
          "Give every quantizable tensor TYPE's own type, without "
          "llama-quantize's mix (as its --pure).");
ABSL_FLAG(int, threads, 0,
          "Threads quantizing each tensor; 0: one per CPU (the output does "
          "not depend on it).");
ABSL_FLAG(bool, quiet, false, "No line per tensor on stderr.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(absl::StrCat(
      "textgen_quantize [--pure] [--threads=N] INPUT.gguf OUTPUT.gguf TYPE\n"
      "TYPE: ",
      textgen::quantize::FileTypeNames(),
      "\n(Q3_K, Q4_K, Q5_K are llama-quantize's aliases of the _M mixes)"));
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 4) {
    std::fprintf(stderr, "%s\n",
                 std::string(absl::ProgramUsageMessage()).c_str());
    return 2;
  }
  const textgen::quantize::FileType* type =
      textgen::quantize::FindFileType(args[3]);
  if (type == nullptr) {
    std::fprintf(stderr, "unknown TYPE '%s'; one of %s\n", args[3],
                 textgen::quantize::FileTypeNames().c_str());
    return 2;
  }
  textgen::quantize::QuantizeOptions options;
  options.pure = absl::GetFlag(FLAGS_pure);
  options.threads = absl::GetFlag(FLAGS_threads);
  if (!absl::GetFlag(FLAGS_quiet)) {
    options.log = [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    };
  }
  const absl::Status status =
      textgen::quantize::QuantizeGguf(args[1], args[2], *type, options);
  if (!status.ok()) {
    std::fprintf(stderr, "textgen_quantize: %s\n",
                 std::string(status.message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s (%s)\n", args[2], type->name);
  return 0;
}
