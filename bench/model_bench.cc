// Google Benchmark micro-benchmarks of the model core (model/decoder.h), one
// set per checkpoint given in --models:
//
//   decode/<model>/batch:B      one decode step of B sequences (B = 1, 8, 16,
//                               32),
//                               each with --decode_context tokens cached
//   prefill/<model>/tokens:T    one sequence's prompt of T tokens (128, 512,
//                               or --prefill_tokens), clipped to the context
//   full_context/<model>/cache:C  one decode step of one sequence whose cache
//                               holds context - 1 positions (1024-token cache
//                               for GPT-2 small, 256 for the shipped model):
//                               the attention-heavy end of generation
//
// Each reports tokens/s as items_per_second (decode: B tokens per step).
// --threads is the decoder's (DecoderOptions); an entry DIR:bf16, DIR:int8 or
// DIR:w8a32 holds the weight matrices so (LoadOptions) and names its
// benchmarks <model>-bf16, <model>-int8 or <model>-w8a32; a further :kvbf16
// holds its KV caches as bf16 (model/kv_cache.h; benchmarks <model>-kvbf16).
// --cpu_kernels picks the build of the kernels (model/kernels/dispatch.h), auto
// by default; the one in use is printed before the run and recorded in the
// benchmark context. A model is anything LoadModel opens
// (model/formats/model_loader.h): a checkpoint directory or a GGUF file, so the
// very file llama.cpp runs can be timed here (bench/peers/). Token ids are
// fixed pseudo-random ids, so no tokenizer is needed; the model itself may be
// random (bench/make_gpt2_small.py). Timings are never asserted anywhere:
// tests/bench only checks that this binary runs and names its benchmarks.
//
//   build/bench/textgen_model_bench --models=models/shakespeare-char,DIR:bf16
//       --threads=2 --benchmark_repetitions=5 --benchmark_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "bench/cpu_kernels.h"
#include "model/checkpoint.h"
#include "model/decoder.h"
#include "model/formats/load_flags.h"
#include "model/formats/memory_budget.h"
#include "model/formats/model_loader.h"
#include "model/kernels/dispatch.h"
#include "model/kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/weights.h"

ABSL_FLAG(std::string, models, "models/shakespeare-char",
          "Comma-separated checkpoint directories (config.json + "
          "model.safetensors), each optionally DIR:f32, DIR:bf16, DIR:int8 or "
          "DIR:w8a32 for how its weights are held in memory (default "
          "--weights_dtype)");
ABSL_FLAG(int, threads, 1, "Threads of the forward pass (DecoderOptions)");
ABSL_FLAG(int, decode_context, 128,
          "Positions already cached in each sequence of a decode step");
ABSL_FLAG(std::string, prefill_tokens, "128,512",
          "Prompt lengths of the prefill benchmarks, comma-separated (each "
          "clipped to the model's context)");

namespace textgen {
namespace {

// One --models entry: DIR, then optionally :f32, :bf16, :int8 or :w8a32 (the
// weights) and :kvf32 or :kvbf16 (the KV cache), e.g. DIR:int8:kvbf16.
struct ModelEntry {
  std::string dir;
  kernels::WeightType type = kernels::WeightType::kF32;
  KvDtype kv_dtype = KvDtype::kF32;
};

absl::StatusOr<ModelEntry> ParseEntry(const std::string& entry) {
  ModelEntry m;
  m.dir = entry;
  absl::StatusOr<kernels::WeightType> type =
      ParseWeightType(absl::GetFlag(FLAGS_weights_dtype));
  absl::StatusOr<KvDtype> kv_dtype =
      ParseKvDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  for (size_t colon = m.dir.rfind(':'); colon != std::string::npos;
       colon = m.dir.rfind(':')) {
    const std::string option = m.dir.substr(colon + 1);
    m.dir.resize(colon);
    if (absl::StartsWith(option, "kv")) {
      kv_dtype = ParseKvDtype(option.substr(2));
    } else {
      type = ParseWeightType(option);
    }
  }
  if (!type.ok()) return type.status();
  if (!kv_dtype.ok()) return kv_dtype.status();
  m.type = *type;
  m.kv_dtype = *kv_dtype;
  return m;
}

// How an entry's KV caches hold keys and values.
KvDtype KvDtypeOf(const std::string& entry) {
  return ParseEntry(entry)->kv_dtype;  // Checked by LoadDecoder.
}

// The benchmark's name for an entry: the directory's last component, with
// "-bf16", "-int8" or "-w8a32" appended for those weights unless the name
// already says so, and "-kvbf16" for a bf16 KV cache.
std::string ModelName(const std::string& entry) {
  ModelEntry m = *ParseEntry(entry);  // Checked by LoadDecoder first.
  std::string d = m.dir;
  while (!d.empty() && d.back() == '/') d.pop_back();
  const size_t slash = d.rfind('/');
  std::string name = slash == std::string::npos ? d : d.substr(slash + 1);
  if (m.type != kernels::WeightType::kF32) {
    const std::string suffix =
        absl::StrCat("-", kernels::WeightTypeName(m.type));
    if (!absl::EndsWith(name, suffix)) name += suffix;
  }
  if (m.kv_dtype != KvDtype::kF32) {
    absl::StrAppend(&name, "-kv", KvDtypeName(m.kv_dtype));
  }
  return name;
}

// Deterministic ids spread over the vocabulary (no tokenizer needed).
std::vector<int> TokenIds(int n, int vocab, int salt) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) {
    ids[i] = static_cast<int>((7919ull * (i + 1) + 104729ull * salt) % vocab);
  }
  return ids;
}

