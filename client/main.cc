// textgen: the command-line client of a textgen server.
//
//   textgen [--server TARGET] generate --prompt "ROMEO:" [--max_new_tokens N]
//   textgen generate --prompt_ids 1,2,3 --top_logprobs 5 --echo_prompt
//                    --tap_layers 0 --tap_heads 1
//   textgen attention --prompt "ROMEO:" [--layer L --head H] --out map.png
//   textgen info | tokenize --text TEXT | health
//   textgen chat [--system TEXT] [--message TEXT ...]   (client/chat_command.h)
//   textgen --ca_cert ca.pem [--client_cert c.pem --client_key c.key]
//       [--token T | TEXTGEN_TOKEN=T] info      (TLS, mTLS, bearer token)
//
// Exit codes (client/README.md): 0 ok; 1 the server answered with an error (one
// line: "textgen: <STATUS>: <message>"), health not SERVING, or an output file
// could not be written; 2 usage (bad flag, value or command); 3 no connection
// ("textgen: cannot connect to <target>: ..."); 130 Ctrl-C, after cancelling
// the stream.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "client/attention_cli.h"
#include "client/chat_command.h"
#include "client/cli_exit.h"
#include "client/constraint_flags.h"
#include "client/heatmap.h"
#include "client/packed_weights.h"
#include "client/textgen_client.h"
#include "client/token_table.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(
    std::string, server, "localhost:50051",
    "gRPC target: host:port, dns:///name:port, or ipv4:ADDR:PORT,ADDR:PORT");
ABSL_FLAG(
    std::string, lb_policy, "pick_first",
    "pick_first or round_robin (spread calls over the target's addresses)");
ABSL_FLAG(int64_t, timeout_ms, 0,
          "Deadline of the call in milliseconds; 0 = none");
ABSL_FLAG(bool, tls, false,
          "Connect with TLS (implied by --ca_cert, --client_cert)");
ABSL_FLAG(std::string, ca_cert, "",
          "PEM CA certificate(s) that signed the server's certificate; "
          "default: the system's roots");
ABSL_FLAG(std::string, client_cert, "",
          "PEM client certificate, for servers that require one (mutual TLS)");
ABSL_FLAG(std::string, client_key, "", "PEM private key of --client_cert");
ABSL_FLAG(std::string, token, "",
          "Bearer token sent with every call; default: $TEXTGEN_TOKEN (a flag "
          "shows in `ps`, the environment does not)");
ABSL_FLAG(bool, json, false,
          "generate: one JSON object per stream message; info, tokenize: JSON");
ABSL_FLAG(std::string, prompt, "", "generate, attention: the prompt text");
ABSL_FLAG(std::vector<std::string>, prompt_ids, {},
          "generate, attention: the prompt as token ids, e.g. 1,2,3 (instead "
          "of --prompt)");
ABSL_FLAG(std::string, source, "",
          "generate, attention: an encoder-decoder model's source text (what "
          "its encoder reads; --prompt is then optional: the answer's start)");
ABSL_FLAG(std::vector<std::string>, source_ids, {},
          "generate, attention: the source as comma-separated token ids");
ABSL_FLAG(std::string, text, "", "tokenize: the text");
ABSL_FLAG(int, max_new_tokens, 0,
          "generate: tokens at most; 0 = the server's default");
ABSL_FLAG(double, temperature, 0,
          "generate: 0 = greedy (the default), else > 0");
ABSL_FLAG(int, top_k, 0,
          "generate: keep the k most likely tokens; 0 = all. attention with "
          "--encoding top_k: the weights kept per row (1..1024)");
ABSL_FLAG(double, top_p, 0, "generate: nucleus sampling; 0 or 1 = off");
ABSL_FLAG(double, repetition_penalty, 0,
          "generate: > 1 penalises repeats; 0 or 1 = off");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt,
          "generate: sampling seed, 0..2^64-1; unset = the server picks one "
          "(the summary names it)");
ABSL_FLAG(
    std::vector<std::string>, stop, {},
    "generate: stop when the text contains this; repeat the flag for several");
ABSL_FLAG(std::vector<std::string>, stop_token_ids, {},
          "generate, chat: token ids that end the generation as EOS does, "
          "e.g. 2,7");
