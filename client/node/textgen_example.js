#!/usr/bin/env node
// textgen from Node.js: the model's facts (GetModelInfo), then a generation streamed token by
// token (Generate), with @grpc/grpc-js and @grpc/proto-loader reading
// proto/textgen/v1/textgen.proto directly (no generated code).
//
//   npm ci --prefix client/node
//   node client/node/textgen_example.js --target localhost:50051 --prompt "ROMEO:"
//   node client/node/textgen_example.js --prompt_ids 30,27,25 --max_new_tokens 20 --json
//   node client/node/textgen_example.js --request '{"top_logprobs": 3, "echo_prompt": true}'
//   node client/node/textgen_example.js --chat "What is 2 + 3?" --system "Answer briefly."
//   node client/node/textgen_example.js --source "3rd of March 99"   # encoder-decoder model
//
// Flags: --target HOST:PORT (default localhost:50051), --prompt TEXT (default "ROMEO:") or
// --prompt_ids ID,ID,..., --chat TEXT (a user message, sent as a conversation that the
// model's chat template renders; --system TEXT adds a system message), --source TEXT (an
// encoder-decoder model's source; the prompt is then optional: none unless given),
// --max_new_tokens N (default 100), --request JSON (any GenerateRequest fields, by their
// .proto names, laid over the request the other flags build), --timeout_ms N (default
// 60000), --json (one JSON object per line: {"model_info": ...}, then every stream message as
// received).
// Exit codes: 0 ok, 1 an RPC failed ("textgen_example: <STATUS>: <message>") or --chat with a
// model that has no chat template, 2 usage.
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = path.resolve(__dirname, '..', '..', 'proto');

// proto-loader's defaults do not match the .proto: fields would be camelCase (so a request
// written {max_new_tokens: 5} is silently ignored), enums numbers and 64-bit integers lossy
// JS numbers. These options keep the API as the .proto spells it.
const LOADER_OPTIONS = {
  keepCase: true,  // field names as written: max_new_tokens, top_logprobs, is_prompt
  enums: String,   // FINISH_REASON_LENGTH, not 1
  longs: String,   // uint64 seed and int64 num_parameters as decimal strings, exact
  defaults: true,  // unset fields read as their defaults (0, "", false, [])
  oneofs: true,    // a virtual field names the oneof member set: message.event === 'token'
  includeDirs: [PROTO_ROOT],
};

function usage(message) {
  process.stderr.write(`textgen_example: ${message}\n`);
  process.exit(2);
}

function parseFlags(argv) {
  const flags = {
    target: 'localhost:50051', prompt: null, prompt_ids: null, chat: null, system: null,
    source: null, max_new_tokens: '100', request: null, timeout_ms: '60000', json: false,
  };
  for (let i = 0; i < argv.length; ++i) {
    let arg = argv[i];
    if (!arg.startsWith('--')) usage(`unexpected argument "${arg}"`);
    arg = arg.slice(2);
    let value = null;
    const eq = arg.indexOf('=');
    if (eq >= 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (!(arg in flags)) usage(`unknown flag --${arg}`);
    if (arg === 'json') {
      flags.json = value === null || value === 'true';
      continue;
    }
    if (value === null) {
      if (i + 1 >= argv.length) usage(`flag --${arg} needs a value`);
      value = argv[++i];
    }
    flags[arg] = value;
  }
  return flags;
}

function nonNegativeInt(text, flag) {
  if (!/^\d+$/.test(text)) usage(`--${flag} takes an integer >= 0, got "${text}"`);
  return Number(text);
}

function parseExtra(text) {
  let extra;
  try {
    extra = JSON.parse(text);
  } catch (e) {
    usage(`--request is not JSON: ${e.message}`);
  }
  if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) {
    usage('--request takes a JSON object of GenerateRequest fields');
  }
  return extra;
}

