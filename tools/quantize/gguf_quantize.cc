#include "tools/quantize/gguf_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/formats/gguf.h"
#include "model/kernels/ggml_blocks.h"
#include "tools/quantize/ggml_quantize.h"
#include "tools/quantize/gguf_metadata_copy.h"

namespace textgen::quantize {
namespace {

using kernels::BlockType;

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION.

struct TensorPlan {
  const GgufTensorInfo* info = nullptr;
  int64_t ne[4] = {1, 1, 1, 1};
  int n_dims = 1;  // ggml_n_dims.
  uint32_t in_type = 0;
  uint32_t out_type = 0;
  bool convert = false;
  uint64_t out_bytes = 0;
  uint64_t offset = 0;  // In the output's data section.
};

// sscanf(name, "blk.%d.", &layer)'s layer, or -1: llama.cpp's loader sorts
// tensors by it (weight_name_comparer).
int LayerOf(const std::string& name) {
  if (!absl::StartsWith(name, "blk.")) return -1;
  const char* p = name.c_str() + 4;
  char* end = nullptr;
  const long layer = std::strtol(p, &end, 10);
  return end == p ? -1 : static_cast<int>(layer);
}

uint64_t TensorBytes(uint32_t type, const int64_t* ne) {
  const uint64_t rows = static_cast<uint64_t>(ne[1] * ne[2] * ne[3]);
  if (IsBlockType(type)) {
    return rows * RowBytes(static_cast<BlockType>(type), ne[0]);
  }
  return rows * static_cast<uint64_t>(ne[0]) * (type == kGgmlF32 ? 4 : 2);
}

uint64_t Pad(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The first element of an integer-or-array key, every element for `all`.
absl::StatusOr<std::vector<int64_t>> IntOrArray(const GgufFile& file,
                                                const std::string& key) {
  const GgufKeyValue* kv = file.FindKey(key);
  if (kv == nullptr) return absl::NotFoundError(key);
  if (kv->type == GgufValueType::kArray) return file.GetIntArray(key);
  TEXTGEN_ASSIGN_OR_RETURN(const int64_t v, file.GetInt(key));
  return std::vector<int64_t>{v};
}

absl::StatusOr<ModelFacts> ReadModelFacts(const GgufFile& file) {
  ModelFacts facts;
  TEXTGEN_ASSIGN_OR_RETURN(facts.arch, file.GetString("general.architecture"));
  const std::string& arch = facts.arch;
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "gpt2") {
    return absl::InvalidArgumentError(absl::StrCat(
        "architecture '", arch,
        "': textgen_quantize applies llama-quantize's rules for llama, "
        "qwen2, qwen3 and gpt2 only"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(const int64_t n_layer,
                           file.GetInt(arch + ".block_count"));
  facts.n_layer = static_cast<int>(n_layer);
  std::vector<int64_t> heads(facts.n_layer, 0), kv_heads;
  if (auto h = IntOrArray(file, arch + ".attention.head_count"); h.ok()) {
    heads = *h;
  }
  if (auto h = IntOrArray(file, arch + ".attention.head_count_kv"); h.ok()) {
    kv_heads = *h;
  } else {
    kv_heads = heads;
  }
  // A scalar stands for every layer.
  if (heads.size() == 1) heads.assign(facts.n_layer, heads[0]);
  if (kv_heads.size() == 1) kv_heads.assign(facts.n_layer, kv_heads[0]);
  facts.n_head = heads.empty() ? 0 : static_cast<int>(heads[0]);
  facts.n_head_kv = kv_heads.empty() ? 0 : static_cast<int>(kv_heads[0]);
  if (auto e = file.GetInt(arch + ".expert_count"); e.ok()) {
    facts.n_expert = static_cast<int>(*e);
  }
  if (facts.n_expert > 1) {
    return absl::InvalidArgumentError(
        "mixture-of-experts models are not supported by textgen_quantize");
  }
  facts.is_70b =
      facts.n_layer == 80 &&
      (arch == "qwen2" || (arch == "llama" && facts.n_head != facts.n_head_kv));
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name == "output.weight") facts.has_output = true;
    if (absl::StrContains(t.name, "attn_v.weight") ||
        absl::StrContains(t.name, "attn_qkv.weight") ||
        absl::StrContains(t.name, "attn_kv_b.weight")) {
      ++facts.n_attention_wv;
    }
  }
  // llama-quantize asserts one attention value matrix per attention layer.
  const int attention_layers = static_cast<int>(std::count_if(
      kv_heads.begin(),
      kv_heads.begin() + std::min<size_t>(kv_heads.size(), facts.n_layer),
      [](int64_t h) { return h != 0; }));
  if (facts.n_attention_wv != 0 && facts.n_attention_wv != attention_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(facts.n_attention_wv, " attention value matrices for ",
                     attention_layers, " attention layers"));
  }
  return facts;
}

absl::StatusOr<std::vector<TensorPlan>> Plan(const GgufFile& file,
                                             const FileType& file_type,
                                             const ModelFacts& facts, bool pure,
                                             uint32_t alignment) {
  std::vector<TensorPlan> plans;
  for (const GgufTensorInfo& t : file.tensors()) {
    TensorPlan p;
    p.info = &t;
    for (size_t i = 0; i < t.dims.size(); ++i) {
      p.ne[i] = static_cast<int64_t>(t.dims[i]);
    }
    for (int i = 3; i >= 1; --i) {
      if (p.ne[i] > 1) {
        p.n_dims = i + 1;
        break;
      }
    }
    p.in_type = static_cast<uint32_t>(t.type);
    plans.push_back(p);
  }
  std::stable_sort(plans.begin(), plans.end(),
                   [](const TensorPlan& a, const TensorPlan& b) {
                     const int la = LayerOf(a.info->name);
                     const int lb = LayerOf(b.info->name);
                     if (la != lb) return la < lb;
                     return a.info->name < b.info->name;
                   });
  TensorTypeChooser chooser(facts, file_type);
  uint64_t offset = 0;
  for (TensorPlan& p : plans) {
    const std::string& name = p.info->name;
    p.out_type = p.in_type;
    if (IsQuantizable(name, p.n_dims, facts.arch)) {
      uint32_t type = file_type.default_type;
      if (!pure && IsBlockType(type)) {
        TEXTGEN_ASSIGN_OR_RETURN(type, chooser.Choose(name, p.ne[0]));
      } else if (IsBlockType(type) &&
                 p.ne[0] % kernels::FindBlockLayout(type)->values != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", name, ": rows of ", p.ne[0],
                         " values do not fit ", GgmlTypeName(type),
                         " blocks (without --pure, llama-quantize's "
                         "fallback types would be used)"));
      }
      p.convert = type != p.in_type;
      if (p.convert) {
        if (IsBlockType(p.in_type)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tensor ", name, " is ", GgmlTypeName(p.in_type),
              ": requantizing is not supported (llama-quantize refuses it "
              "too without --allow-requantize); start from F32, F16 or "
              "BF16"));
        }
        p.out_type = type;
      }
    }
    p.out_bytes = p.convert ? TensorBytes(p.out_type, p.ne) : p.info->bytes;
    p.offset = offset;
    offset += Pad(p.out_bytes, alignment);
  }
  return plans;
}

