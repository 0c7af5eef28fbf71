// textgen_generate: runs any supported checkpoint locally — a prompt in,
// generated text streamed out as it is decoded (one KV-cached step per token,
// each token's text written and flushed as soon as it is whole UTF-8).
//
//   build/tools/textgen_generate --prompt "Once upon a time"
//       --model ../shared/models/stories260K/stories260K.bin
//       --tokenizer ../shared/models/stories260K/tok512.bin
//   build/tools/textgen_generate --model models/shakespeare-char --prompt
//   "ROMEO:"
//
// --model is a checkpoint directory (config.json + model.safetensors + a
// tokenizer file) or a llama2.c .bin (tokenizer from --tokenizer, or found
// beside it); see model/formats/model_loader.h. A checkpoint without a
// tokenizer can still run on --prompt_ids, printing ids. The prompt is echoed,
// then the continuation; statistics go to stderr. The loop itself is
// model/generate.h.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/decoder.h"
#include "model/formats/load_flags.h"
#include "model/formats/model_loader.h"
#include "model/generate.h"
#include "model/kernels/dispatch.h"
#include "model/sampler.h"
#include "model/text/tokenizer.h"

ABSL_FLAG(std::string, prompt, "",
          "Text to continue. Empty: start from the model's BOS (or GPT-2's "
          "<|endoftext|>).");
ABSL_FLAG(std::string, prompt_ids, "",
          "Comma-separated prompt token ids, instead of --prompt (output is "
          "then ids too when there is no tokenizer).");
ABSL_FLAG(std::string, source, "",
          "Encoder-decoder models: the text to transform (e.g. a date to "
          "normalise); --prompt then forces the answer's start.");
ABSL_FLAG(int, max_new_tokens, 256,
          "Tokens to generate (stops early at end of sequence or when the "
          "context is full).");
ABSL_FLAG(float, temperature, 0.0f,
          "0 picks the most likely token (greedy, reproducible); > 0 samples.");
ABSL_FLAG(int, top_k, 0, "Sample among the k most likely tokens; 0 = all.");
ABSL_FLAG(float, top_p, 1.0f, "Nucleus sampling mass, in (0, 1].");
ABSL_FLAG(float, repetition_penalty, 1.0f,
          "> 1 discourages tokens already in the sequence.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the sampler; same seed, same text.");
ABSL_FLAG(int, threads, 1,
          "Threads of the forward pass (the results do not depend on it).");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "textgen_generate: %s\n", message.c_str());
  return 1;
}

