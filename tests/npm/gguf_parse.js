// Parses GGUF files with @huggingface/gguf, for tests/model/formats/gguf_npm_test.cc to compare textgen's
// reader against: header, every metadata key (type and value) and the tensor table.
//
//   node tests/npm/gguf_parse.js OUT.json FILE.gguf...
//
// OUT.json gets {"versions": {...}, "files": {"FILE.gguf": {"version", "tensor_count",
// "kv_count", "tensor_data_offset", "metadata": [{"key", "type", "sub_type", "value"}],
// "tensors": [{"name", "shape", "dtype", "offset"}]}}}. 64-bit integers become numbers (the
// test files stay far below 2^53; larger ones would be strings and fail the comparison).
'use strict';
const fs = require('fs');
const path = require('path');

const toJson = (v) => {
  if (typeof v === 'bigint') {
    return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  }
  if (Array.isArray(v)) return v.map(toJson);
  return v;
};

async function main() {
  const [output, ...files] = process.argv.slice(2);
  if (!output || files.length === 0) {
    console.error('usage: node gguf_parse.js OUT.json FILE.gguf...');
    process.exit(2);
  }
  const { gguf } = await import('@huggingface/gguf');
  const result = {
    versions: {
      '@huggingface/gguf': require(path.join(__dirname, 'node_modules', '@huggingface',
                                             'gguf', 'package.json')).version,
      node: process.version,
    },
    files: {},
  };
  for (const file of files) {
    const r = await gguf(file, { allowLocalFile: true, typedMetadata: true });
    const metadata = [];
    for (const [key, entry] of Object.entries(r.typedMetadata)) {
      if (key === 'version' || key === 'tensor_count' || key === 'kv_count') continue;
      metadata.push({ key, type: entry.type, sub_type: entry.subType ?? null,
                      value: toJson(entry.value) });
    }
    result.files[file] = {
      little_endian: r.littleEndian,
      version: toJson(r.typedMetadata.version.value),
      tensor_count: toJson(r.typedMetadata.tensor_count.value),
      kv_count: toJson(r.typedMetadata.kv_count.value),
      tensor_data_offset: toJson(r.tensorDataOffset),
      metadata,
      tensors: r.tensorInfos.map((t) => ({
        name: t.name, shape: toJson(t.shape), dtype: t.dtype, offset: toJson(t.offset) })),
    };
  }
  fs.writeFileSync(output, JSON.stringify(result));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
