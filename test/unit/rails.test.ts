// Proves the pure pieces of SPEI and the simulators: the callback signature, listing positions
// (property, against a naive list), cursors, tracking keys, and that the simulators are
// asynchronous, deduplicate, fail when told to, and redeliver callbacks.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import {
  isRealDate,
  isTrackingKey,
  newTrackingKey,
  operationDateOf,
  returnCauses,
} from "../../src/domain/spei.ts";
import { AppError } from "../../src/errors.ts";
import { decodeCursor, encodeCursor, positionAt } from "../../src/modules/transfers/pagination.ts";
import { signSpeiCallback, verifySpeiSignature } from "../../src/modules/transfers/signature.ts";
import { AirtimeProviderUnavailableError } from "../../src/rails/airtime/port.ts";
import { AirtimeSimulator } from "../../src/rails/airtime/simulator.ts";
import {
  RailUnavailableError,
  type SpeiOrderMessage,
  type SpeiStateChange,
} from "../../src/rails/spei/port.ts";
import { readSpeiJournal, SpeiSimulator } from "../../src/rails/spei/simulator.ts";

test("signature: the rail's HMAC over timestamp and exact body verifies; anything else does not", () => {
  const body = Buffer.from('{"Monto":100}');
  const now = 1_700_000_000;
  const header = signSpeiCallback("s3cret", body, now);
  assert.match(header, /^t=1700000000,v1=[0-9a-f]{64}$/);
  assert.ok(verifySpeiSignature("s3cret", header, body, now, 300));
  assert.ok(verifySpeiSignature("s3cret", header, body, now + 300, 300));
  assert.ok(!verifySpeiSignature("s3cret", header, body, now + 301, 300));
  assert.ok(!verifySpeiSignature("other", header, body, now, 300));
  assert.ok(!verifySpeiSignature("s3cret", header, Buffer.from('{"Monto":1000}'), now, 300));
  assert.ok(!verifySpeiSignature("s3cret", undefined, body, now, 300));
  assert.ok(!verifySpeiSignature("s3cret", header.replace(/^t=\d+/, `t=${now + 1}`), body, now, 300));
  // Rotation: an old and a new signature side by side; either secret verifies.
  const both = `${header},v1=${signSpeiCallback("next", body, now).split("v1=")[1]}`;
  assert.ok(verifySpeiSignature("next", both, body, now, 300));
  assert.ok(verifySpeiSignature("s3cret", both, body, now, 300));
});

test("listing positions (property): positionAt agrees with walking the flat newest-first list", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 20 }), { maxLength: 12 }),
      fc.nat({ max: 300 }),
      (counts, offset) => {
        const days = counts.map((n, i) => ({
          fecha: `2025-01-${String(31 - i).padStart(2, "0")}`,
          operations: BigInt(n),
        }));
        const flat = days.flatMap((d) =>
          Array.from({ length: Number(d.operations) }, (_, k) => ({
            fecha: d.fecha,
            seq: d.operations - BigInt(k),
          })),
        );
        assert.deepEqual(positionAt(days, BigInt(offset)), flat[offset]);
      },
    ),
  );
});

test("cursors round-trip within their listing; anything else is a 1000 on the cursor field", () => {
  const cursor = { fecha: "2025-03-05", seq: 123456789012n, page: 7 };
  const listing = { clabe: "646180000000000012", initDate: "2025-03-01", endDate: "2025-03-31", perPage: 7 };
  const encoded = encodeCursor(cursor, listing);
  assert.deepEqual(decodeCursor(encoded, listing), cursor);
  const tag = (JSON.parse(Buffer.from(encoded, "base64url").toString()) as { q: string }).q;
  const refused = (text: string, query = listing) =>
    assert.throws(
      () => decodeCursor(text, query),
      (error: unknown) => error instanceof AppError && error.details?.[0]?.field === "cursor",
    );
  for (const bad of [
    "",
    "!!",
    "x".repeat(300),
    Buffer.from("{}").toString("base64url"),
    Buffer.from(`{"d":"2025-03-05","s":"0","p":1,"q":"${tag}"}`).toString("base64url"),
    Buffer.from('{"d":"2025-03-05","s":"2","p":1}').toString("base64url"),
  ]) {
    refused(bad);
  }
  // Another listing: each part of the query counts.
  refused(encoded, { ...listing, clabe: "646180000000000025" });
  refused(encoded, { ...listing, initDate: "2025-03-02" });
  refused(encoded, { ...listing, endDate: "2025-03-30" });
  refused(encoded, { ...listing, perPage: 8 });
});

