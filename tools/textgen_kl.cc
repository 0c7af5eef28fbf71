// textgen_kl: how far a (quantized) model's next-token distributions are from
// a base model's on held-out text, by llama.cpp's `llama-perplexity
// --kl-divergence` method and in its words (model/kl_divergence.h), so that
// "textgen's KL from the F32 model" and llama.cpp's on the same file sit in
// one table.
//
//   # The base: the F32 model's log-probabilities, saved in llama.cpp's file
//   # format (llama-perplexity --kl-divergence-base FILE reads it as its own).
//   build/tools/textgen_kl --base_model=model-f32.gguf --text=heldout.txt
//       --tokenizer=encoder.json --ctx=512 --chunks=8 --save_base=base.kld
//   # A test model against it (textgen), then the same for llama.cpp:
//   build/tools/textgen_kl --base_logits=base.kld
//   --test_model=model-q4_k_m.gguf llama-perplexity -m model-q4_k_m.gguf
//   --kl-divergence-base base.kld
//       --kl-divergence -c 512 -b 512
//
// The tokens: --text read with --tokenizer (any LoadTokenizer path), or
// --tokens (ids separated by spaces, commas or newlines), cut into
// min(--chunks, all) chunks of --ctx tokens. A base file carries its tokens,
// so with --base_logits the text is the one its maker read: llama.cpp reads
// token ids from it and needs no vocabulary of its own (random-weight GGUFs
// have none). --base_model and --test_model together compare in one run
// without a file. Models are anything LoadModel opens; FILE:TYPE holds its
// weight matrices as TYPE (--weights_dtype's names), as in textgen_model_bench.
//
// Output: per chunk a progress line on stderr; at the end, on stdout, the base
// pass's "Final estimate: PPL = ..." and, with a test model, llama-perplexity's
// three statistics sections, the same lines with the same formats.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/formats/load_flags.h"
#include "model/formats/model_loader.h"
#include "model/kl_base_file.h"
#include "model/kl_divergence.h"
#include "model/perplexity_chunks.h"
#include "model/text/tokenizer_factory.h"
#include "model/weights.h"

ABSL_FLAG(std::string, base_model, "",
          "The reference model (e.g. the F32 file), FILE[:TYPE]");
ABSL_FLAG(std::string, test_model, "",
          "The model measured against the base (e.g. a Q4_K_M file), "
          "FILE[:TYPE]");
ABSL_FLAG(std::string, base_logits, "",
          "Read the base (tokens and log-probabilities) from this file, "
          "written by --save_base or llama-perplexity --kl-divergence-base");
ABSL_FLAG(std::string, save_base, "",
          "Write the base model's log-probabilities here, in llama.cpp's "
          "format");
ABSL_FLAG(std::string, text, "", "Held-out text, read with --tokenizer");
ABSL_FLAG(std::string, tokenizer, "",
          "Tokenizer for --text (a file or directory LoadTokenizer reads)");
ABSL_FLAG(std::string, tokens, "",
          "Token ids instead of --text, separated by spaces, commas or lines");
ABSL_FLAG(int, ctx, 512, "Tokens per chunk (llama-perplexity -c)");
ABSL_FLAG(int, chunks, 0, "At most this many chunks; 0 = as many as fit");
ABSL_FLAG(int, bos, -1,
          "Replace each chunk's first token by this id as it is read, as "
          "llama.cpp does when its vocabulary adds a BOS; -1 = no");
ABSL_FLAG(int, threads, 1, "Threads of the forward passes");
ABSL_FLAG(int, rows_per_pass, 64,
          "Scored positions per forward pass (memory: rows × vocab floats)");

