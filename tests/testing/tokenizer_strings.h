// The varied strings tokenizer tests compare against reference encoders:
// 2,000+ of them (unicode, whitespace runs, contractions, numbers, code,
// random code points and bytes, long mixes). Deterministic: std::mt19937's
// sequence is fixed by the standard, and only its raw output is used
// (distributions are not portable).
#ifndef TEXTGEN_TESTS_TESTING_TOKENIZER_STRINGS_H_
#define TEXTGEN_TESTS_TESTING_TOKENIZER_STRINGS_H_

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/utf8.h"

namespace textgen::testing {

class TokenizerStrings {
 public:
  explicit TokenizerStrings(uint32_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return rng_() % n; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Pick(v.size())];
  }
  static std::string Utf8(char32_t c) {
    std::string s;
    AppendUtf8(c, s);
    return s;
  }
  char32_t InRange(char32_t lo, char32_t hi) {
    return lo + static_cast<char32_t>(Pick(hi - lo + 1));
  }

  std::vector<std::string> All() {
    std::vector<std::string> out = Fixed();
    for (int i = 0; i < 350; ++i) out.push_back(Contractions());
    for (int i = 0; i < 350; ++i) out.push_back(Whitespace());
    for (int i = 0; i < 300; ++i) out.push_back(Numbers());
    for (int i = 0; i < 250; ++i) out.push_back(Code());
    for (int i = 0; i < 400; ++i) out.push_back(UnicodeText());
    for (int i = 0; i < 300; ++i) out.push_back(CodePointSoup());
    for (int i = 0; i < 200; ++i) out.push_back(ByteSoup());
    for (int i = 0; i < 20; ++i) out.push_back(Long());
    return out;
  }

 private:
  // Hand-picked edge cases.
  static std::vector<std::string> Fixed() {
    return {
        "",
        " ",
        "  ",
        "\n",
        "\n\n\n",
        "\r\n",
        "\t",
        "a",
        "Hello world",
        "Hello, world!",
        " Hello world ",
        "I'm",
        "I'M",
        "you're",
        "YOU'RE",
        "we've",
        "they'll",
        "she'd",
        "it's",
        "IT'S",
        "don't",
        "DON'T",
        "'s",
        "'S",
        "''s",
        "'",
        "''",
        "it’s",
        "it\u2019S",
        "can't've",
        "y'all'd've",
        "'tis",
        "o'clock",
        "rock'n'roll",
        "He said 'stop'.",
        "123",
        "1234567890",
        "3.14159",
        "1,000,000",
        "-42",
        "1e-10",
        "0x7fffffff",
        "v1.2.3",
        "2024-01-01T00:00:00Z",
        "$9.99",
        "50%",
        "   leading",
        "trailing   ",
        "a  b   c    d",
        "a\tb\t\tc",
        "line1\nline2\r\nline3\rline4",
        "   \n   \n",
        " \n",
        "\n ",
        "\u00a0",
        "a\u00a0b",
        "a\u3000b",
        "a\u2028b",
        "a\u0085b",
        "a\ufeffb",
        "a\u180eb",
        "a\u200bb",
        "\ufeffBOM first",
        "<|endoftext|>",
        "<|endoftext|>Hello<|endoftext|>",
        "def f(x):\n    return x ** 2\n",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
        "\xF0\x9F\x98\x80",
        "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB",
        "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
        "1\xEF\xB8\x8F\xE2\x83\xA3",
        "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
        "e\xCC\x81",
        "e\xCC\x81\xCC\xA3\xCC\x84",
        "\xCC\x81 alone",
        "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD7\xA2\xD7\x95\xD7\x9C\xD7\x9D",
        "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 123",
        "\xE2\x80\x8F"
        "RTL mark",
        std::string("nul\0byte", 8),
        "\x01\x02\x1f\x7f",
        "\xEF\xBF\xBD replacement",
    };
  }

  std::string Word() {
    static const std::vector<std::string> words = {
        "the",   "The",   "THE",    "quick", "brown", "fox",     "jumps",
        "over",  "lazy",  "dog",    "King",  "HENRY", "thou",    "art",
        "a",     "I",     "it",     "you",   "they",  "we",      "she",
        "hello", "world", "token",  "naïve", "café",  "Ünïcödé", "x",
        "ab",    "zzz",   "Straße", "ǅemal", "ΑΒΓ",   "москва"};
    return Pick(words);
  }