// The prompt the flags give: --prompt, --prompt_ids or --chat (at most one); null for none.
function promptFromFlags(flags) {
  const given = ['prompt', 'prompt_ids', 'chat'].filter((name) => flags[name] !== null);
  if (given.length > 1) {
    usage(`--${given[0]} and --${given[1]} exclude each other: give one`);
  }
  if (flags.system !== null && flags.chat === null) usage('--system goes with --chat');
  if (flags.chat !== null) {
    if (flags.source !== null) usage('--chat and --source exclude each other: give one');
    const messages = flags.system !== null ? [{role: 'system', content: flags.system}] : [];
    messages.push({role: 'user', content: flags.chat});
    return {conversation: {messages}};
  }
  if (flags.prompt_ids !== null) {
    return {token_ids: {ids: flags.prompt_ids.split(',').map((id) => nonNegativeInt(id, 'prompt_ids'))}};
  }
  return flags.prompt !== null ? {text: flags.prompt} : null;
}

function buildRequest(flags) {
  const extra = flags.request !== null ? parseExtra(flags.request) : {};
  const request = {max_new_tokens: nonNegativeInt(flags.max_new_tokens, 'max_new_tokens')};
  const prompt = promptFromFlags(flags);
  if (prompt !== null) {
    request.prompt = prompt;
  } else if (flags.source === null && !('source' in extra) && !('prompt' in extra)) {
    // An encoder-decoder model (a source) needs no prompt: absent, it starts from its BOS.
    request.prompt = {text: 'ROMEO:'};
  }
  if (flags.source !== null) request.source = {text: flags.source};
  Object.assign(request, extra);
  return request;
}

function rpcError(error) {
  process.stderr.write(`textgen_example: ${grpc.status[error.code]}: ${error.details}\n`);
  process.exit(1);
}

function main() {
  const flags = parseFlags(process.argv.slice(2));
  const request = buildRequest(flags);
  const timeoutMs = nonNegativeInt(flags.timeout_ms, 'timeout_ms');
  const deadline = () => new Date(Date.now() + timeoutMs);

  const definition = protoLoader.loadSync('textgen/v1/textgen.proto', LOADER_OPTIONS);
  const textgen = grpc.loadPackageDefinition(definition).textgen.v1;
  const client = new textgen.TextGeneration(flags.target, grpc.credentials.createInsecure());

  const conversation = request.prompt && request.prompt.conversation;
  client.GetModelInfo({}, {deadline: deadline()}, (error, info) => {
    if (error) rpcError(error);
    if (conversation && !info.chat) {
      process.stderr.write(
          `textgen_example: the model ${info.name} has no chat template, so it cannot chat ` +
          '(start textgen_server with --chat_template FILE.jinja)\n');
      process.exit(1);
    }
    if (flags.json) {
      process.stdout.write(JSON.stringify({model_info: info}) + '\n');
    } else {
      process.stdout.write(
          `model: ${info.name} (${info.architecture}, ${info.num_layers} layers x ` +
          `${info.num_heads} heads, ${info.num_parameters} parameters, ` +
          `${info.tokenizer} tokenizer)\n---\n`);
      if (request.source && request.source.text !== undefined) {
        process.stdout.write(`source: ${request.source.text}\n`);
      }
      if (conversation) {
        for (const m of conversation.messages || []) {
          if (m.role !== 'assistant') process.stdout.write(`${m.role}: ${m.content}\n`);
        }
        process.stdout.write('assistant: ');
      } else if (request.prompt && request.prompt.text !== undefined) {
        process.stdout.write(request.prompt.text);
      }
    }

    // One message per token as it is made, then one `finished`.
    const call = client.Generate(request, {deadline: deadline()});
    let finished = null;
    call.on('data', (message) => {
      if (flags.json) {
        process.stdout.write(JSON.stringify(message) + '\n');
      } else if (message.event === 'token' && !(conversation && message.token.is_prompt)) {
        process.stdout.write(message.token.text);
      }
      if (message.event === 'finished') finished = message.finished;
    });
    call.on('error', rpcError);
    call.on('end', () => {
      if (!flags.json && finished !== null) {
        const counts = conversation
          ? `${finished.usage.prompt_tokens} prompt + ${finished.usage.generated_tokens} ` +
            'generated tokens'
          : `${finished.usage.generated_tokens} tokens`;
        process.stdout.write(`\n--- ${counts}, ${finished.reason}, seed ${finished.seed}\n`);
      }
      client.close();
    });
  });
}

main();
