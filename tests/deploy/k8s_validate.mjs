// Validates rendered Kubernetes manifests offline, with no cluster:
//  - built-in kinds: types, required fields and enums with kubernetes-models@4, and unknown
//    fields by walking each object over @kubernetes/client-node's field tables (the API's own
//    field names, generated from its OpenAPI);
//  - PodMonitor and PrometheusRule: their CRD schemas with @kubernetes-models/prometheus-operator;
//    unknown fields there are left to tsc (this writes a .ts file of them, see TS_OUT).
// Run from a folder whose node_modules holds those packages (tests/deploy/k8s_render_check.sh).
//   node k8s_validate.mjs TS_OUT FILE.yaml...
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const serializer = await import("@kubernetes/client-node/dist/gen/models/ObjectSerializer.js");
const crdTypes = {
  "monitoring.coreos.com/v1/PodMonitor": "IPodMonitor",
  "monitoring.coreos.com/v1/PrometheusRule": "IPrometheusRule",
};

const errors = [];
const tsObjects = [];

// Fields of `value` that the API type `type` does not have, as paths below `path`.
function unknownFields(value, type, path) {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    return (value ?? []).flatMap((v, i) => unknownFields(v, array[1], `${path}[${i}]`));
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    return Object.entries(value ?? {}).flatMap(([k, v]) => unknownFields(v, map[1], `${path}.${k}`));
  }
  const model = serializer[type];
  if (!model?.getAttributeTypeMap || value === null || typeof value !== "object") {
    return [];  // a scalar (or int-or-string, quantity): kubernetes-models checks its type
  }
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(value).flatMap(([k, v]) =>
    fields.has(k) ? unknownFields(v, fields.get(k), `${path}.${k}`) : [`${path}.${k}`]);
}

async function validate(obj, where) {
  const { apiVersion, kind } = obj;
  const name = `${where}: ${kind} ${obj.metadata?.name}`;
  const key = `${apiVersion}/${kind}`;
  if (crdTypes[key]) {
    const mod = await import(`@kubernetes-models/prometheus-operator/${apiVersion}`);
    new mod[kind](obj).validate();
    tsObjects.push({ type: crdTypes[key], apiVersion, obj });
    return;
  }
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const mod = await import(`kubernetes-models/${group ? group + "/" : ""}${version}/${kind}`);
  new mod[kind](obj).validate();
  const table = `${version[0].toUpperCase()}${version.slice(1)}${kind}`;  // v1 Service -> V1Service
  if (!serializer[table]) {
    throw new Error(`no field table ${table} in @kubernetes/client-node`);
  }
  for (const field of unknownFields(obj, table, kind)) {
    errors.push(`${name}: unknown field ${field}`);
  }
}

const [tsOut, ...files] = process.argv.slice(2);
let count = 0;
for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"), { uniqueKeys: true })) {
    if (doc.errors.length) {
      errors.push(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    try {
      await validate(obj, file);
      count++;
    } catch (e) {
      errors.push(`${file}: ${obj.kind} ${obj.metadata?.name}: ${e.message}`);
    }
  }
}

// tsc rejects a field that the CRD's type lacks (excess property check on object literals).
const imports = [...new Set(tsObjects.map((o) => `${o.apiVersion}|${o.type}`))].map((k) => {
  const [apiVersion, type] = k.split("|");
  return `import type { ${type} } from "@kubernetes-models/prometheus-operator/${apiVersion}";`;
});
const body = tsObjects.map((o, i) => `export const o${i} = ${JSON.stringify(o.obj, null, 2)} satisfies ${o.type};`);
writeFileSync(tsOut, [...imports, ...body].join("\n") + "\n");

if (errors.length) {
  console.error(errors.join("\n"));
  process.exit(1);
}
console.log(`${count} objects valid (${tsObjects.length} custom resources also go to tsc)`);