ABSL_FLAG(std::string, system, "", "chat: the system prompt");
ABSL_FLAG(std::string, message, "",
          "chat: answer this user message and exit (one-shot; repeat the "
          "flag for several turns)");
ABSL_FLAG(bool, show_prompt, false,
          "chat: print the prompt the model was given (the rendered "
          "conversation) to stderr");
ABSL_FLAG(std::string, chat_template_kwargs, "",
          "chat: extra chat template variables, a JSON object, e.g. "
          "'{\"enable_thinking\": false}'");
ABSL_FLAG(int, top_logprobs, 0,
          "generate: also show the N most likely tokens of each step (0..20); "
          "prints a table, one line per token");
ABSL_FLAG(int, speculative_tokens, -1,
          "generate: speculative decoding's proposals per step at "
          "most for this call (0 = off; -1 = the server's). The output is the "
          "same either way");
ABSL_FLAG(bool, echo_prompt, false,
          "generate: the server sends the prompt's tokens first");
ABSL_FLAG(int, prompt_logprobs, 0,
          "generate: score the prompt (0 = off): each prompt token's "
          "log-probability and its N most likely rivals (1..20); with "
          "--max_new_tokens 0 nothing is generated. Prints a table");
ABSL_FLAG(bool, attention_tap, false,
          "generate: each generated token carries its attention rows (every "
          "layer and head unless --tap_layers/--tap_heads); prints a table");
ABSL_FLAG(std::vector<std::string>, tap_layers, {},
          "generate: the attention tap's layers, e.g. 0,2 (implies "
          "--attention_tap); default all");
ABSL_FLAG(std::vector<std::string>, tap_heads, {},
          "generate: the attention tap's heads, e.g. 1 (implies "
          "--attention_tap); default all");
ABSL_FLAG(std::string, tap_encoding, "",
          "generate: how the tap's weights travel: f32 (the default), u8, u16, "
          "f16 or top_k (implies --attention_tap)");
ABSL_FLAG(int, tap_top_k, 0,
          "generate: with --tap_encoding top_k, the weights kept per row "
          "(1..1024)");
ABSL_FLAG(std::vector<std::string>, layer, {},
          "attention: layers to fetch, e.g. 0 or 0,2; default all");
ABSL_FLAG(std::vector<std::string>, head, {},
          "attention: heads to fetch, e.g. 1 or 0,3; default all");
ABSL_FLAG(std::string, out, "", "attention: the PNG heatmap to write");
ABSL_FLAG(std::string, html, "",
          "attention: also write an interactive HTML view here");
ABSL_FLAG(int, max_tokens_shown, 64,
          "attention: cells per side at most; longer prompts show their first "
          "tokens");
ABSL_FLAG(int, cell_px, 0,
          "attention: pixels per cell; 0 = chosen from the prompt length");
ABSL_FLAG(std::string, encoding, "",
          "attention: how the maps' weights travel: f32 (the default, exact), "
          "u8, u16, f16 or top_k (with --top_k N); decoded before drawing");
ABSL_FLAG(bool, summary, false,
          "attention: print each map's summary (entropy, sink, mean distance, "
          "max weight) as a table, and whether a rollout came; without --out "
          "and --html only the summaries are fetched");
ABSL_FLAG(std::string, queries, "",
          "attention: only these queries, positions BEGIN:END (END exclusive; "
          "BEGIN: = to the last)");
ABSL_FLAG(std::string, keys, "",
          "attention: only these keys, positions BEGIN:END as --queries");
ABSL_FLAG(std::string, overview, "",
          "attention: pooled maps of at most CELLS x CELLS cells, "
          "CELLS[:max|mean] (max by default)");
ABSL_FLAG(std::string, font, textgen::client::kDefaultHeatmapFont,
          "attention: TrueType font for labels; missing = no labels (with a "
          "warning)");

