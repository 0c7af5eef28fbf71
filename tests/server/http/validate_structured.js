// Judges structured outputs with engines independent of textgen's (issue 31's validity test,
// tests/server/http/structured_output_test.py):
//   {"schema": S, "output": TEXT}    JSON.parse(TEXT), then ajv (draft 2020-12, ajv-formats)
//                                    validates it against S;
//   {"pattern": P, "output": TEXT}   JavaScript's RegExp engine: new RegExp("^(?:" + P + ")$",
//                                    "u") tests TEXT as a whole (code points, not bytes).
// Usage: node validate_structured.js ITEMS.json  (a JSON array of such items). Prints a JSON
// array of verdicts in the same order, {"ok": true} or {"ok": false, "error": "..."}; exit 0
// unless the file cannot be read. A schema ajv cannot compile or a pattern RegExp refuses is a
// verdict with ok false (the caller decides), never a crash.
"use strict";
const fs = require("fs");
const path = require("path");

const modules = path.join(__dirname, "..", "..", "npm", "node_modules");
const Ajv2020 = require(path.join(modules, "ajv", "dist", "2020")).default;
const addFormats = require(path.join(modules, "ajv-formats")).default;

// strict: false because real schemas carry annotations ajv's strict mode frowns on (titles in
// odd places, "strict" hints); formats are still checked (validateFormats defaults to true).
const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats(ajv);

const validators = new Map();  // One compile per distinct schema text.
function validatorFor(schema) {
  const key = JSON.stringify(schema);
  if (!validators.has(key)) {
    try {
      validators.set(key, { validate: ajv.compile(schema) });
    } catch (e) {
      validators.set(key, { error: "ajv cannot compile the schema: " + e.message });
    }
  }
  return validators.get(key);
}

function judge(item) {
  if ("schema" in item) {
    let value;
    try {
      value = JSON.parse(item.output);
    } catch (e) {
      return { ok: false, error: "JSON.parse: " + e.message };
    }
    const v = validatorFor(item.schema);
    if (v.error) return { ok: false, error: v.error };
    if (v.validate(value)) return { ok: true };
    return { ok: false, error: "ajv: " + ajv.errorsText(v.validate.errors) };
  }
  if ("pattern" in item) {
    let re;
    try {
      re = new RegExp("^(?:" + item.pattern + ")$", "u");
    } catch (e) {
      return { ok: false, error: "RegExp refuses the pattern: " + e.message };
    }
    return re.test(item.output) ? { ok: true }
                                : { ok: false, error: "RegExp does not match the whole output" };
  }
  return { ok: false, error: "an item needs a schema or a pattern" };
}

const items = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
process.stdout.write(JSON.stringify(items.map(judge)) + "\n");
