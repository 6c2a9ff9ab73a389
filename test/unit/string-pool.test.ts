// The pool the per-process memories share their repeated strings through: one copy per value,
// lists pooled whole, and a full pool that starts over without changing any value.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StringPool } from "../../src/modules/shared/string-pool.ts";

const fresh = (text: string): string => Buffer.from(text).toString();

test("equal strings and lists come back as one copy, their values unchanged", () => {
  const pool = new StringPool(10);
  assert.equal(pool.string(fresh("9f0c1b7e-client")), "9f0c1b7e-client");
  assert.equal(pool.string(fresh("9f0c1b7e-client")), "9f0c1b7e-client");
  assert.equal(pool.string(null), null);

  const lineage = pool.list([fresh("root"), fresh("child")]);
  const again = pool.list([fresh("root"), fresh("child")]);
  assert.equal(again, lineage);
  assert.deepEqual(again, ["root", "child"]);
  assert.ok(Object.isFrozen(lineage));
  assert.notEqual(pool.list(["root"]), lineage);
  assert.deepEqual(pool.list(["root\nchild"]), ["root\nchild"]);
  assert.deepEqual(pool.list(["a,b", "c"]), ["a,b", "c"]);
  assert.deepEqual(pool.list(["a", "b,c"]), ["a", "b,c"]);
});

test("a full pool starts over and still answers every value", () => {
  const pool = new StringPool(3);
  const values = Array.from({ length: 10 }, (_, i) => `value-${i}`);
  for (const value of values) assert.equal(pool.string(fresh(value)), value);
  for (const value of values) assert.equal(pool.string(fresh(value)), value);
  const lists = values.map((value) => pool.list([value, "x"]));
  lists.forEach((list, i) => {
    assert.deepEqual(list, [values[i], "x"]);
  });
});