namespace textgen::client {
namespace {

constexpr char kUsage[] =
    R"(textgen: the command-line client of a textgen server.

usage: textgen [--server HOST:PORT] [--lb_policy P] [--timeout_ms N]
               [--tls --ca_cert PEM --client_cert PEM --client_key PEM]
               [--token T, or TEXTGEN_TOKEN in the environment] COMMAND [flags]

commands:
  generate  --prompt TEXT | --prompt_ids ID,... [--source TEXT | --source_ids ID,...]
            [--max_new_tokens N --temperature T
            --top_k K --top_p P --repetition_penalty R --seed S --stop STR ...
            --stop_token_ids ID,...
            --json_schema FILE | --json_object | --regex RE | --grammar FILE |
            --choice A,B,...
            --echo_prompt --top_logprobs N --prompt_logprobs N --attention_tap
            --speculative_tokens K
            --tap_layers L,... --tap_heads H,...
            --tap_encoding f32|u8|u16|f16|top_k --tap_top_k N --json]
            Streams the text to stdout as it is made; a summary on stderr.
            An encoder-decoder model needs --source (what it reads); its
            --prompt is optional (the start of the answer).
            With --top_logprobs, --prompt_logprobs or a tap: a table, one line
            per token.
            --json: every stream message as one JSON object per line.
  attention --prompt TEXT | --prompt_ids ID,... [--source TEXT | --source_ids ID,...]
            [--layer L --head H] --out FILE.png [--html FILE.html]
            [--max_tokens_shown N --cell_px N --font TTF]
            [--encoding f32|u8|u16|f16|top_k --top_k N] [--summary]
            [--queries B:E --keys B:E --overview CELLS[:max|mean]]
            A heatmap per head (rows: queries, columns: keys) and a hoverable HTML view.
            --summary: a table of each map's summary (alone without --out/--html).
            --queries/--keys/--overview: draw that window or the pooled cells.
            With --source (encoder-decoder models): encoder self, decoder self and
            cross-attention, one section each; cross rows are the target's tokens,
            columns the source's.
  info      The model and the server's limits (--json for JSON).
  tokenize  --text TEXT: one "id<TAB>token" line per token (--json for JSON).
  health    Prints the serving status; exit 0 only when SERVING.
  chat      [--system TEXT --message TEXT ... --show_prompt
            --chat_template_kwargs JSON] + generate's sampling and
            constraint flags
            A conversation with a model that has a chat template: a REPL on
            stdin (/system TEXT, /reset, /exit), each answer streamed, token
            counts on stderr. --message: answer it (repeat for more turns),
            the answers alone on stdout, then exit.

exit codes: 0 ok, 1 error from the server (or health not SERVING, or a file not
written), 2 usage, 3 cannot connect, 130 interrupted (Ctrl-C).
Every flag: textgen --helpfull)";

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

// The flags that may be repeated, every value as given.
struct RepeatedFlags {
  std::vector<std::string> stops;     // --stop
  std::vector<std::string> messages;  // --message
};

// Checks every flag before absl parses them: absl exits 1 on an unknown flag or
// a bad value, and a usage error is exit 2 here. Collects --stop's and
// --message's values as given (absl would split a list flag at commas and
// keep only the last occurrence).
std::optional<std::string> CheckFlags(int argc, char** argv,
                                      RepeatedFlags* repeated) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    std::string name(arg.substr(0, arg.find('=')));
    const bool has_value = arg.find('=') != absl::string_view::npos;
    std::string value =
        has_value ? std::string(arg.substr(arg.find('=') + 1)) : "";
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated =
          absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) continue;
    }
    if (flag == nullptr) return absl::StrCat("unknown flag --", name);
    if (flag->IsOfType<bool>() && !has_value) continue;
    if (!has_value) {
      if (i + 1 >= argc) return absl::StrCat("flag --", name, " needs a value");
      value = argv[++i];
    }
    std::string error;
    if (name == "stop") {
      repeated->stops.push_back(value);
    } else if (name == "message") {
      repeated->messages.push_back(value);
    } else if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("bad value for --", name, ": ", error);
    }
  }
  return std::nullopt;
}

// `what` names the values in the error: "indices", "token ids".
absl::StatusOr<std::vector<int>> ParseIndices(
    const std::vector<std::string>& values, absl::string_view flag,
    absl::string_view what = "indices") {
  std::vector<int> out;
  for (const std::string& v : values) {
    int i = 0;
    if (!absl::SimpleAtoi(v, &i) || i < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " takes ", what, " >= 0, got \"", v, "\""));
    }
    out.push_back(i);
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

