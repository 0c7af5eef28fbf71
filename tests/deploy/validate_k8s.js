// Validates Kubernetes objects against Kubernetes' OpenAPI schemas, offline, with the
// kubernetes-models package (JSON schemas of Kubernetes 1.27 compiled for ajv), installed in
// tests/npm by `npm ci --prefix tests/npm`.
//
//   node validate_k8s.js NPM_DIR OBJECTS.json
//
// OBJECTS.json: a JSON array of objects (the rendered kustomize base). Prints one line per
// object; exits 1 if any object is invalid or of a kind/apiVersion the package does not know.
"use strict";
const path = require("path");
const fs = require("fs");

const [npmDir, objectsPath] = process.argv.slice(2);
if (!npmDir || !objectsPath) {
  console.error("usage: node validate_k8s.js NPM_DIR OBJECTS.json");
  process.exit(2);
}
const modelsDir = path.resolve(npmDir, "node_modules", "kubernetes-models");
if (!fs.existsSync(modelsDir)) {
  console.error(`${modelsDir} is missing: run npm ci --prefix ${npmDir}`);
  process.exit(1);
}
const objects = JSON.parse(fs.readFileSync(objectsPath, "utf8"));
let failures = 0;
for (const object of objects) {
  const name = `${object.kind} ${object.apiVersion} ${object.metadata && object.metadata.name}`;
  // Core group "v1" -> kubernetes-models/v1/Kind; "apps/v1" -> kubernetes-models/apps/v1/Kind.
  const modulePath = path.join(modelsDir, object.apiVersion, `${object.kind}.js`);
  if (!fs.existsSync(modulePath)) {
    console.log(`FAIL ${name}: no schema for this apiVersion and kind`);
    failures++;
    continue;
  }
  const Model = require(modulePath)[object.kind];
  try {
    new Model(object).validate();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message}`);
    failures++;
  }
}
console.log(`${objects.length - failures} valid, ${failures} invalid`);
process.exit(failures === 0 && objects.length > 0 ? 0 : 1);
