// textgen_generate: loads a checkpoint and greedily continues a prompt of token
// ids, printing each new id as soon as it is decoded (one KV-cached step per
// token).
//
//   build/model/textgen_generate --model tests/golden/gpt2_learned --prompt_ids
//   1,2,3
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/kv_cache.h"

ABSL_FLAG(std::string, model, "",
          "Checkpoint directory (config.json + model.safetensors).");
ABSL_FLAG(std::string, prompt_ids, "0", "Comma-separated prompt token ids.");
ABSL_FLAG(int, max_new_tokens, 32,
          "Tokens to generate (stops early when the context is full).");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "textgen_generate: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Greedy generation from a checkpoint, streamed as token ids.");
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_model);
  if (dir.empty()) return Fail("--model is required");

  std::vector<int> prompt;
  for (absl::string_view piece :
       absl::StrSplit(absl::GetFlag(FLAGS_prompt_ids), ',')) {
    int id;
    if (!absl::SimpleAtoi(piece, &id)) {
      return Fail("--prompt_ids: '" + std::string(piece) +
                  "' is not an integer");
    }
    prompt.push_back(id);
  }

  auto checkpoint = textgen::LoadCheckpoint(dir);
  if (!checkpoint.ok()) return Fail(std::string(checkpoint.status().message()));
  textgen::Decoder decoder(*std::move(checkpoint));
  std::fprintf(stderr, "model: %s\n",
               textgen::DescribeConfig(decoder.config()).c_str());
  textgen::KvCache cache(decoder.config(), /*num_slots=*/1);

  const auto start = std::chrono::steady_clock::now();
  textgen::ForwardResult result;
  std::vector<int> chunk = prompt;
  int generated = 0;
  for (; generated < absl::GetFlag(FLAGS_max_new_tokens); ++generated) {
    if (cache.length(0) + static_cast<int>(chunk.size()) > cache.capacity())
      break;
    const textgen::SequenceChunk seq{0, chunk};
    if (absl::Status s = decoder.Forward({seq}, cache, {}, result); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    Eigen::Index next;
    result.logits.row(0).maxCoeff(&next);
    std::printf("%s%d", generated ? " " : "", static_cast<int>(next));
    std::fflush(stdout);
    chunk.assign(1, static_cast<int>(next));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("\n");
  std::fprintf(stderr,
               "%d tokens in %.3f s (%.1f tokens/s, prompt %zu tokens)\n",
               generated, seconds, generated / seconds, prompt.size());
  return 0;
}