// --source or --source_ids, at most one: nullopt when neither is given.
absl::StatusOr<std::optional<v1::Prompt>> SourceFromFlags() {
  const std::string& text = absl::GetFlag(FLAGS_source);
  const std::vector<std::string>& id_flag = absl::GetFlag(FLAGS_source_ids);
  if (!text.empty() && !id_flag.empty()) {
    return absl::InvalidArgumentError(
        "--source and --source_ids exclude each other: give one");
  }
  if (text.empty() && id_flag.empty()) return std::nullopt;
  v1::Prompt source;
  if (!text.empty()) {
    source.set_text(text);
    return source;
  }
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> ids,
                           ParseIndices(id_flag, "source_ids", "token ids"));
  source.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  return source;
}

// --prompt or --prompt_ids, exactly one, or none with a source (an
// encoder–decoder model then starts from its BOS): nullopt. INVALID_ARGUMENT
// names the problem.
absl::StatusOr<std::optional<v1::Prompt>> PromptFromFlags(
    absl::string_view command, bool has_source) {
  const std::string& text = absl::GetFlag(FLAGS_prompt);
  const std::vector<std::string>& id_flag = absl::GetFlag(FLAGS_prompt_ids);
  if (!text.empty() && !id_flag.empty()) {
    return absl::InvalidArgumentError(
        "--prompt and --prompt_ids exclude each other: give one");
  }
  if (has_source && text.empty() && id_flag.empty()) return std::nullopt;
  v1::Prompt prompt;
  if (!text.empty()) {
    prompt.set_text(text);
    return prompt;
  }
  if (id_flag.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(command,
                     " needs --prompt TEXT or --prompt_ids ID,ID,... (or, for "
                     "an encoder-decoder model, --source)"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> ids,
                           ParseIndices(id_flag, "prompt_ids", "token ids"));
  prompt.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  return prompt;
}

// The fields generate and chat share: length, sampling, stop strings and
// tokens, and the constraint. INVALID_ARGUMENT for a usage problem.
absl::Status SetSamplingFromFlags(const std::vector<std::string>& stops,
                                  v1::GenerateRequest& request) {
  request.set_max_new_tokens(absl::GetFlag(FLAGS_max_new_tokens));
  v1::SamplingParams* sampling = request.mutable_sampling();
  sampling->set_temperature(
      static_cast<float>(absl::GetFlag(FLAGS_temperature)));
  sampling->set_top_k(absl::GetFlag(FLAGS_top_k));
  sampling->set_top_p(static_cast<float>(absl::GetFlag(FLAGS_top_p)));
  sampling->set_repetition_penalty(
      static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty)));
  if (const std::optional<uint64_t> seed = absl::GetFlag(FLAGS_seed)) {
    sampling->set_seed(*seed);
  }
  for (const std::string& s : stops) request.add_stop(s);
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> stop_ids,
                           ParseIndices(absl::GetFlag(FLAGS_stop_token_ids),
                                        "stop_token_ids", "token ids"));
  request.mutable_stop_token_ids()->Add(stop_ids.begin(), stop_ids.end());
  return SetConstraintFromFlags(*request.mutable_constraint());
}

