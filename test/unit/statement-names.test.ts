// Which statements get a prepared-statement name (src/db/database.ts): data statements with
// parameters, each text one stable name, within the bound; never scripts, long texts or a name
// reused for another text.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StatementNames } from "../../src/db/database.ts";

test("a data statement with parameters keeps one name; other texts get others", () => {
  const names = new StatementNames(10);
  const select = names.of("select * from cards where id = $1", ["x"]);
  assert.ok(select);
  assert.equal(names.of("select * from cards where id = $1", ["y"]), select);
  const update = names.of("  WITH u as (update cards set status = $1) select 1", ["ACTIVE"]);
  assert.ok(update);
  assert.notEqual(update, select);
});

test("a text as long as an authorization batch's write is named", () => {
  const names = new StatementNames(10);
  const batch = `with ${Array.from({ length: 400 }, (_, i) => `c${i} as (select $${i + 1}::int)`).join(", ")} select 1`;
  assert.ok(batch.length > 9_000, `${batch.length} characters`);
  assert.ok(names.of(batch, [1]));
});

test("scripts, transaction control, long texts and texts past the bound run unnamed", () => {
  const names = new StatementNames(2);
  assert.equal(names.of("begin", []), undefined);
  assert.equal(names.of("create table t (a int); insert into t values (1)", []), undefined);
  assert.equal(names.of("set local statement_timeout = $1", ["1s"]), undefined);
  const longInsert = `insert into cards (id) values ${Array.from({ length: 3000 }, (_, i) => `($${i + 1})`).join(", ")}`;
  assert.equal(names.of(longInsert, ["x"]), undefined);
  assert.ok(names.of("select $1::int", [1]));
  assert.ok(names.of("select $1::text", ["a"]));
  assert.equal(names.of("select $1::bigint", [1n]), undefined, "past the bound");
  assert.ok(names.of("select $1::int", [2]), "known texts keep their name past the bound");
});
