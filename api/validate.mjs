// Validates Pollux's contract documents with the ecosystem's own tools:
// the AsyncAPI document with the AsyncAPI parser (its Spectral ruleset),
// and every JSON Schema with Ajv (draft 2020-12, formats on): each schema
// compiles, its cross-file $refs resolve through the $ids, and each of its
// examples is valid. (The OpenAPI document is linted by `redocly lint`.)
// Usage: node validate.mjs   (from api/); exit status 1 on any problem.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Parser, fromFile } from '@asyncapi/parser';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

let problems = 0;
const report = (where, msg) => { problems++; console.error(`${where}: ${msg}`); };

// AsyncAPI: errors and warnings both count.
const parser = new Parser();
const { diagnostics } = await fromFile(parser, 'asyncapi.yaml').parse();
for (const d of diagnostics) {
  if (d.severity <= 1) report(`asyncapi.yaml ${d.path.join('.')}`, `${d.code}: ${d.message}`);
}

// JSON Schemas.
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);
const schemas = readdirSync('schemas').filter((f) => f.endsWith('.json')).sort();
const loaded = [];
for (const f of schemas) {
  const s = JSON.parse(readFileSync(join('schemas', f), 'utf8'));
  if (!s.$id) { report(`schemas/${f}`, 'no $id: other documents cannot $ref it'); continue; }
  try { ajv.addSchema(s); loaded.push([f, s]); } catch (e) { report(`schemas/${f}`, e.message); }
}
let examples = 0;
for (const [f, s] of loaded) {
  let validate;
  try { validate = ajv.getSchema(s.$id); } catch (e) { report(`schemas/${f}`, e.message); continue; }
  if (!validate) { report(`schemas/${f}`, `${s.$id} does not compile`); continue; }
  (s.examples ?? []).forEach((ex, i) => {
    examples++;
    if (!validate(ex)) report(`schemas/${f} example ${i}`, ajv.errorsText(validate.errors));
  });
}
if (problems > 0) process.exit(1);
console.log(`asyncapi.yaml valid; ${loaded.length} schemas compile, their $refs resolve, ${examples} examples valid`);