namespace textgen {
namespace {

struct ModelSpec {
  std::string path;
  LoadOptions options;
};

// FILE or FILE:TYPE, TYPE one of --weights_dtype's names.
absl::StatusOr<ModelSpec> ParseModelSpec(const std::string& spec,
                                         const LoadOptions& fallback) {
  ModelSpec m{spec, fallback};
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos) {
    absl::StatusOr<kernels::WeightType> type =
        ParseWeightType(spec.substr(colon + 1));
    if (type.ok()) {
      m.path = spec.substr(0, colon);
      m.options.weight_type = *type;
    }
  }
  return m;
}

absl::StatusOr<std::unique_ptr<Decoder>> Load(const std::string& spec,
                                              const LoadFlags& flags) {
  TEXTGEN_ASSIGN_OR_RETURN(ModelSpec m,
                           ParseModelSpec(spec, flags.load_options()));
  MemoryBudget budget;
  budget.kv_dtype = flags.kv_dtype;
  TEXTGEN_ASSIGN_OR_RETURN(LoadedModel model,
                           LoadModel(m.path, "", m.options, budget));
  DecoderOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  auto decoder =
      std::make_unique<Decoder>(std::move(model.checkpoint), options);
  std::fprintf(stderr, "textgen_kl: %s: %s, weights %s, %.1f MiB\n",
               m.path.c_str(), DescribeConfig(decoder->config()).c_str(),
               kernels::WeightTypeName(m.options.weight_type),
               decoder->weights().MemoryBytes() / 1048576.0);
  return decoder;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The held-out token ids from --tokens or --text + --tokenizer.
absl::StatusOr<std::vector<int>> InputTokens(int vocab) {
  const std::string tokens_path = absl::GetFlag(FLAGS_tokens);
  const std::string text_path = absl::GetFlag(FLAGS_text);
  if (tokens_path.empty() == text_path.empty()) {
    return absl::InvalidArgumentError(
        "give the text as --text (with --tokenizer) or --tokens, one of them");
  }
  if (!tokens_path.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::string raw, ReadFile(tokens_path));
    std::vector<int> ids;
    for (absl::string_view piece :
         absl::StrSplit(raw, absl::ByAnyChar(" ,\t\r\n"), absl::SkipEmpty())) {
      int id;
      if (!absl::SimpleAtoi(piece, &id) || id < 0 || id >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat(
            tokens_path, ": '", piece, "' is not a token id below ", vocab));
      }
      ids.push_back(id);
    }
    return ids;
  }
  if (absl::GetFlag(FLAGS_tokenizer).empty()) {
    return absl::InvalidArgumentError("--text needs --tokenizer");
  }
  TEXTGEN_ASSIGN_OR_RETURN(
      std::unique_ptr<Tokenizer> tokenizer,
      LoadTokenizer(absl::GetFlag(FLAGS_tokenizer), vocab));
  TEXTGEN_ASSIGN_OR_RETURN(const std::string text, ReadFile(text_path));
  return tokenizer->Encode(text);
}