  std::string Contractions() {
    static const std::vector<std::string> suffixes = {
        "'s",  "'t",  "'re", "'ve", "'m",  "'ll",    "'d", "'S",
        "'T",  "'RE", "'VE", "'M",  "'LL", "'D",     "’s", "’t",
        "’re", "'x",  "'",   "''s", "'ss", "'ll've", "`s", "'s'"};
    static const std::vector<std::string> separators = {
        " ", " ", " ", "  ", ", ", ". ", "\n", "!", "?", " - ", "'", ""};
    std::string s;
    for (size_t n = 1 + Pick(6); n > 0; --n) {
      s += Word();
      if (Pick(2)) s += Pick(suffixes);
      s += Pick(separators);
    }
    return s;
  }

  std::string Whitespace() {
    static const std::vector<std::string> spaces = {
        " ",      "  ",     "   ",    "    ",   "\t",     "\t\t",   "\n",
        "\n\n",   "\r\n",   "\r",     " \n",    "\n ",    "\v",     "\f",
        "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\ufeff", "\u180e",
        "\u200b", "\u2003", "\u202f", "\u205f", "\u1680", "\x1c",   "\x1f"};
    static const std::vector<std::string> fillers = {
        "a", "word", "12", "!", "...", "'s", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
        "-", "x y",  "()"};
    std::string s;
    for (size_t n = 1 + Pick(8); n > 0; --n) {
      for (size_t k = 1 + Pick(3); k > 0; --k) s += Pick(spaces);
      if (Pick(3)) s += Pick(fillers);
    }
    return s;
  }

  std::string Digits(size_t n) {
    std::string s;
    while (n-- > 0) s += static_cast<char>('0' + Pick(10));
    return s;
  }

  std::string Numbers() {
    switch (Pick(8)) {
      case 0:
        return Digits(1 + Pick(20));
      case 1:
        return Digits(1 + Pick(4)) + "." + Digits(1 + Pick(6));
      case 2: {
        std::string s = Digits(1 + Pick(3));
        for (size_t n = Pick(4); n > 0; --n) s += "," + Digits(3);
        return s;
      }
      case 3:
        return "-" + Digits(1 + Pick(5)) + "e" + (Pick(2) ? "-" : "+") +
               Digits(1 + Pick(2));
      case 4:
        return "Call " + Digits(3) + "-" + Digits(3) + "-" + Digits(4) + " x" +
               Digits(2);
      case 5: {
        // Non-ASCII numbers: Arabic-Indic, Devanagari and fullwidth digits
        // (Nd), superscripts and fractions (No), Roman numerals (Nl).
        static const std::vector<char32_t> numerals = {
            0x0660, 0x0663, 0x0969, 0x096A, 0xFF11, 0xFF19, 0x00B2,
            0x00B9, 0x00BD, 0x2153, 0x2160, 0x216B, 0x2460, 0x3007};
        std::string s = Pick(2) ? " " : "";
        for (size_t n = 1 + Pick(6); n > 0; --n) {
          s += Pick(3) ? Utf8(Pick(numerals)) : Digits(1);
        }
        return s;
      }
      case 6:
        return "item" + Digits(1 + Pick(3)) + " v" + Digits(1) + "." +
               Digits(1) + "." + Digits(2) + " " + Digits(1 + Pick(8)) + "px";
      default:
        return Word() + " " + Digits(1 + Pick(10)) + Word() + " " + Digits(2) +
               "%";
    }
  }

  std::string Code() {
    static const std::vector<std::string> lines = {
        "int main(int argc, char** argv) {",
        "return 0;",
        "}",
        "if (x != nullptr && x->next) { x = x->next; }",
        "def tokenize(text: str) -> list[int]:",
        "return [ord(c) for c in text if c.isalpha()]",
        "const f = async (a, b) => { await g(a ?? b); };",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
        "#include <vector>",
        "std::vector<std::pair<int, float>> v{{1, 2.5f}};",
        "x = {'key': \"value\", 'n': 42}  # comment",
        "$ ls -la | grep '\\.cc$' > out.txt 2>&1",
        "<div class=\"a\"><span>&amp;</span></div>",
        "fn main() { println!(\"{}\", 1 + 2); }",
        "a[i] += b[j] * c[k]; // accumulate",
        "/* block comment */",
        "let re = /'s|'t|\\s+(?!\\S)/gu;",
        "printf(\"%d\\n\", x);",
        "    ",
        ""};
    static const std::vector<std::string> indents = {"",   "  ",   "    ",
                                                     "\t", "\t\t", "        "};
    static const std::vector<std::string> newlines = {"\n", "\n", "\r\n",
                                                      "\n\n"};
    std::string s;
    for (size_t n = 1 + Pick(6); n > 0; --n) {
      s += Pick(indents) + Pick(lines) + Pick(newlines);
    }
    return s;
  }

