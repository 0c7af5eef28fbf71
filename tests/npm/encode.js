// Encodes strings with independent GPT-2 BPE implementations from the npm registry, for
// tests/model/text/gpt2_bpe_reference_test.cc to compare textgen's encoder against.
//
//   node tests/npm/encode.js IN.json OUT.json
//
// IN.json is a JSON array of strings. OUT.json gets {"js_tiktoken": [[ids...], ...],
// "gpt_3_encoder": [[ids...], ...], "versions": {...}}, one id list per input string.
// Special tokens are ordinary text here ("<|endoftext|>" is encoded as its characters), as
// textgen's Encode does: js-tiktoken would otherwise throw on them.
'use strict';
const fs = require('fs');
const path = require('path');
const { getEncoding } = require('js-tiktoken');
const gpt3 = require('gpt-3-encoder');

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node encode.js IN.json OUT.json');
  process.exit(2);
}
const strings = JSON.parse(fs.readFileSync(input, 'utf8'));
const tiktoken = getEncoding('gpt2');
const version = (name) =>
  require(path.join(__dirname, 'node_modules', name, 'package.json')).version;

const result = {
  versions: {
    'js-tiktoken': version('js-tiktoken'),
    'gpt-3-encoder': version('gpt-3-encoder'),
    node: process.version,
  },
  js_tiktoken: strings.map((s) => tiktoken.encode(s, [], [])),
  // gpt-3-encoder is quadratic in a word's length; the strings here are short.
  gpt_3_encoder: strings.map((s) => gpt3.encode(s)),
};
fs.writeFileSync(output, JSON.stringify(result));