// Every GenerateRequest field from the flags. INVALID_ARGUMENT for a usage
// problem; the server checks the values' ranges.
absl::StatusOr<v1::GenerateRequest> GenerateRequestFromFlags(
    const std::vector<std::string>& stops) {
  v1::GenerateRequest request;
  TEXTGEN_ASSIGN_OR_RETURN(const std::optional<v1::Prompt> source,
                           SourceFromFlags());
  TEXTGEN_ASSIGN_OR_RETURN(const std::optional<v1::Prompt> prompt,
                           PromptFromFlags("generate", source.has_value()));
  if (source) *request.mutable_source() = *source;
  if (prompt) *request.mutable_prompt() = *prompt;
  TEXTGEN_RETURN_IF_ERROR(SetSamplingFromFlags(stops, request));
  request.set_top_logprobs(absl::GetFlag(FLAGS_top_logprobs));
  if (absl::GetFlag(FLAGS_speculative_tokens) >= 0) {
    request.set_speculative_tokens(absl::GetFlag(FLAGS_speculative_tokens));
  }
  request.set_echo_prompt(absl::GetFlag(FLAGS_echo_prompt));
  request.set_prompt_logprobs(absl::GetFlag(FLAGS_prompt_logprobs));
  const std::vector<std::string>& tap_layers = absl::GetFlag(FLAGS_tap_layers);
  const std::vector<std::string>& tap_heads = absl::GetFlag(FLAGS_tap_heads);
  const std::string& tap_encoding = absl::GetFlag(FLAGS_tap_encoding);
  const int tap_top_k = absl::GetFlag(FLAGS_tap_top_k);
  if (absl::GetFlag(FLAGS_attention_tap) || !tap_layers.empty() ||
      !tap_heads.empty() || !tap_encoding.empty() || tap_top_k != 0) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> layers,
                             ParseIndices(tap_layers, "tap_layers"));
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> heads,
                             ParseIndices(tap_heads, "tap_heads"));
    v1::AttentionTap* tap = request.mutable_attention_tap();
    tap->mutable_layers()->Add(layers.begin(), layers.end());
    tap->mutable_heads()->Add(heads.begin(), heads.end());
    TEXTGEN_RETURN_IF_ERROR(SetEncodingFromFlags(
        tap_encoding, tap_top_k, "tap_encoding", "tap_top_k", *tap));
  }
  return request;
}

int Generate(TextgenClient& client, const std::vector<std::string>& stops) {
  absl::StatusOr<v1::GenerateRequest> made = GenerateRequestFromFlags(stops);
  if (!made.ok()) return UsageError(std::string(made.status().message()));
  const v1::GenerateRequest& request = *made;

  // Ctrl-C: the handler only sets a flag; the client's watcher cancels the
  // call. A second Ctrl-C (SA_RESETHAND) kills the process the usual way.
  struct sigaction action = {};
  action.sa_handler = OnSigint;
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);

  const bool json = absl::GetFlag(FLAGS_json);
  // Plain output is the text alone (the prompt's first when echoed); what
  // text cannot carry needs the table.
  const bool table =
      !json && (request.top_logprobs() > 0 || request.prompt_logprobs() > 0 ||
                request.has_attention_tap());
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first;
  int tokens = 0;
  std::optional<v1::Finished> finished;
  bool ended_with_newline = true;
  bool header_printed = false;
  // A tap row that does not decode: the first one's error, reported at the
  // end (the stream goes on, its other lines are printed).
  absl::Status undecodable;
  const absl::Status status = client.Generate(
      request,
      [&](const v1::GenerateResponse& response) {
        if (json) {
          std::fputs(ToJson(response).c_str(), stdout);
          std::fputc('\n', stdout);
        }
        if (response.has_token()) {
          const v1::Token& token = response.token();
          if (!token.is_prompt()) {
            if (!first) first = std::chrono::steady_clock::now();
            ++tokens;
          }
          const std::string& text = token.text();
          if (table) {
            // After the call is accepted, so that an error leaves stdout empty.
            if (!header_printed) std::fputs(kTokenTableHeader, stdout);
            header_printed = true;
            absl::StatusOr<std::string> lines = TokenTableLines(token);
            if (lines.ok()) {
              std::fputs(lines->c_str(), stdout);
            } else if (undecodable.ok()) {
              undecodable = lines.status();
            }
          } else if (!json) {
            std::fwrite(text.data(), 1, text.size(), stdout);
            if (!text.empty()) ended_with_newline = text.back() == '\n';
          }
        }
        if (response.has_finished()) finished = response.finished();
        std::fflush(stdout);
      },
      &g_interrupted);
  const auto end = std::chrono::steady_clock::now();
  // A terminal gets a final newline; a pipe gets exactly the generated text.
  if (!json && !table && !ended_with_newline && isatty(STDOUT_FILENO))
    std::fputc('\n', stdout);
  std::fflush(stdout);

  const double seconds = std::chrono::duration<double>(end - start).count();
  std::string summary = absl::StrFormat("%d tokens in %.2f s", tokens, seconds);
  if (first) {
    absl::StrAppendFormat(
        &summary, ", first token after %.1f ms",
        1e3 * std::chrono::duration<double>(*first - start).count());
  }
  if (tokens > 0 && seconds > 0)
    absl::StrAppendFormat(&summary, ", %.1f tokens/s", tokens / seconds);
  if (finished) {
    absl::StrAppend(&summary, ", finished: ",
                    absl::AsciiStrToLower(
                        v1::FinishReason_Name(finished->reason())
                            .substr(std::string("FINISH_REASON_").size())),
                    ", seed ", finished->seed());
  }
  if (g_interrupted.load()) {
    std::cerr << "textgen: cancelled: " << summary << "\n";
    return kExitInterrupted;
  }
  if (!status.ok()) return CallError(status, client.target());
  if (!undecodable.ok()) return CallError(undecodable, client.target());
  std::cerr << "textgen: " << summary << "\n";
  return kExitOk;
}