test("tracking keys are at most 30 alphanumerics and carry the operation date; dates are Mexico City's", () => {
  const keys = new Set<string>();
  for (let i = 0; i < 1000; i++) {
    const key = newTrackingKey("2025-03-05");
    assert.ok(isTrackingKey(key) && key.length <= 30 && key.startsWith("EMS20250305"), key);
    keys.add(key);
  }
  assert.equal(keys.size, 1000);
  assert.ok(!isTrackingKey("A".repeat(31)) && !isTrackingKey("con espacio") && !isTrackingKey(""));
  // 03:00 UTC on 6 March is still 5 March in Mexico City (UTC-6).
  assert.equal(operationDateOf(new Date("2025-03-06T03:00:00Z")), "2025-03-05");
  assert.ok(isRealDate("2024-02-29") && !isRealDate("2025-02-29") && !isRealDate("2025-3-1"));
  assert.equal(returnCauses["01"], "Cuenta inexistente");
});

const order = (trackingKey: string): SpeiOrderMessage => ({
  trackingKey,
  operationDate: "2025-03-05",
  amountCents: 100n,
  beneficiaryAccount: "012180000118359713",
  beneficiaryAccountType: "40",
  beneficiaryInstitution: "40012",
  beneficiaryName: "X",
  beneficiaryRfcCurp: "ND",
  paymentConcept: "c",
  numericReference: "1",
});

test("SPEI simulator: answers asynchronously, deduplicates by tracking key, settles later on its own", async () => {
  const sim = new SpeiSimulator({ settleDelayMs: 5, returnProbability: 0, unavailableProbability: 0 });
  // The simulator's timers do not hold the process open (a server's socket does); this test must.
  const keepAlive = setInterval(() => {}, 1000);
  const changes: SpeiStateChange[] = [];
  const settled = new Promise<void>((resolve) =>
    sim.onStateChange(async (change) => {
      changes.push(change);
      resolve();
    }),
  );
  let answered = false;
  const pending = sim.submitOrder(order("K1")).then((r) => {
    answered = true;
    return r;
  });
  assert.equal(answered, false);
  const first = await pending;
  assert.deepEqual(await sim.submitOrder(order("K1")), first);
  assert.equal(sim.ordersAccepted, 1);
  assert.equal(sim.submissions.length, 2);
  await settled;
  assert.equal(changes.length, 1);
  assert.equal(changes[0]?.estado, "LIQUIDACION");
  assert.ok(changes[0]?.tsLiquidacion instanceof Date);
  clearInterval(keepAlive);
  await sim.close();
});

test("SPEI simulator: outcomes fall due in the order accepted, each once; a cancelled or flushed one stays delivered", async (t) => {
  const sim = new SpeiSimulator({ settleDelayMs: 30, returnProbability: 0, unavailableProbability: 0 });
  const keepAlive = setInterval(() => {}, 1000);
  t.after(() => clearInterval(keepAlive));
  const delivered: string[] = [];
  sim.onStateChange(async (change) => {
    delivered.push(change.trackingKey);
  });
  const keys = Array.from({ length: 50 }, (_, i) => `Q${i}`);
  for (const key of keys) await sim.submitOrder(order(key));
  sim.cancelPending(order("Q7").operationDate, "Q7");
  // Held and released: every outcome is queued again; the entries queued before are stale.
  sim.hold();
  sim.release();
  assert.equal(await sim.flush(), 49);
  await sim.submitOrder(order("Q50"));
  await new Promise((resolve) => setTimeout(resolve, 120));
  assert.deepEqual(delivered, [...keys.filter((key) => key !== "Q7"), "Q50"]);
  assert.equal(sim.ordersAccepted, 51);
  assert.deepEqual(await sim.submitOrder(order("Q3")), { accepted: true, railReference: "SIM0000000004" });
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.equal(delivered.length, 50, "a re-sent order that was delivered is not delivered again");
  await sim.close();
});

