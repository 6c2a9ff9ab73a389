// Proves the catalogs: one key named after each catalog, {key, value} items, the full state and
// SPEI participant lists of domain-mx, and only statuses the card lifecycle uses.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { call, createTenant, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t);
});
after(() => t.close());

type Items = Array<{ key: string; value: string; [extra: string]: string }>;

async function catalog(name: string): Promise<Items> {
  const data = expectOk(
    await call<Record<string, Items>>(t.app, "GET", `/v1/catalogs/${name}`, { token: tenant.token }),
  );
  assert.deepEqual(Object.keys(data), [name]);
  const items = data[name] ?? [];
  for (const item of items) {
    assert.equal(typeof item.key, "string");
    assert.equal(typeof item.value, "string");
  }
  assert.equal(new Set(items.map((i) => i.key)).size, items.length, `${name} has duplicate keys`);
  return items;
}

test("states: the 32 federal entities with their CURP and INEGI codes", async () => {
  const states = await catalog("state");
  assert.equal(states.length, 32);
  assert.ok(states.some((s) => s.key === "CDMX" && s.curp_code === "DF" && s.inegi_code === "09"));
  assert.ok(states.some((s) => s.key === "SAN LUIS POTOSI" && s.curp_code === "SP"));
  assert.deepEqual(
    states.map((s) => s.inegi_code),
    Array.from({ length: 32 }, (_, i) => String(i + 1).padStart(2, "0")),
  );
});

test("transfer institutions: every SPEI participant of domain-mx §7", async () => {
  const institutions = await catalog("transfer_institutions");
  const spec =
    readFileSync(new URL("../../shared/spec/domain-mx.md", import.meta.url), "utf8").split("## 7.")[1] ?? "";
  const rows = [...spec.matchAll(/^\| (\d{4,5}) \| (\d{3}) \| (.+?) \|$/gm)];
  assert.ok(rows.length > 90);
  assert.equal(institutions.length, rows.length);
  for (const [, code, prefix, name] of rows) {
    const item = institutions.find((i) => i.key === code);
    assert.ok(item, `missing ${code}`);
    assert.equal(item.clabe_prefix, prefix);
    assert.equal(item.value, name?.trim());
  }
});

test("gender, marital status, document type and card status", async () => {
  assert.deepEqual(
    (await catalog("gender")).map((i) => i.key),
    ["M", "F", "X"],
  );
  assert.ok((await catalog("marital_status")).some((i) => i.key === "CASADO"));
  const documents = (await catalog("document_type")).map((i) => i.key);
  assert.ok(documents.includes("INE") && documents.includes("CURP"));
  assert.deepEqual(
    (await catalog("card_status")).map((i) => i.key),
    ["NOT_ASSIGNED", "NEED_ACTIVATION", "ACTIVE", "TEMPORARY_INACTIVE", "CANCELED"],
  );
});
