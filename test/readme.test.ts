// Proves the README stays true: every catalog code and every configuration variable is documented,
// and the error table lists no code the service does not have.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { configVariables } from "../src/config.ts";
import { errors } from "../src/errors.ts";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

test("every catalog code is in the README's error table with its HTTP status and name, and nothing else is", () => {
  const documented = new Map<number, { status: number; name: string }>();
  for (const match of readme.matchAll(/^\| (\d{4}) \| (\d{3}) \| `(\w+)` \|/gm)) {
    documented.set(Number(match[1]), { status: Number(match[2]), name: match[3] ?? "" });
  }
  for (const [name, def] of Object.entries(errors)) {
    const row = documented.get(def.code);
    assert.ok(row, `error ${def.code} (${name}) is missing from the README's error table`);
    assert.equal(row.status, def.status, `README gives ${def.code} the wrong HTTP status`);
    assert.equal(row.name, name, `README names ${def.code} differently`);
  }
  const codes = new Set(Object.values(errors).map((d) => d.code));
  for (const code of documented.keys())
    assert.ok(codes.has(code), `README documents ${code}, which does not exist`);
});

test("catalog codes are unique and their class matches their HTTP status", () => {
  const codes = Object.values(errors).map((d) => d.code);
  assert.equal(new Set(codes).size, codes.length);
  const classOf: Record<string, number[]> = {
    "1": [400, 408, 413, 415, 431],
    "2": [401, 403, 429],
    "3": [404],
    "4": [409],
    "5": [422],
    "6": [502, 503, 504],
    "9": [500],
  };
  for (const [name, def] of Object.entries(errors)) {
    assert.ok(
      classOf[String(def.code)[0] ?? ""]?.includes(def.status),
      `${name} ${def.code} has status ${def.status}`,
    );
  }
});

test("every environment variable is in the README's configuration table", () => {
  for (const name of configVariables) {
    assert.match(readme, new RegExp(`^\\| \`${name}\` \\|`, "m"), `${name} is missing from the README`);
  }
  const source = readFileSync(new URL("../src/config.ts", import.meta.url), "utf8");
  for (const match of source.matchAll(/env(?:\.|,\s*")([A-Z_]{4,})/g)) {
    assert.ok(
      (configVariables as readonly string[]).includes(match[1] ?? ""),
      `${match[1]} is read but not listed`,
    );
  }
});