test("SPEI simulator: probabilities drive returns (with a Banxico cause) and outages; failed callbacks are redelivered", async () => {
  const dice = [0.9, 0.1, 0.0]; // not unavailable, returned, first cause
  const sim = new SpeiSimulator({
    settleDelayMs: 1,
    returnProbability: 0.5,
    unavailableProbability: 0.5,
    random: () => dice.shift() ?? 0,
  });
  sim.hold();
  let calls = 0;
  const seen: SpeiStateChange[] = [];
  sim.onStateChange(async (change) => {
    calls += 1;
    if (calls === 1) throw new Error("database briefly down");
    seen.push(change);
  });
  await sim.submitOrder(order("K2"));
  assert.equal(await sim.flush(), 0);
  assert.equal(await sim.flush(), 1);
  assert.equal(seen[0]?.estado, "DEVOLUCION");
  assert.equal(seen[0]?.causaDevolucion, "01");
  // With the dice at 0 the rail is unreachable: nothing recorded, a retry draws again.
  await assert.rejects(sim.submitOrder(order("K3")), RailUnavailableError);
  assert.equal(sim.ordersAccepted, 1);
  await sim.close();
});

test("airtime simulator: deduplicates by id, refuses impossible numbers, fails and goes away when told", async () => {
  const sim = new AirtimeSimulator({ delayMs: 0, failureProbability: 0 });
  const request = {
    id: "t1",
    sku: "TELCEL_50",
    carrier: "TELCEL",
    phoneNumber: "5512345678",
    amountCents: 5000n,
  };
  const first = await sim.topup(request);
  assert.equal(first.status, "COMPLETED");
  assert.deepEqual(await sim.topup(request), first);
  assert.equal(sim.delivered, 1);
  const refused = await sim.topup({ ...request, id: "t2", phoneNumber: "1512345678" });
  assert.deepEqual(refused, {
    status: "FAILED",
    reason: "Número no válido para el operador",
    retryable: false,
  });
  const flaky = new AirtimeSimulator({ delayMs: 0, failureProbability: 1 });
  assert.equal((await flaky.topup(request)).status, "FAILED");
  sim.decide = () => "UNAVAILABLE";
  await assert.rejects(sim.topup({ ...request, id: "t3" }), AirtimeProviderUnavailableError);
  // A retry of a top-up already decided is answered at once, not after the delay again: a caller
  // that gave up on a slow first answer gets it on its next call.
  const slow = new AirtimeSimulator({ delayMs: 60_000, failureProbability: 0 });
  const waiting = slow.topup(request);
  const retried = await Promise.race([
    slow.topup(request),
    new Promise<"waited">((resolve) => setTimeout(() => resolve("waited"), 1_000)),
  ]);
  assert.notEqual(retried, "waited");
  // Close ends a provider wait at once instead of leaving a request hanging.
  await slow.close();
  assert.deepEqual(await waiting, retried);
  assert.equal(slow.delivered, 1);
});

test("SPEI simulator with a journal: a restarted one answers a re-sent order as before and delivers what it owed", async (t) => {
  const journalPath = path.join(mkdtempSync(path.join(tmpdir(), "emisor-sim-")), "spei.jsonl");
  // Simulator timers are unref'd; this keeps the test alive while it waits, and is cleared even
  // when an assertion fails, so a failure cannot hang the run.
  const keepAlive = setInterval(() => {}, 1000);
  t.after(() => clearInterval(keepAlive));
  const first = new SpeiSimulator({
    settleDelayMs: 1,
    returnProbability: 0,
    unavailableProbability: 0,
    journalPath,
  });
  first.hold();
  const accepted = await first.submitOrder(order("J1"));
  await first.close(); // the process dies before the outcome was delivered
  const second = new SpeiSimulator({
    settleDelayMs: 1,
    returnProbability: 1,
    unavailableProbability: 0,
    journalPath,
  });
  const delivered = new Promise<SpeiStateChange>((resolve) => second.onStateChange(async (c) => resolve(c)));
  // The same order again: the first answer, not a new order (returnProbability 1 would return it).
  assert.deepEqual(await second.submitOrder(order("J1")), accepted);
  assert.equal(second.ordersAccepted, 1);
  assert.equal((await delivered).estado, "LIQUIDACION");
  await new Promise((resolve) => setTimeout(resolve, 20));
  await second.close();
  const third = new SpeiSimulator({
    settleDelayMs: 1,
    returnProbability: 0,
    unavailableProbability: 0,
    journalPath,
  });
  let redelivered = 0;
  third.onStateChange(async () => {
    redelivered += 1;
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(redelivered, 0, "a delivered outcome is not delivered again after a restart");
  // The re-submit and the delivery race each other: compare the records, not their order.
  const kinds = readSpeiJournal(journalPath).map((r) => r.e);
  assert.deepEqual(kinds.slice(0, 2), ["submit", "accepted"]);
  assert.deepEqual(kinds.slice(2).sort(), ["delivered", "submit"]);
  clearInterval(keepAlive);
  await third.close();
});