// The entropy (nats) and largest probability of softmax(logits), in double:
// how peaked the base's distributions are (a near-uniform base would make any
// KL figure small and meaningless).
std::pair<double, double> EntropyAndTop(absl::Span<const float> logits) {
  double max = logits[0];
  for (float l : logits) max = std::max<double>(max, l);
  double sum = 0, weighted = 0;
  for (float l : logits) {
    const double e = std::exp(l - max);
    sum += e;
    weighted += e * (l - max);
  }
  return {std::log(sum) - weighted / sum, 1 / sum};
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

absl::Status Run() {
  TEXTGEN_ASSIGN_OR_RETURN(const LoadFlags flags, ParseLoadFlags());
  const std::string base_logits = absl::GetFlag(FLAGS_base_logits);
  const std::string save_base = absl::GetFlag(FLAGS_save_base);
  const std::string base_spec = absl::GetFlag(FLAGS_base_model);
  const std::string test_spec = absl::GetFlag(FLAGS_test_model);
  if (base_logits.empty() == base_spec.empty()) {
    return absl::InvalidArgumentError(
        "the base is --base_model or --base_logits, one of them");
  }
  if (!save_base.empty() && base_spec.empty()) {
    return absl::InvalidArgumentError("--save_base needs --base_model");
  }
  if (test_spec.empty() && save_base.empty()) {
    return absl::InvalidArgumentError(
        "nothing to do: give --test_model, --save_base or both");
  }
  const int rows_per_pass = absl::GetFlag(FLAGS_rows_per_pass);
  const int bos = absl::GetFlag(FLAGS_bos);

  // The base: a file, or a model to run.
  std::unique_ptr<Decoder> base;
  std::optional<KlBaseReader> reader;
  std::vector<int> tokens;
  int n_ctx, vocab, n_chunks;
  if (!base_logits.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(reader, KlBaseReader::Open(base_logits));
    n_ctx = reader->n_ctx();
    vocab = reader->n_vocab();
    n_chunks = reader->n_chunks();
    if (absl::GetFlag(FLAGS_chunks) > 0) {
      n_chunks = std::min(n_chunks, absl::GetFlag(FLAGS_chunks));
    }
    tokens = reader->tokens();
    std::fprintf(stderr, "textgen_kl: %s: %d chunks of %d tokens, vocab %d\n",
                 base_logits.c_str(), reader->n_chunks(), n_ctx, vocab);
  } else {
    TEXTGEN_ASSIGN_OR_RETURN(base, Load(base_spec, flags));
    vocab = base->config().vocab_size;
    n_ctx = absl::GetFlag(FLAGS_ctx);
    if (n_ctx < 4 || n_ctx > base->config().context_length) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ctx=", n_ctx, ": must be in [4, ",
                       base->config().context_length, "]"));
    }
    TEXTGEN_ASSIGN_OR_RETURN(tokens, InputTokens(vocab));
    n_chunks = static_cast<int>(tokens.size() / n_ctx);
    if (absl::GetFlag(FLAGS_chunks) > 0) {
      n_chunks = std::min(n_chunks, absl::GetFlag(FLAGS_chunks));
    }
    if (n_chunks < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("the text is ", tokens.size(),
                       " tokens, less than one chunk of ", n_ctx));
    }
    tokens.resize(static_cast<size_t>(n_chunks) * n_ctx);
    std::fprintf(stderr, "textgen_kl: %d chunks of %d tokens\n", n_chunks,
                 n_ctx);
  }
  std::optional<KlBaseWriter> writer;
  if (!save_base.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(
        writer, KlBaseWriter::Create(save_base, n_ctx, vocab, tokens));
  }
  std::unique_ptr<Decoder> test;
  if (!test_spec.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(test, Load(test_spec, flags));
    if (test->config().vocab_size != vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat(test_spec, ": vocabulary ", test->config().vocab_size,
                       ", the base's is ", vocab));
    }
    if (n_ctx > test->config().context_length) {
      return absl::InvalidArgumentError(
          absl::StrCat(test_spec, ": context ", test->config().context_length,
                       " is shorter than the chunks (", n_ctx, ")"));
    }
  }

  const size_t row_words = LogProbRowWords(vocab);
  const int scored = ScoredPerChunk(n_ctx);
  std::vector<uint16_t> rows(row_words * scored);
  std::optional<KvCache> base_cache, test_cache;
  if (base)
    base_cache.emplace(base->config(),
                       ChunkCacheOptions(n_ctx, flags.kv_dtype));
  if (test)
    test_cache.emplace(test->config(),
                       ChunkCacheOptions(n_ctx, flags.kv_dtype));
  KlDivergence kld(vocab);
  double base_nll = 0, base_nll2 = 0, base_entropy = 0, base_top = 0;
  int64_t base_count = 0;
  for (int c = 0; c < n_chunks; ++c) {
    const auto start = std::chrono::steady_clock::now();
    const absl::Span<const int> chunk = absl::MakeConstSpan(tokens).subspan(
        static_cast<size_t>(c) * n_ctx, n_ctx);
    if (reader) {
      TEXTGEN_RETURN_IF_ERROR(reader->ReadChunk(rows));
    } else {
      TEXTGEN_RETURN_IF_ERROR(ForEachScoredLogits(
          *base, *base_cache, chunk, bos, rows_per_pass,
          [&](int i, absl::Span<const float> logits) {
            const double nll = EncodeLogProbs(
                logits, chunk[n_ctx / 2 + i + 1],
                absl::MakeSpan(rows).subspan(i * row_words, row_words));
            const auto [entropy, top] = EntropyAndTop(logits);
            base_entropy += entropy;
            base_top += top;
            base_nll += nll;
            base_nll2 += nll * nll;
            ++base_count;
            return absl::OkStatus();
          }));
      if (writer) TEXTGEN_RETURN_IF_ERROR(writer->AppendChunk(rows));
    }
    std::string line = absl::StrCat("chunk ", c + 1, "/", n_chunks);
    if (base) {
      absl::StrAppend(&line, ": base PPL ",
                      absl::StrFormat("%.4f", std::exp(base_nll / base_count)));
    }
    if (test) {
      TEXTGEN_RETURN_IF_ERROR(ForEachScoredLogits(
          *test, *test_cache, chunk, bos, rows_per_pass,
          [&](int i, absl::Span<const float> logits) {
            kld.Add(logits,
                    absl::MakeConstSpan(rows).subspan(i * row_words, row_words),
                    chunk[n_ctx / 2 + i + 1]);
            return absl::OkStatus();
          }));
      const Estimate mean = kld.MeanKld(), top = kld.SameTop();
      absl::StrAppend(
          &line, absl::StrFormat(": KLD %.5f ± %.5f, same top %.3f ± %.3f %%",
                                 mean.value, mean.uncertainty, 100 * top.value,
                                 100 * top.uncertainty));
    }
    std::fprintf(stderr, "%s (%.1f s)\n", line.c_str(), Seconds(start));
  }
  if (writer) TEXTGEN_RETURN_IF_ERROR(writer->Close());
  if (base) {
    // llama-perplexity's closing line of a base pass.
    const double mean = base_nll / base_count;
    double var = base_nll2 / base_count - mean * mean;
    var = var > 0 ? std::sqrt(var / (base_count - 1)) : 0;
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", std::exp(mean),
                std::exp(mean) * var);
    std::printf(
        "Base distributions: mean entropy %.3f nats, mean top-1 probability "
        "%.3f\n",
        base_entropy / base_count, base_top / base_count);
  }
  if (test) {
    std::printf("\n%s", FormatKlSummary(kld.Summarize()).c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "KL divergence of a model from a base model on held-out text, by "
      "llama-perplexity --kl-divergence's method.\n"
      "  textgen_kl --base_model=F32 --text=FILE --tokenizer=T --save_base=B\n"
      "  textgen_kl --base_logits=B --test_model=QUANTIZED");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = textgen::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "textgen_kl: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