// Runs fn(begin, end) over [0, rows) split among `threads` threads.
void ParallelRows(int64_t rows, int threads,
                  const std::function<void(int64_t, int64_t)>& fn) {
  threads =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  if (threads == 1) return fn(0, rows);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = rows * t / threads, end = rows * (t + 1) / threads;
    pool.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  for (std::thread& th : pool) th.join();
}

// The tensor's values as floats, exactly (F16 and BF16 widen without
// rounding); INVALID_ARGUMENT if one is NaN or infinite.
absl::StatusOr<std::vector<float>> Widen(const GgufFile& file,
                                         const TensorPlan& p) {
  const absl::string_view raw = file.RawData(*p.info);
  const size_t n = p.info->num_elements;
  std::vector<float> x(n);
  if (p.in_type == kGgmlF32) {
    std::memcpy(x.data(), raw.data(), n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      if (p.in_type == kGgmlF16) {
        x[i] = kernels::HalfToFloat(h);
      } else {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&x[i], &bits, 4);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", p.info->name, " holds ", x[i], " at ", i));
    }
  }
  return x;
}

absl::StatusOr<std::string> Convert(const GgufFile& file, const TensorPlan& p,
                                    int threads) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<float> x, Widen(file, p));
  std::string out(p.out_bytes, '\0');
  auto* dst = reinterpret_cast<uint8_t*>(out.data());
  const int64_t row_values = p.ne[0];
  const int64_t rows = p.ne[1] * p.ne[2] * p.ne[3];
  if (p.out_type == kGgmlF32) {
    std::memcpy(dst, x.data(), x.size() * 4);
    return out;
  }
  if (!IsBlockType(p.out_type)) {  // F16 or BF16.
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t h =
          p.out_type == kGgmlF16 ? FloatToHalf(x[i]) : FloatToBf16(x[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return out;
  }
  const auto type = static_cast<BlockType>(p.out_type);
  const size_t row_bytes = RowBytes(type, row_values);
  ParallelRows(rows, threads, [&](int64_t begin, int64_t end) {
    QuantizeRows(type, x.data() + begin * row_values, end - begin, row_values,
                 dst + begin * row_bytes);
  });
  // llama-quantize validates what it wrote (ggml_validate_row_data): a
  // scale that overflowed fp16 would poison the model.
  if (!kernels::BlockScalesFinite(type, dst, rows * row_values)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", p.info->name, ": a ", GgmlTypeName(p.out_type),
                     " scale overflows fp16 (values too large to quantize)"));
  }
  return out;
}

