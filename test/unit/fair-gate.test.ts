// Proves the database's turns are shared between tenants: no tenant holds more than its share even
// with turns free, another tenant's request is served at once or at the next freed turn, and a
// tenant's own requests keep their arrival order.
import assert from "node:assert/strict";
import { test } from "node:test";
import { FairGate } from "../../src/db/fair-gate.ts";
import { AppError } from "../../src/errors.ts";

/** Acquires for `tenant` and records, in `granted`, when the turn was handed over. */
function take(gate: FairGate, tenant: string, label: string, granted: string[]): Promise<void> {
  return gate.acquire(tenant).then(() => {
    granted.push(label);
  });
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test("a tenant holds at most its share while other turns stay free for others", async () => {
  const gate = new FairGate(8, 1_000, 2);
  const granted: string[] = [];
  const burst = ["a1", "a2", "a3", "a4"].map((label) => take(gate, "A", label, granted));
  await settle();
  assert.deepEqual(granted, ["a1", "a2"]);
  await take(gate, "B", "b1", granted);
  assert.deepEqual(granted, ["a1", "a2", "b1"], "B is served at once, with A's burst waiting");
  gate.release("A");
  await settle();
  assert.deepEqual(granted, ["a1", "a2", "b1", "a3"], "A's freed turn goes to A's next, in order");
  gate.release("A");
  gate.release("A");
  gate.release("A");
  gate.release("B");
  await Promise.all(burst);
  assert.deepEqual(granted, ["a1", "a2", "b1", "a3", "a4"]);
});

test("with every turn taken, a freed turn goes to the tenant holding the fewest", async () => {
  const gate = new FairGate(3, 1_000, 3);
  const granted: string[] = [];
  const burst = ["a1", "a2", "a3", "a4", "a5"].map((label) => take(gate, "A", label, granted));
  const b = take(gate, "B", "b1", granted);
  await settle();
  assert.deepEqual(granted, ["a1", "a2", "a3"]);
  gate.release("A");
  await b;
  assert.deepEqual(granted, ["a1", "a2", "a3", "b1"], "B waited for one turn, not for A's burst");
  gate.release("B");
  await settle();
  assert.deepEqual(granted, ["a1", "a2", "a3", "b1", "a4"]);
  gate.release("A");
  await Promise.all(burst);
  assert.deepEqual(granted, ["a1", "a2", "a3", "b1", "a4", "a5"]);
});

test("a request that gets no turn in time fails with 6001, and its place is given up", async () => {
  const gate = new FairGate(2, 50, 1);
  await gate.acquire("A");
  await assert.rejects(gate.acquire("A"), (error: unknown) => {
    assert.ok(error instanceof AppError);
    assert.equal(error.def.code, 6001);
    return true;
  });
  gate.release("A");
  const granted: string[] = [];
  await take(gate, "A", "a-again", granted);
  assert.deepEqual(granted, ["a-again"]);
});
