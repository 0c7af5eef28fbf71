// One completion through the official `openai` SDK (pinned in package.json), for
// tests/server/http/http_test.py and chat_test.py to compare with what gRPC Generate
// returns.
//
//   node openai_completion.js BASE_URL API_KEY 'REQUEST_JSON' [completions|chat|retrieve]
//
// The last argument picks the SDK call: client.completions.create (the default),
// client.chat.completions.create, or client.models.retrieve(REQUEST.model).
// Prints one JSON line: {"chunks": [...]} (stream: true, every chunk as the SDK parsed
// it, with `ms`: when it arrived, from the request's start), {"response": {...}}, or
// {"error": {"status", "error", "message"}} for an API error (the SDK's APIError; `error`
// is the body's "error" object).
'use strict';

const { OpenAI, APIError } = require('openai');

async function main() {
  const [baseURL, apiKey, requestJson, endpoint = 'completions'] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
  const api = endpoint === 'chat' ? client.chat.completions : client.completions;
  const request = JSON.parse(requestJson);
  const start = Date.now();
  try {
    if (endpoint === 'retrieve') {
      console.log(JSON.stringify({ response: await client.models.retrieve(request.model) }));
    } else if (request.stream) {
      const stream = await api.create(request);
      const chunks = [];
      for await (const chunk of stream) chunks.push({ ...chunk, ms: Date.now() - start });
      console.log(JSON.stringify({ chunks }));
    } else {
      console.log(JSON.stringify({ response: await api.create(request) }));
    }
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    console.log(JSON.stringify({ error: { status: e.status, error: e.error, message: e.message } }));
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
