// Proves both engines return int8 as bigint (money never becomes a float) and timestamps as Date.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

test("int8 is bigint, timestamptz is Date, jsonb is an object", async () => {
  const { rows } = await sql<{ a: unknown; b: unknown; c: unknown; d: unknown }>`
    select 9007199254740993::int8 as a, count(*) as b, now() as c, jsonb_build_object('x', 1) as d`.execute(
    t.ctx.db,
  );
  const row = rows[0];
  assert.equal(row?.a, 9007199254740993n);
  assert.equal(typeof row?.b, "bigint");
  assert.ok(row?.c instanceof Date);
  assert.deepEqual(row?.d, { x: 1 });
});
