// Proves a simulator's record of calls stays bounded: a long-running process keeps the last calls
// only, in order, and never drops the newest.
import assert from "node:assert/strict";
import { test } from "node:test";
import { keepLast, keptCallsMax } from "../../src/rails/recent.ts";

test("a record of calls keeps the last ones, in order, however many arrive", () => {
  const calls: number[] = [];
  for (let i = 0; i < keptCallsMax * 5; i++) {
    keepLast(calls, i);
    assert.ok(calls.length <= keptCallsMax * 1.1, `${calls.length} kept after ${i + 1}`);
  }
  assert.ok(calls.length >= keptCallsMax);
  assert.equal(calls.at(-1), keptCallsMax * 5 - 1);
  for (let i = 1; i < calls.length; i++) assert.equal(calls[i], (calls[i - 1] ?? 0) + 1);
});