void Write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Generates text from a checkpoint, streamed to stdout as it is decoded.\n"
      "  textgen_generate --model DIR_OR_BIN [--tokenizer FILE] --prompt TEXT\n"
      "  textgen_generate --model ENCODER_DECODER_DIR --source TEXT");
  absl::ParseCommandLine(argc, argv);

  textgen::SamplingParams sampling;
  sampling.temperature = absl::GetFlag(FLAGS_temperature);
  sampling.top_k = absl::GetFlag(FLAGS_top_k);
  sampling.top_p = absl::GetFlag(FLAGS_top_p);
  sampling.repetition_penalty = absl::GetFlag(FLAGS_repetition_penalty);
  if (absl::Status s = textgen::ValidateSamplingParams(sampling); !s.ok()) {
    return Fail(std::string(s.message()));
  }

  if (absl::GetFlag(FLAGS_threads) < 1) {
    return Fail(absl::StrCat("--threads=", absl::GetFlag(FLAGS_threads),
                             ": must be at least 1"));
  }
  const absl::StatusOr<textgen::LoadFlags> flags = textgen::ParseLoadFlags();
  if (!flags.ok()) return Fail(std::string(flags.status().message()));
  // One sequence: one full-context KV-cache slot beside the weights.
  textgen::MemoryBudget budget;
  budget.kv_dtype = flags->kv_dtype;
  const auto load_start = std::chrono::steady_clock::now();
  auto loaded =
      textgen::LoadModel(textgen::ModelFlag(), textgen::TokenizerFlag(),
                         flags->load_options(), budget);
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  std::unique_ptr<textgen::Tokenizer> tokenizer = std::move(loaded->tokenizer);
  textgen::DecoderOptions decoder_options;
  decoder_options.threads = absl::GetFlag(FLAGS_threads);
  textgen::Decoder decoder(std::move(loaded->checkpoint), decoder_options);
  std::fprintf(
      stderr,
      "model: %s; weights %s, %.1f MiB, loaded in %.2f s; KV cache %s; %d "
      "thread(s); %s kernels\n",
      textgen::DescribeConfig(decoder.config()).c_str(),
      textgen::kernels::WeightTypeName(flags->weight_type),
      decoder.weights().MemoryBytes() / 1048576.0,
      std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                    load_start)
          .count(),
      textgen::KvDtypeName(flags->kv_dtype), decoder.threads(),
      textgen::kernels::KernelFamilyName(flags->cpu_kernels));
  if (tokenizer) {
    std::fprintf(stderr, "tokenizer: %s (%s)\n", tokenizer->Describe().c_str(),
                 loaded->tokenizer_path.c_str());
  }

  // The prompt as ids.
  std::vector<int> prompt;
  if (!absl::GetFlag(FLAGS_prompt_ids).empty()) {
    if (!absl::GetFlag(FLAGS_prompt).empty()) {
      return Fail("give --prompt or --prompt_ids, not both");
    }
    for (absl::string_view piece :
         absl::StrSplit(absl::GetFlag(FLAGS_prompt_ids), ',')) {
      int id;
      if (!absl::SimpleAtoi(piece, &id)) {
        return Fail(
            absl::StrCat("--prompt_ids: '", piece, "' is not an integer"));
      }
      prompt.push_back(id);
    }
  } else if (!tokenizer) {
    return Fail(
        absl::StrCat("no tokenizer found for ", textgen::ModelFlag(),
                     "; pass --tokenizer, or token ids with --prompt_ids"));
  } else {
    if (tokenizer->bos_id() >= 0) prompt.push_back(tokenizer->bos_id());
    auto ids = tokenizer->Encode(absl::GetFlag(FLAGS_prompt));
    if (!ids.ok())
      return Fail(absl::StrCat("--prompt: ", ids.status().message()));
    prompt.insert(prompt.end(), ids->begin(), ids->end());
    if (prompt.empty() && tokenizer->eos_id() >= 0) {
      // GPT-2 starts unconditional samples from <|endoftext|>.
      prompt.push_back(tokenizer->eos_id());
    }
    if (prompt.empty()) {
      return Fail("--prompt is empty and this tokenizer has no start token");
    }
  }
  const int vocab = decoder.config().vocab_size;
  for (int id : prompt) {
    if (id < 0 || id >= vocab) {
      return Fail(absl::StrCat("prompt token id ", id,
                               " is outside the model's vocabulary 0..",
                               vocab - 1));
    }
  }
  // Echo the prompt, then stream the continuation.
  if (tokenizer) {
    auto text = tokenizer->Decode(prompt);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    Write(*text);
  } else {
    for (size_t i = 0; i < prompt.size(); ++i) {
      Write(absl::StrCat(i ? "," : "", prompt[i]));
    }
    Write(" |");
  }
  std::unique_ptr<textgen::DecodeStream> stream;
  if (tokenizer) {
    stream = std::make_unique<textgen::DecodeStream>(*tokenizer, prompt.back());
  }

  textgen::GenerateOptions options;
  if (!absl::GetFlag(FLAGS_source).empty()) {
    if (!tokenizer) return Fail("--source needs a tokenizer");
    auto ids = tokenizer->Encode(absl::GetFlag(FLAGS_source));
    if (!ids.ok()) {
      return Fail(absl::StrCat("--source: ", ids.status().message()));
    }
    options.source = *std::move(ids);
  }
  options.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  options.sampling = sampling;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.kv_dtype = flags->kv_dtype;
  if (tokenizer) {
    // Any of the tokenizer's end ids (llama2.c models also mark the start of
    // the next story with BOS: EndsSequence says so for them).
    options.is_end_token = [&](int id) { return tokenizer->EndsSequence(id); };
  }
  int generated = 0;
  double prefill_seconds = 0;
  absl::Status failed;
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<textgen::GenerateEnd> end = textgen::Generate(
      decoder, prompt, options, [&](const textgen::GeneratedToken& token) {
        if (generated++ == 0) {
          prefill_seconds = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
        }
        if (token.is_end_token || !failed.ok()) return;
        if (stream && token.id < tokenizer->vocab_size()) {
          absl::StatusOr<std::string> text = stream->Next(token.id);
          if (!text.ok()) {
            failed = text.status();
            return;
          }
          Write(*text);
        } else {
          // No tokenizer, or an id past its vocabulary (a padded embedding
          // table): show the id.
          Write(absl::StrCat(" ", token.id));
        }
      });
  if (!end.ok()) return Fail(std::string(end.status().message()));
  if (!failed.ok()) return Fail(std::string(failed.message()));
  const char* stop = *end == textgen::GenerateEnd::kEndToken ? "end of sequence"
                     : *end == textgen::GenerateEnd::kContextFull
                         ? "context full"
                         : "length";
  if (stream) Write(stream->Flush());
  Write("\n");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::fprintf(
      stderr,
      "%d tokens in %.3f s (%.1f tokens/s after a %.3f s prefill of "
      "%zu prompt tokens); stopped: %s\n",
      generated, seconds,
      generated > 1 ? (generated - 1) / (seconds - prefill_seconds) : 0.0,
      prefill_seconds, prompt.size(), stop);
  return 0;
}