// The decoders, one per --models entry (the key), loaded before any benchmark
// runs.
std::map<std::string, std::unique_ptr<Decoder>>& Decoders() {
  static std::map<std::string, std::unique_ptr<Decoder>> decoders;
  return decoders;
}

absl::Status LoadDecoder(const std::string& entry, int threads) {
  TEXTGEN_ASSIGN_OR_RETURN(const ModelEntry m, ParseEntry(entry));
  LoadOptions load;
  load.weight_type = m.type;
  MemoryBudget budget;
  budget.kv_dtype = m.kv_dtype;
  // A tokenizer, if the file has one, is loaded and dropped: ids are fed.
  TEXTGEN_ASSIGN_OR_RETURN(LoadedModel model,
                           LoadModel(m.dir, "", load, budget));
  DecoderOptions options;
  options.threads = threads;
  Decoders()[entry] =
      std::make_unique<Decoder>(std::move(model.checkpoint), options);
  return absl::OkStatus();
}

// A KV cache of `slots` slots, each holding the same `length` positions:
// slot 0 is prefilled (in chunks of at most 512 tokens, to bound scratch
// memory) and its rows copied to the others. Built once per (model, slots,
// length) and kept, because Google Benchmark calls a benchmark function
// several times and refilling GPT-2 small's 32 × 128 positions each time
// would cost more than the measurement.
absl::StatusOr<KvCache*> FilledCache(const std::string& dir, int slots,
                                     int length) {
  static std::map<std::tuple<std::string, int, int>, std::unique_ptr<KvCache>>
      caches;
  std::unique_ptr<KvCache>& cache = caches[{dir, slots, length}];
  if (cache) return cache.get();
  Decoder& decoder = *Decoders().at(dir);
  auto filled =
      std::make_unique<KvCache>(decoder.config(), slots, KvDtypeOf(dir));
  const std::vector<int> ids = TokenIds(length, decoder.config().vocab_size, 1);
  ForwardResult result;
  for (int begin = 0; begin < length; begin += 512) {
    const int n = std::min(512, length - begin);
    const SequenceChunk chunk{
        0, absl::MakeConstSpan(ids).subspan(begin, static_cast<size_t>(n))};
    TEXTGEN_RETURN_IF_ERROR(decoder.Forward({chunk}, *filled, {}, result));
  }
  const int kv_width =
      decoder.config().n_kv_heads * decoder.config().head_dim();
  std::vector<float> key(kv_width), value(kv_width);
  for (int slot = 1; slot < slots; ++slot) {
    TEXTGEN_RETURN_IF_ERROR(filled->Reserve(slot, length));
    for (int layer = 0; layer < decoder.config().n_layers; ++layer) {
      for (int p = 0; p < length; ++p) {
        filled->ReadRow(0, layer, p, key.data(), value.data());
        filled->WriteRow(slot, layer, p, key.data(), value.data());
      }
    }
    filled->Advance(slot, length);
  }
  cache = std::move(filled);
  return cache.get();
}

