// Array parameters: the database reads back exactly the values sent (quotes, backslashes, braces,
// commas, NULL, the text "NULL", JSON), and jsonb arrays sent as one text keep nulls and order.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { jsonbArray } from "../src/db/jsonb-array.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

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
