// Writes a TypeScript file that holds a Grafana dashboard JSON as `(...) satisfies Dashboard`,
// for `tsc --noEmit` to check it against @grafana/schema's types (which are TypeScript only: the
// package has no JSON schema). The schema types some fields as string enums, which a plain
// string does not satisfy; those values become the enum members first.
//   node grafana_dashboard_ts.mjs DASHBOARD.json OUT.ts
import { readFileSync, writeFileSync } from "node:fs";
import * as schema from "@grafana/schema";

// The string enums of @grafana/schema a dashboard's JSON may carry, by where they are (in a
// panel's fieldConfig; a panel's own options are untyped and stay strings).
const stringEnums = [
  [/fieldConfig\..*\.color\.mode$/, "FieldColorModeId"],
  [/fieldConfig\..*\.thresholds\.mode$/, "ThresholdsMode"],
  [/fieldConfig\..*\.mappings\[\]\.type$/, "MappingType"],
];

const used = new Set();
// The value as TypeScript source; `path` is where it is, e.g. "panels[].fieldConfig.defaults".
function toTs(value, path) {
  if (Array.isArray(value)) {
    return `[${value.map((v) => toTs(v, `${path}[]`)).join(", ")}]`;
  }
  if (value !== null && typeof value === "object") {
    const fields = Object.entries(value).map(([k, v]) => {
      return `${JSON.stringify(k)}: ${toTs(v, `${path}.${k}`)}`;
    });
    return `{${fields.join(", ")}}`;
  }
  const enumName = stringEnums.find(([where]) => where.test(path))?.[1];
  if (enumName && typeof value === "string") {
    const member = Object.entries(schema[enumName]).find(([, v]) => v === value)?.[0];
    if (!member) {
      throw new Error(`${path}: "${value}" is no member of ${enumName}`);
    }
    used.add(enumName);
    return `${enumName}.${member}`;
  }
  return JSON.stringify(value);
}

const [input, output] = process.argv.slice(2);
const body = toTs(JSON.parse(readFileSync(input, "utf8")), "");
const imports = ["type Dashboard", ...used].join(", ");
writeFileSync(output, `import { ${imports} } from "@grafana/schema";\n\n` +
                      `export const dashboard = ${body} satisfies Dashboard;\n`);