// The DebugAttentionRequest the attention command's flags ask for, but for
// the prompt and source. INVALID_ARGUMENT for a usage problem; the server
// checks the values' ranges.
absl::StatusOr<v1::DebugAttentionRequest> AttentionRequestFromFlags(
    bool maps_wanted) {
  v1::DebugAttentionRequest request;
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> layers,
                           ParseIndices(absl::GetFlag(FLAGS_layer), "layer"));
  TEXTGEN_ASSIGN_OR_RETURN(const std::vector<int> heads,
                           ParseIndices(absl::GetFlag(FLAGS_head), "head"));
  request.mutable_layers()->Add(layers.begin(), layers.end());
  request.mutable_heads()->Add(heads.begin(), heads.end());
  TEXTGEN_RETURN_IF_ERROR(SetEncodingFromFlags(absl::GetFlag(FLAGS_encoding),
                                               absl::GetFlag(FLAGS_top_k),
                                               "encoding", "top_k", request));
  if (const std::string q = absl::GetFlag(FLAGS_queries); !q.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(*request.mutable_queries(),
                             ParseAttentionRange(q, "queries"));
  }
  if (const std::string k = absl::GetFlag(FLAGS_keys); !k.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(*request.mutable_keys(),
                             ParseAttentionRange(k, "keys"));
  }
  if (const std::string o = absl::GetFlag(FLAGS_overview); !o.empty()) {
    TEXTGEN_ASSIGN_OR_RETURN(*request.mutable_overview(),
                             ParseAttentionOverview(o));
  }
  request.set_summary(absl::GetFlag(FLAGS_summary));
  // Summaries alone need no maps on the wire.
  request.set_summary_only(request.summary() && !maps_wanted);
  return request;
}

int Attention(TextgenClient& client) {
  absl::StatusOr<std::optional<v1::Prompt>> source = SourceFromFlags();
  if (!source.ok()) return UsageError(std::string(source.status().message()));
  absl::StatusOr<std::optional<v1::Prompt>> prompt =
      PromptFromFlags("attention", source->has_value());
  if (!prompt.ok()) return UsageError(std::string(prompt.status().message()));
  const std::string out = absl::GetFlag(FLAGS_out);
  const std::string html = absl::GetFlag(FLAGS_html);
  const bool summary = absl::GetFlag(FLAGS_summary);
  if (out.empty() && html.empty() && !summary)
    return UsageError("attention needs --out FILE.png (or --html, --summary)");
  absl::StatusOr<v1::DebugAttentionRequest> request =
      AttentionRequestFromFlags(!out.empty() || !html.empty());
  if (!request.ok()) return UsageError(request.status().message());
  // The page's renderer takes whole maps (it finds a token's row by its
  // position).
  if (!html.empty() && (request->has_queries() || request->has_keys() ||
                        request->has_overview())) {
    return UsageError(
        "--html draws whole maps: drop --queries, --keys and --overview");
  }
  if (prompt->has_value()) *request->mutable_prompt() = **prompt;
  if (source->has_value()) *request->mutable_source() = **source;

  absl::StatusOr<AttentionReply> reply = client.DebugAttention(*request);
  if (!reply.ok()) return CallError(reply.status(), client.target());
  AttentionOutputs outputs;
  outputs.summary = summary;
  outputs.png = out;
  outputs.html = html;
  outputs.heatmap.max_tokens = absl::GetFlag(FLAGS_max_tokens_shown);
  outputs.heatmap.cell_px = absl::GetFlag(FLAGS_cell_px);
  outputs.heatmap.font_path = absl::GetFlag(FLAGS_font);
  return WriteAttentionOutputs(*reply, outputs);
}

