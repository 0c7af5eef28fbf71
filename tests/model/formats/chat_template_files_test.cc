#include "model/formats/chat_template_files.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using ::textgen::testing::FreshTempDir;
using ::textgen::testing::GgufBuilder;
using ::textgen::testing::WriteFile;

std::string In(const std::string& dir, const std::string& name) {
  return dir + "/" + name;
}

TEST(ChatTemplateFilesTest, TokenizerConfigGivesTheTemplateAndTheTokens) {
  const std::string dir = FreshTempDir("chat_files_config");
  WriteFile(In(dir, "tokenizer_config.json"),
            R"({"chat_template": "{{ bos_token }}x", "bos_token": "<s>",
                "eos_token": {"content": "</s>", "special": true}})");
  absl::StatusOr<ChatTemplateFiles> found = FindChatTemplate(dir, "", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.at("default"), "{{ bos_token }}x");
  EXPECT_EQ(found->bos_token, "<s>");
  EXPECT_EQ(found->eos_token, "</s>");
  EXPECT_EQ(found->origin, In(dir, "tokenizer_config.json"));
}

TEST(ChatTemplateFilesTest, NamedTemplatesAreKeptByName) {
  const std::string dir = FreshTempDir("chat_files_named");
  WriteFile(In(dir, "tokenizer_config.json"),
            R"({"chat_template": [{"name": "default", "template": "d"},
                                  {"name": "tool_use", "template": "t"}]})");
  absl::StatusOr<ChatTemplateFiles> found = FindChatTemplate(dir, "", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.size(), 2u);
  EXPECT_EQ(found->templates.at("tool_use"), "t");
}

TEST(ChatTemplateFilesTest, FilesBesideTheModelComeBeforeTheConfig) {
  const std::string dir = FreshTempDir("chat_files_order");
  WriteFile(In(dir, "tokenizer_config.json"),
            R"({"chat_template": "config", "eos_token": "E"})");
  WriteFile(In(dir, "chat_template.json"), R"({"chat_template": "json"})");
  absl::StatusOr<ChatTemplateFiles> found = FindChatTemplate(dir, "", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.at("default"), "json");
  WriteFile(In(dir, "chat_template.jinja"), "jinja");
  found = FindChatTemplate(dir, "", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.at("default"), "jinja");
  EXPECT_EQ(found->eos_token, "E");  // The tokens still come from the config.
  // --chat_template wins over all, a Jinja file or a JSON holding one.
  const std::string other = FreshTempDir("chat_files_override");
  WriteFile(In(other, "t.jinja"), "flag");
  found = FindChatTemplate(dir, "", In(other, "t.jinja"));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.at("default"), "flag");
  EXPECT_EQ(found->origin, In(other, "t.jinja"));
  WriteFile(In(other, "c.json"), R"({"chat_template": "from json"})");
  found = FindChatTemplate(dir, "", In(other, "c.json"));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.at("default"), "from json");
}

TEST(ChatTemplateFilesTest, NoTemplateIsEmptyAndBadFilesAreNamed) {
  const std::string dir = FreshTempDir("chat_files_none");
  absl::StatusOr<ChatTemplateFiles> found = FindChatTemplate(dir, "", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(found->empty());
  found = FindChatTemplate(dir, "", In(dir, "missing.jinja"));
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(found.status().message().find("--chat_template"),
            std::string::npos);
  WriteFile(In(dir, "tokenizer_config.json"), R"({"chat_template": 5})");
  found = FindChatTemplate(dir, "", "");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(found.status().message().find("tokenizer_config.json"),
            std::string::npos);
  WriteFile(In(dir, "tokenizer_config.json"), "{not json");
  EXPECT_EQ(FindChatTemplate(dir, "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateFilesTest, GgufCarriesItsTemplateAndTokenStrings) {
  const std::string dir = FreshTempDir("chat_files_gguf");
  const std::string path = In(dir, "m.gguf");
  WriteFile(path, GgufBuilder()
                      .KeyStr("tokenizer.chat_template", "{{ messages }}")
                      .KeyStr("tokenizer.chat_template.tool_use", "tools")
                      .KeyStrings("tokenizer.ggml.tokens", {"<s>", "</s>", "a"})
                      .KeyU32("tokenizer.ggml.bos_token_id", 0)
                      .KeyU32("tokenizer.ggml.eos_token_id", 1)
                      .Build());
  absl::StatusOr<ChatTemplateFiles> found = FindChatTemplate(path, "", "");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->templates.at("default"), "{{ messages }}");
  EXPECT_EQ(found->templates.at("tool_use"), "tools");
  EXPECT_EQ(found->bos_token, "<s>");
  EXPECT_EQ(found->eos_token, "</s>");
}

}  // namespace
}  // namespace textgen
