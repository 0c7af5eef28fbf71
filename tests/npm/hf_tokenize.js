// Encodes and decodes strings with Hugging Face's own tokenizers library (the npm package
// `tokenizers`: Rust bindings, the native binary ships inside the package), for
// tests/model/text/hf_tokenizer_reference_test.cc to compare textgen's tokenizer.json support against.
//
//   node tests/npm/hf_tokenize.js TOKENIZER.json IN.json OUT.json [--add_special_tokens]
//
// IN.json is a JSON array of strings. OUT.json gets {"ids": [[...], ...], "decoded": [...],
// "versions": {...}}: per string, the ids of encode(s, addSpecialTokens=false) (textgen's
// Encode adds no BOS either; added and special tokens inside the text are matched, as the
// library always does), or with --add_special_tokens those of addSpecialTokens=true (the
// post-processor's BOS, as a prompt gets it), and decode(ids, skipSpecialTokens=true)
// (textgen's special tokens decode to nothing, as servers show text).
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

async function main() {
  const [tokenizerPath, input, output, flag] = process.argv.slice(2);
  const addSpecialTokens = flag === '--add_special_tokens';
  if (!tokenizerPath || !input || !output) {
    console.error('usage: node hf_tokenize.js TOKENIZER.json IN.json OUT.json [--add_special_tokens]');
    process.exit(2);
  }
  const strings = JSON.parse(fs.readFileSync(input, 'utf8'));
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const ids = [];
  const decoded = [];
  for (const s of strings) {
    const encoding = await tokenizer.encode(s, null, { addSpecialTokens });
    const row = Array.from(encoding.getIds());
    ids.push(row);
    decoded.push(await tokenizer.decode(row, true));
  }
  const version = (name) =>
    require(path.join(__dirname, 'node_modules', name, 'package.json')).version;
  fs.writeFileSync(
    output,
    JSON.stringify({ versions: { tokenizers: version('tokenizers'), node: process.version }, ids, decoded }),
  );
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