  std::string UnicodeText() {
    static const std::vector<std::string> words = {"Grüße",
                                                   "façade",
                                                   "Ελληνικά",
                                                   "Привет",
                                                   "мир",
                                                   "中文",
                                                   "汉字测试",
                                                   "日本語",
                                                   "ひらがな",
                                                   "カタカナ",
                                                   "한국어",
                                                   "안녕하세요",
                                                   "العربية",
                                                   "مرحبا",
                                                   "עברית",
                                                   "שלום",
                                                   "हिन्दी",
                                                   "नमस्ते",
                                                   "ภาษาไทย",
                                                   "Tiếng Việt",
                                                   "ǆ",
                                                   "ﬁ",
                                                   "Ⅻ",
                                                   "ℌ",
                                                   "😀",
                                                   "👍🏽",
                                                   "👩‍💻",
                                                   "🇯🇵",
                                                   "❤️",
                                                   "🏳️‍🌈",
                                                   "✌🏿",
                                                   "…",
                                                   "—",
                                                   "«»",
                                                   "“quoted”",
                                                   "¿Qué?",
                                                   "¡Hola!",
                                                   "÷×",
                                                   "∑∫√",
                                                   "€£¥",
                                                   "\u200d",
                                                   "\u2060",
                                                   "\u00ad",
                                                   "\u0301",
                                                   "a\u0308",
                                                   "o\u0302\u0323",
                                                   "\u1100\u1161\u11a8",
                                                   "Z\u0351\u0352\u0353"};
    static const std::vector<std::string> separators = {
        " ", " ", "", ", ", "。", "、", "\n", " - ", "!", "'s ", " 12 "};
    std::string s;
    for (size_t n = 1 + Pick(7); n > 0; --n) {
      s += Pick(words);
      // Combining marks after a random word (stacked, sometimes).
      if (Pick(4) == 0) {
        for (size_t k = 1 + Pick(3); k > 0; --k)
          s += Utf8(InRange(0x300, 0x36F));
      }
      s += Pick(separators);
    }
    return s;
  }

  // Random code points from blocks whose properties are the same in PCRE2's
  // Unicode 14 and node's newer tables (see gpt2_bpe_tokenizer.h).
  std::string CodePointSoup() {
    static const std::vector<std::pair<char32_t, char32_t>> ranges = {
        {0x20, 0x7E},     {0x20, 0x7E},       {0x20, 0x7E},
        {0x00, 0x1F},     {0xA0, 0xFF},       {0x100, 0x17F},
        {0x300, 0x36F},   {0x391, 0x3C9},     {0x410, 0x44F},
        {0x5D0, 0x5EA},   {0x620, 0x64A},     {0x660, 0x669},
        {0x900, 0x97F},   {0xE01, 0xE3A},     {0x2000, 0x206F},
        {0x20A0, 0x20BF}, {0x2150, 0x218B},   {0x2200, 0x22FF},
        {0x2500, 0x257F}, {0x3000, 0x303F},   {0x3041, 0x3096},
        {0x4E00, 0x9FFC}, {0xAC00, 0xD7A3},   {0xE000, 0xE0FF},
        {0xFF01, 0xFF5E}, {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}};
    std::string s;
    for (size_t n = 1 + Pick(30); n > 0; --n) {
      const auto& [lo, hi] = Pick(ranges);
      s += Utf8(InRange(lo, hi));
    }
    return s;
  }

  // Random bytes made well-formed (so U+FFFD appears where they were not),
  // biased to ASCII, spaces and UTF-8's lead and continuation bytes.
  std::string ByteSoup() {
    static const std::string alphabet =
        std::string("aZ09 '\t\n.,!") +
        "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\x80\xBF\xC2\xE2\xFF\xF5";
    std::string bytes;
    for (size_t n = 1 + Pick(40); n > 0; --n)
      bytes += alphabet[Pick(alphabet.size())];
    return SanitizeUtf8(bytes);
  }

  // Longer texts mixing everything, with long runs of one kind.
  std::string Long() {
    std::string s;
    while (s.size() < 2000) {
      switch (Pick(6)) {
        case 0:
          s += std::string(1 + Pick(300), ' ');
          break;
        case 1:
          s += std::string(1 + Pick(200), 'a' + Pick(26));
          break;
        case 2:
          s += Digits(1 + Pick(100));
          break;
        case 3:
          s += Code();
          break;
        case 4:
          s += UnicodeText();
          break;
        default:
          s += Contractions();
      }
    }
    return s;
  }

  std::mt19937 rng_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_TOKENIZER_STRINGS_H_
