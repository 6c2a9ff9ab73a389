// Array parameters: the literal Emisor writes is node-postgres's own, and the database reads back
// exactly the values sent (quotes, backslashes, braces, commas, NULL, the text "NULL", JSON).
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { arrayLiteral, jsonbArray, withArrayLiterals } from "../src/db/array-literal.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

// node-postgres's own writer (not in its type declarations).
const { prepareValue } = createRequire(import.meta.url)("pg/lib/utils.js") as {
  prepareValue: (value: unknown) => unknown;
};

const awkward = [
  "plain",
  "",
  'a "quoted" word',
  'back\\slash \\" both',
  "{braces}, commas, and spaces",
  "NULL",
  null,
  "ñandú 🚀 \u00e9",
  JSON.stringify({ name: 'Café "El Ñ"', path: "C:\\tmp", list: [1, "x"] }),
];

test("the literal is the one node-postgres writes, for every kind of element it takes", () => {
  const cases: unknown[][] = [
    awkward,
    [],
    [1, 2.5, -3],
    [9007199254740993n, 0n, -12n],
    [true, false, null],
    ["0190a7c2-1c1e-7000-8000-000000000001", undefined],
  ];
  for (const values of cases)
    assert.equal(
      arrayLiteral(values),
      prepareValue(values),
      JSON.stringify(values, (_, v) => (typeof v === "bigint" ? String(v) : v)),
    );
});

test("arrays of other elements are left to node-postgres", () => {
  assert.equal(arrayLiteral([new Date(0)]), undefined);
  assert.equal(arrayLiteral([[1, 2]]), undefined);
  assert.equal(arrayLiteral([Buffer.from("x")]), undefined);
  const values = [1, [new Date(0)], ["a"]];
  assert.deepEqual(withArrayLiterals(values), [1, [new Date(0)], '{"a"}']);
  const untouched = ["no arrays", 2];
  assert.equal(withArrayLiterals(untouched), untouched);
});

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

test("the database reads back exactly the text, jsonb and bigint arrays sent", async () => {
  const json = awkward.filter((text): text is string => !!text?.startsWith("{") && text.includes('"'));
  const { rows } = await sql<{ texts: (string | null)[]; docs: unknown[]; amounts: string[] }>`
    select ${awkward}::text[] as texts, ${json}::jsonb[] as docs,
      (${[9007199254740993n, -1n]}::bigint[])::text[] as amounts`.execute(t.ctx.db);
  assert.deepEqual(rows[0]?.texts, awkward);
  assert.deepEqual(
    rows[0]?.docs,
    json.map((text) => JSON.parse(text)),
  );
  assert.deepEqual(rows[0]?.amounts, ["9007199254740993", "-1"]);
});

test("jsonb arrays sent as one text come back as the documents, nulls and order kept", async () => {
  const docs = [
    JSON.stringify({ name: 'Café "El Ñ"', path: "C:\\tmp\\x", tab: "a\tb\u001fc", list: [1, "x", null] }),
    null,
    JSON.stringify("just a string, with , and { }"),
    JSON.stringify([]),
    null,
  ];
  for (const sent of [docs, [], [null], [docs[0] ?? null]]) {
    const { rows } = await sql<{ docs: unknown[] | null; n: number }>`
      select ${jsonbArray(sent)} as docs, cardinality(${jsonbArray(sent)}) as n`.execute(t.ctx.db);
    assert.equal(rows[0]?.n, sent.length);
    assert.deepEqual(
      rows[0]?.docs ?? [],
      sent.map((doc) => (doc === null ? null : JSON.parse(doc))),
    );
  }
});
