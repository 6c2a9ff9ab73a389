// Proves the catalogs: one key named after each catalog, {key, value} items, the full state and
// SPEI participant lists of domain-mx, only statuses the card lifecycle uses, and the ISO 18245
// merchant category codes and their groups as the domain module holds them, behind a token.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { groupsOfMcc, mccDescription, mccGroupKeys, mccInGroup } from "../src/domain/mcc.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
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

type Mcc = { key: string; value: string; first: string; last: string; groups: string[] };
type MccGroup = { key: string; value: string; codes: string[]; ranges: { first: string; last: string }[] };

test("mcc: every code with its description and groups, brand-specific ranges as one entry each", async () => {
  const { mcc } = expectOk(
    await call<{ mcc: Mcc[] }>(t.app, "GET", "/v1/catalogs/mcc", { token: tenant.token }),
  );
  assert.ok(mcc.length > 250);
  assert.equal(new Set(mcc.map((item) => item.key)).size, mcc.length);
  for (const item of mcc) {
    assert.deepEqual(Object.keys(item).sort(), ["first", "groups", "key", "last", "value"]);
    assert.equal(item.key, item.first === item.last ? item.first : `${item.first}-${item.last}`);
    // A range's codes share its description and its groups, code by code.
    for (let n = Number(item.first); n <= Number(item.last); n++) {
      const code = String(n).padStart(4, "0");
      assert.equal(mccDescription(code), item.value, code);
      assert.deepEqual(groupsOfMcc(code), item.groups, code);
    }
  }
  const byKey = new Map(mcc.map((item) => [item.key, item]));
  assert.deepEqual(byKey.get("5812")?.groups, ["restaurants"]);
  assert.deepEqual(byKey.get("6011")?.groups, ["cash"]);
  assert.deepEqual(byKey.get("3000-3299")?.groups, ["airlines", "travel"]);
  assert.ok(byKey.has("3351-3441") && byKey.has("3501-3999"));
});

test("mcc_groups: each group's key, description, codes and ranges, as the authorization path reads them", async () => {
  const { mcc_groups: groups } = expectOk(
    await call<{ mcc_groups: MccGroup[] }>(t.app, "GET", "/v1/catalogs/mcc_groups", { token: tenant.token }),
  );
  assert.deepEqual(
    groups.map((g) => g.key),
    mccGroupKeys,
  );
  for (const group of groups) {
    assert.deepEqual(Object.keys(group).sort(), ["codes", "key", "ranges", "value"]);
    assert.ok(group.value.length > 0);
    for (const code of group.codes) assert.ok(mccInGroup(code, group.key), `${code} in ${group.key}`);
    for (const range of group.ranges) {
      assert.ok(range.first < range.last);
      assert.ok(mccInGroup(range.first, group.key) && mccInGroup(range.last, group.key));
    }
  }
  const gambling = groups.find((g) => g.key === "gambling");
  for (const code of ["7800", "7801", "7802", "7995", "9406"]) assert.ok(gambling?.codes.includes(code));
  assert.deepEqual(groups.find((g) => g.key === "government")?.ranges, [{ first: "9211", last: "9405" }]);
});

test("mcc catalogs need a token, and the OpenAPI document shows an example of each", async () => {
  for (const path of ["/v1/catalogs/mcc", "/v1/catalogs/mcc_groups"])
    expectError(await call(t.app, "GET", path), 2001, 401);
  const spec = (await t.app.inject({ url: "/openapi.json" })).json() as {
    paths: Record<string, { get: { operationId: string; responses: Record<string, unknown> } }>;
  };
  for (const [path, name] of [
    ["/v1/catalogs/mcc", "mcc"],
    ["/v1/catalogs/mcc_groups", "mcc_groups"],
  ] as const) {
    const response = spec.paths[path]?.get.responses["200"] as {
      content: {
        "application/json": { schema: { properties: { data: { examples: Record<string, unknown[]>[] } } } };
      };
    };
    const example = response.content["application/json"].schema.properties.data.examples[0];
    assert.ok((example?.[name]?.length ?? 0) > 0, `${path} has no example`);
  }
});
