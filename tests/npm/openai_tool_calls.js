// Tool calls through the official `openai` SDK: N chat.completions.create calls
// with `tools` and a tool_choice, each answer's tool_calls checked against the
// called function's `parameters` schema with ajv (JSON Schema 2020-12, formats),
// then one streamed call whose delta.tool_calls must rebuild a valid call.
//
//   node openai_tool_calls.js BASE_URL 'REQUEST_JSON' N
//
// REQUEST_JSON is the request (messages, tools, tool_choice, max_tokens, ...);
// request i is sent with seed i. Prints one JSON line: {"n", "with_calls",
// "valid", "invalid": [{seed, reason}], "finish_reasons": {...}, "stream": {...}}.
'use strict';

const { OpenAI } = require('openai');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats');

async function main() {
  const [baseURL, requestJson, countText] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 300000 });
  const request = JSON.parse(requestJson);
  const ajv = new Ajv2020({ strict: false });
  addFormats(ajv);
  const validators = {};
  for (const tool of request.tools) {
    validators[tool.function.name] = ajv.compile(tool.function.parameters || { type: 'object' });
  }
  const check = (call) => {
    const validate = validators[call.function.name];
    if (!validate) return `unknown function ${call.function.name}`;
    let args;
    try { args = JSON.parse(call.function.arguments); } catch (e) { return `arguments not JSON: ${e.message}`; }
    if (!validate(args)) return ajv.errorsText(validate.errors);
    return null;
  };
  const out = { n: Number(countText), with_calls: 0, valid: 0, invalid: [], finish_reasons: {} };
  for (let seed = 0; seed < out.n; ++seed) {
    const response = await client.chat.completions.create({ ...request, seed });
    const choice = response.choices[0];
    out.finish_reasons[choice.finish_reason] = (out.finish_reasons[choice.finish_reason] || 0) + 1;
    const calls = choice.message.tool_calls || [];
    if (calls.length === 0) {
      out.invalid.push({ seed, reason: `no tool_calls (finish ${choice.finish_reason})` });
      continue;
    }
    ++out.with_calls;
    const reasons = calls.map(check).filter((r) => r !== null);
    if (reasons.length === 0) ++out.valid; else out.invalid.push({ seed, reason: reasons.join('; ') });
  }
  // Streamed: the deltas' calls, put together, are a valid call.
  const stream = await client.chat.completions.create({ ...request, seed: 1000, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.finish_reason) finish = choice.finish_reason;
    for (const d of (choice.delta && choice.delta.tool_calls) || []) {
      if (!calls[d.index]) calls[d.index] = { id: d.id, type: d.type, function: { name: '', arguments: '' } };
      if (d.function && d.function.name) calls[d.index].function.name += d.function.name;
      if (d.function && d.function.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
  }
  out.stream = { calls: calls.length, finish, invalid: calls.map(check).filter((r) => r !== null) };
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