// Decode steps of `batch` sequences, each with `context` positions cached,
// in a cache of `cache_slots` ≥ batch slots (one 32-slot cache serves batches
// 1, 8 and 32). After each step every slot is truncated back, so all steps
// are alike. With `chunk` > 1 each sequence feeds that many tokens and gets
// every row's logits: a speculative verification step (engine/speculation.h)
// of chunk - 1 proposed tokens.
void RunDecode(benchmark::State& state, const std::string& dir, int batch,
               int context, int cache_slots, int chunk = 1) {
  Decoder& decoder = *Decoders().at(dir);
  absl::StatusOr<KvCache*> filled = FilledCache(dir, cache_slots, context);
  if (!filled.ok()) {
    state.SkipWithError(filled.status().ToString().c_str());
    return;
  }
  KvCache& cache = **filled;
  ForwardResult result;
  const std::vector<int> next =
      TokenIds(batch * chunk, decoder.config().vocab_size, 99);
  std::vector<SequenceChunk> chunks(batch);
  for (int s = 0; s < batch; ++s) {
    chunks[s] = {s, absl::MakeConstSpan(&next[s * chunk], chunk), chunk > 1};
  }
  for (auto _ : state) {
    absl::Status st = decoder.Forward(chunks, cache, {}, result);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(result.logits.data());
    // O(1): only the lengths go back.
    for (int s = 0; s < batch; ++s) cache.Truncate(s, context);
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["batch"] = batch;
  state.counters["context"] = context;
  if (chunk > 1) state.counters["chunk"] = chunk;
}

// One sequence's prompt of `tokens` tokens into an empty slot.
void RunPrefill(benchmark::State& state, const std::string& dir, int tokens) {
  Decoder& decoder = *Decoders().at(dir);
  KvCache cache(decoder.config(), 1, KvDtypeOf(dir));
  ForwardResult result;
  const std::vector<int> ids = TokenIds(tokens, decoder.config().vocab_size, 7);
  const SequenceChunk chunk{0, absl::MakeConstSpan(ids)};
  for (auto _ : state) {
    cache.Clear(0);
    absl::Status st = decoder.Forward({chunk}, cache, {}, result);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(result.logits.data());
  }
  state.SetItemsProcessed(state.iterations() * tokens);
  state.counters["tokens"] = tokens;
}

void RegisterAll(const std::vector<std::string>& dirs, int decode_context,
                 const std::vector<int>& prefill_tokens) {
  for (const std::string& dir : dirs) {
    const std::string name = ModelName(dir);
    const int context = Decoders().at(dir)->config().context_length;
    const int dc = std::min(decode_context, context - 1);
    for (int batch : {1, 8, 16, 32}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("decode/", name, "/batch:", batch).c_str(),
          [dir, batch, dc](benchmark::State& s) {
            RunDecode(s, dir, batch, dc, 32);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    // A batch-1 step that verifies k = chunk - 1 proposed tokens: its time
    // against decode/batch:1's is what a step of speculative decoding costs
    // (items are steps, not tokens).
    for (int chunk : {2, 3, 4, 5, 6, 9}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("verify/", name, "/chunk:", chunk).c_str(),
          [dir, chunk, dc](benchmark::State& s) {
            RunDecode(s, dir, 1, std::min(dc, dc - chunk + 1), 32, chunk);
          })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    for (int tokens : prefill_tokens) {
      const int t = std::min(tokens, context);
      benchmark::RegisterBenchmark(
          absl::StrCat("prefill/", name, "/tokens:", t).c_str(),
          [dir, t](benchmark::State& s) { RunPrefill(s, dir, t); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark(
        absl::StrCat("full_context/", name, "/cache:", context).c_str(),
        [dir, context](benchmark::State& s) {
          RunDecode(s, dir, 1, context - 1, 1);
        })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  // Google Benchmark takes its --benchmark_* flags first; absl the rest.
  benchmark::Initialize(&argc, argv);
  absl::SetProgramUsageMessage(
      "Model-core micro-benchmarks: textgen_model_bench "
      "--models=DIR[:bf16|:int8|:w8a32][,...] "
      "[--threads=N] [--weights_dtype=f32|bf16|int8|w8a32] "
      "[--cpu_kernels=auto|generic|avx2|avx512] [--benchmark_* flags]");
  absl::ParseCommandLine(argc, argv);
  const char* family = textgen::UseCpuKernelsFlag("model_bench");
  if (family == nullptr) return 2;
  std::fprintf(stderr, "model_bench: %s kernels\n", family);
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1) {
    std::fprintf(stderr, "model_bench: --threads must be >= 1, got %d\n",
                 threads);
    return 2;
  }
  std::vector<std::string> dirs =
      absl::StrSplit(absl::GetFlag(FLAGS_models), ',', absl::SkipEmpty());
  if (dirs.empty()) {
    std::fprintf(stderr, "model_bench: --models is empty\n");
    return 2;
  }
  for (const std::string& dir : dirs) {
    absl::Status s = textgen::LoadDecoder(dir, threads);
    if (!s.ok()) {
      std::fprintf(stderr, "model_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::vector<int> prefill_tokens;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_prefill_tokens),
                                            ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1) {
      std::fprintf(stderr,
                   "model_bench: --prefill_tokens: '%s' is not a positive "
                   "integer\n",
                   std::string(t).c_str());
      return 2;
    }
    prefill_tokens.push_back(n);
  }
  textgen::RegisterAll(dirs, absl::GetFlag(FLAGS_decode_context),
                       prefill_tokens);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext(
      "decoder_threads",
      std::to_string(textgen::Decoders().begin()->second->threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
