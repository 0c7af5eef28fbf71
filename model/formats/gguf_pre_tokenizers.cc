#include "model/formats/gguf_pre_tokenizers.h"

#include <string>

#include "model/text/pre_tokenizers.h"

namespace textgen {
namespace {

using Names = const std::string_view[];
using Splits = const std::string_view[];

// GPT-2's regex as llama.cpp spells it: without tokenizer.json's trailing
// `|\s+`, whose matches are the text left between matches anyway.
constexpr std::string_view kGpt2Words =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Han, Hangul and (DeepSeek's range) everything from U+0800 to U+4E00.
constexpr std::string_view kDeepSeekCjk =
    R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr std::string_view kBloomWords = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

constexpr Names kDefaultNames = {"default"};
constexpr Splits kDefaultSplits = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Words,
                                   R"(\p{N}+)", "[0-9][0-9][0-9]"};

constexpr Names kGpt2Names = {"gpt-2",    "gpt2",    "phi-2",  "roberta-bpe",
                              "gigachat", "a.x-4.0", "mellum", "exaone4",
                              "mpt",      "olmo",    "jais",   "trillion"};
constexpr Splits kGpt2Splits = {kGpt2SplitPattern};

constexpr Names kLlama3Names = {"llama-bpe", "llama3",  "llama-v3", "falcon3",
                                "falcon-h1", "pixtral", "midm-2.0", "lfm2"};
constexpr Splits kLlama3Splits = {kLlama3};
// Llama 3's regex without ignore_merges or a BOS.
constexpr Names kLlama3RegexNames = {"smaug-bpe", "dbrx", "chatglm-bpe",
                                     "glm4"};

constexpr Names kQwen2Names = {"qwen2", "deepseek-r1-qwen"};
constexpr Splits kQwen2Splits = {kQwen2};
constexpr Names kQwen2RegexNames = {"stablelm2", "megrez", "hunyuan", "grok-2"};

// Digits one by one, then GPT-2's regex.
constexpr Names kDigitsGpt2Names = {"smollm",    "starcoder", "refact",
                                    "command-r", "codeshell", "exaone",
                                    "minerva-7b"};
constexpr Splits kDigitsGpt2Splits = {R"(\p{N})", kGpt2Words};

constexpr Names kFalconNames = {"falcon"};
constexpr Splits kFalconSplits = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Words,
                                  "[0-9][0-9][0-9]"};

constexpr Names kDeepSeekLlmNames = {"deepseek-llm"};
constexpr Splits kDeepSeekLlmSplits = {
    R"([\r\n])",
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D})"
    R"(\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5})"
    R"(\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57})"
    R"(\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC})"
    R"(\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB})"
    R"(\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128})"
    R"(\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})"
    R"(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE})"
    R"(\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06})"
    R"(\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
    R"(\s+$)",
    kDeepSeekCjk,
    R"(\p{N}+)"};

constexpr Names kDeepSeekCoderNames = {"deepseek-coder"};
constexpr Splits kDeepSeekCoderSplits = {
    R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepSeekCjk, R"(\p{N})"};

constexpr Names kDeepSeekV3Names = {"deepseek-v3", "hunyuan-dense"};
constexpr Splits kDeepSeekV3Splits = {
    R"(\p{N}{1,3})",
    R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|)"
    R"([^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)"};

constexpr Names kBloomNames = {"poro-chat", "bloom", "gpt3-finnish"};
constexpr Splits kBloomSplits = {kBloomWords};
constexpr Names kVikingNames = {"viking"};
constexpr Splits kVikingSplits = {kBloomWords, R"(\p{N})"};

constexpr Names kTekkenNames = {"tekken"};
constexpr Splits kTekkenSplits = {
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

constexpr Names kGpt4oNames = {"gpt-4o", "llama4"};
constexpr Splits kGpt4oSplits = {
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+)"
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

constexpr Names kBailingNames = {"bailingmoe", "llada-moe"};
constexpr Splits kBailingSplits = {
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"};

constexpr Names kSeedCoderNames = {"seed-coder"};
constexpr Splits kSeedCoderSplits = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}|)"
    R"( ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"};

// {names, splits, nfc, ignore_merges, add_bos}, roughly in llama.cpp's order.
constexpr GgufPreTokenizer kTypes[] = {
    {kDefaultNames, kDefaultSplits},
    {kGpt2Names, kGpt2Splits},
    {kLlama3Names, kLlama3Splits, false, true, true},
    {kLlama3RegexNames, kLlama3Splits},
    {kQwen2Names, kQwen2Splits, true},
    {kQwen2RegexNames, kQwen2Splits},
    {kDigitsGpt2Names, kDigitsGpt2Splits},
    {kFalconNames, kFalconSplits},
    {kDeepSeekLlmNames, kDeepSeekLlmSplits},
    {kDeepSeekCoderNames, kDeepSeekCoderSplits},
    {kDeepSeekV3Names, kDeepSeekV3Splits},
    {kBloomNames, kBloomSplits},
    {kVikingNames, kVikingSplits},
    {kTekkenNames, kTekkenSplits, false, true, true},
    {kGpt4oNames, kGpt4oSplits},
    {kBailingNames, kBailingSplits},
    {kSeedCoderNames, kSeedCoderSplits},
};

}  // namespace

const GgufPreTokenizer* FindGgufPreTokenizer(std::string_view name) {
  for (const GgufPreTokenizer& type : kTypes) {
    for (std::string_view n : type.names) {
      if (n == name) return &type;
    }
  }
  return nullptr;
}

std::string GgufPreTokenizerNames() {
  std::string names;
  for (const GgufPreTokenizer& type : kTypes) {
    for (std::string_view name : type.names) {
      if (!names.empty()) names += ", ";
      names += name;
    }
  }
  return names;
}

void UseGgufPreTokenizer(const GgufPreTokenizer& type, BpeTokenizerSpec& spec) {
  UseByteLevelPipeline(spec, type.splits);
  if (type.nfc) spec.normalizers = {NormalizerSpec{}};  // kNfc
  spec.ignore_merges = type.ignore_merges;
}

}  // namespace textgen