// Checks a tensor copied as it is, as llama.cpp's loader checks every
// tensor it reads (check_tensors): no NaN or infinity in float tensors.
absl::Status CheckCopied(const GgufFile& file, const TensorPlan& p) {
  if (IsBlockType(p.in_type)) {
    if (!kernels::BlockScalesFinite(
            static_cast<BlockType>(p.in_type),
            reinterpret_cast<const uint8_t*>(file.RawData(*p.info).data()),
            static_cast<int64_t>(p.info->num_elements))) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", p.info->name, " has a non-finite scale"));
    }
    return absl::OkStatus();
  }
  return Widen(file, p).status();
}

std::string Shape(const TensorPlan& p) {
  std::vector<int64_t> dims(p.ne, p.ne + p.n_dims);
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

}  // namespace

absl::Status QuantizeGguf(const std::string& input, const std::string& output,
                          const FileType& file_type,
                          const QuantizeOptions& options) {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::Open(input));
  if (auto count = file.GetUint("split.count"); count.ok() && *count > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        input, " is shard of a split model (split.count = ", *count,
        "): merge the shards first"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(const ModelFacts facts, ReadModelFacts(file));
  // 32 unless the input says otherwise (general.alignment, copied).
  const uint32_t alignment = file.alignment();
  TEXTGEN_ASSIGN_OR_RETURN(
      const std::vector<TensorPlan> plans,
      Plan(file, file_type, facts, options.pure, alignment));

  TEXTGEN_ASSIGN_OR_RETURN(MetadataCopier metadata, MetadataCopier::Open(file));
  metadata.Drop({"general.quantization_version", "general.file_type",
                 "split.no", "split.count", "split.tensors.count"});
  metadata.AppendUint32("general.quantization_version", kQuantizationVersion);
  metadata.AppendUint32("general.file_type", file_type.ftype);

  std::string header = metadata.Header(plans.size());
  for (const TensorPlan& p : plans) {
    AppendGgufString(p.info->name, &header);
    AppendLittleEndian<uint32_t>(p.n_dims, &header);
    for (int i = 0; i < p.n_dims; ++i) {
      AppendLittleEndian<uint64_t>(p.ne[i], &header);
    }
    AppendLittleEndian<uint32_t>(p.out_type, &header);
    AppendLittleEndian<uint64_t>(p.offset, &header);
  }
  header.resize(Pad(header.size(), alignment), '\0');

  const std::string temp = output + ".tmp";
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!out) return absl::NotFoundError(absl::StrCat("cannot write ", temp));
  out.write(header.data(), header.size());
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1u, std::thread::hardware_concurrency());
  const std::string padding(alignment, '\0');
  int index = 0;
  for (const TensorPlan& p : plans) {
    ++index;
    if (options.log) {
      options.log(absl::StrFormat(
          "[%4d/%4d] %s %s %s%s", index, plans.size(), p.info->name, Shape(p),
          GgmlTypeName(p.in_type),
          p.convert ? absl::StrCat(" -> ", GgmlTypeName(p.out_type)) : ""));
    }
    absl::Status status;
    if (p.convert) {
      absl::StatusOr<std::string> data = Convert(file, p, threads);
      status = data.status();
      if (status.ok()) out.write(data->data(), data->size());
    } else {
      status = CheckCopied(file, p);
      const absl::string_view raw = file.RawData(*p.info);
      if (status.ok()) out.write(raw.data(), raw.size());
    }
    file.DropPages(*p.info);
    if (!status.ok()) {
      out.close();
      std::remove(temp.c_str());
      return status;
    }
    out.write(padding.data(), Pad(p.out_bytes, alignment) - p.out_bytes);
  }
  out.close();
  if (!out) {
    std::remove(temp.c_str());
    return absl::DataLossError(absl::StrCat("writing ", temp, " failed"));
  }
  if (std::rename(temp.c_str(), output.c_str()) != 0) {
    std::remove(temp.c_str());
    return absl::DataLossError(
        absl::StrCat("cannot rename ", temp, " to ", output));
  }
  return absl::OkStatus();
}

}  // namespace textgen::quantize