int Chat(TextgenClient& client, const RepeatedFlags& repeated) {
  ChatOptions options;
  if (absl::Status sampling =
          SetSamplingFromFlags(repeated.stops, options.generation);
      !sampling.ok()) {
    return UsageError(sampling.message());
  }
  options.system = absl::GetFlag(FLAGS_system);
  options.messages = repeated.messages;
  options.show_prompt = absl::GetFlag(FLAGS_show_prompt);
  options.chat_template_kwargs_json = absl::GetFlag(FLAGS_chat_template_kwargs);
  return RunChat(client, options, std::cin);
}

int Info(TextgenClient& client) {
  absl::StatusOr<v1::ModelInfo> info = client.Info();
  if (!info.ok()) return CallError(info.status(), client.target());
  std::cout << (absl::GetFlag(FLAGS_json) ? ToJson(*info) + "\n"
                                          : info->DebugString());
  return kExitOk;
}

int Tokenize(TextgenClient& client) {
  absl::StatusOr<v1::TokenizeResponse> tokens =
      client.Tokenize(absl::GetFlag(FLAGS_text));
  if (!tokens.ok()) return CallError(tokens.status(), client.target());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ToJson(*tokens) << "\n";
  } else {
    for (const v1::PromptToken& t : tokens->tokens()) {
      std::cout << t.id() << "\t" << DisplayToken(t.text(), 64) << "\n";
    }
  }
  return kExitOk;
}

int Health(TextgenClient& client) {
  absl::StatusOr<std::string> status = client.Health();
  if (!status.ok()) return CallError(status.status(), client.target());
  std::cout << *status << "\n";
  if (*status != "SERVING") {
    std::cerr << "textgen: health: " << *status << "\n";
    return kExitError;
  }
  return kExitOk;
}

int Run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      std::cout << kUsage << "\n";
      return kExitOk;
    }
  }
  RepeatedFlags repeated;
  if (std::optional<std::string> problem = CheckFlags(argc, argv, &repeated)) {
    return UsageError(*problem);
  }
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2)
    return UsageError(
        "no command (generate, attention, info, tokenize, health, chat)");
  if (args.size() > 2)
    return UsageError(absl::StrCat("unexpected argument \"", args[2], "\""));
  const std::string command = args[1];

  ClientOptions options;
  options.target = absl::GetFlag(FLAGS_server);
  options.lb_policy = absl::GetFlag(FLAGS_lb_policy);
  const int64_t timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  if (timeout_ms < 0) return UsageError("--timeout_ms must be >= 0");
  if (timeout_ms > 0) options.timeout = absl::Milliseconds(timeout_ms);
  options.tls = absl::GetFlag(FLAGS_tls);
  options.ca_cert_file = absl::GetFlag(FLAGS_ca_cert);
  options.client_cert_file = absl::GetFlag(FLAGS_client_cert);
  options.client_key_file = absl::GetFlag(FLAGS_client_key);
  options.token = absl::GetFlag(FLAGS_token);
  if (options.token.empty()) {
    if (const char* env = std::getenv("TEXTGEN_TOKEN")) options.token = env;
  }
  absl::StatusOr<TextgenClient> client = TextgenClient::Create(options);
  if (!client.ok()) return UsageError(std::string(client.status().message()));

  if (command == "generate") return Generate(*client, repeated.stops);
  if (command == "attention") return Attention(*client);
  if (command == "info") return Info(*client);
  if (command == "tokenize") return Tokenize(*client);
  if (command == "health") return Health(*client);
  if (command == "chat") return Chat(*client, repeated);
  return UsageError(
      absl::StrCat("unknown command \"", command,
                   "\" (generate, attention, info, tokenize, health, chat)"));
}

}  // namespace
}  // namespace textgen::client

int main(int argc, char** argv) { return textgen::client::Run(argc, argv); }
