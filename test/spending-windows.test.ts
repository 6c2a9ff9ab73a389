// Proves the velocity windows in Mexico City time (day, ISO week from Monday, month, year) across
// their boundaries, and that what a card spent, as card_spending keeps it in the database, equals
// what its authorizations hold and cleared in each window that contains now, for random histories.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { windowKeysAt } from "../src/modules/controls/windows.ts";
import {
  moveSpending,
  readSpending,
  spendingAt,
  spendingDeltas,
  spendOf,
} from "../src/modules/purchases/spending.ts";
import { createTenant } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

const hour = 3_600_000;
const day = 24 * hour;
// Mexico City keeps UTC-6 all year since 2022-10-30: from then on the calendar is plain arithmetic.
const from = Date.UTC(2022, 10, 1);
const until = Date.UTC(2036, 0, 1);

function reference(ms: number) {
  const local = new Date(ms - 6 * hour);
  const dayKey = Math.floor((ms - 6 * hour) / day);
  const weekday = (local.getUTCDay() + 6) % 7; // Monday 0
  return {
    DAY: dayKey,
    WEEK: dayKey - weekday,
    MONTH: local.getUTCFullYear() * 12 + local.getUTCMonth(),
    YEAR: local.getUTCFullYear(),
  };
}

test("window keys follow Mexico City's calendar at every instant, midnight included", () => {
  fc.assert(
    fc.property(fc.integer({ min: from, max: until }), (ms) => {
      assert.deepEqual(windowKeysAt(ms), reference(ms));
    }),
    { numRuns: 2_000 },
  );
  // The last millisecond of a Mexico City day and the first of the next, around each boundary.
  const midnight = Date.UTC(2027, 0, 1, 6); // 2027-01-01 00:00 in Mexico City, a Friday
  const before = windowKeysAt(midnight - 1);
  const afterMidnight = windowKeysAt(midnight);
  assert.equal(afterMidnight.DAY - before.DAY, 1);
  assert.equal(afterMidnight.WEEK, before.WEEK);
  assert.deepEqual([afterMidnight.MONTH - before.MONTH, afterMidnight.YEAR - before.YEAR], [1, 1]);
  const monday = Date.UTC(2027, 0, 4, 6);
  assert.equal(windowKeysAt(monday).WEEK - windowKeysAt(monday - 1).WEEK, 7);
});

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

interface Made {
  at: number;
  status: string;
  held: bigint;
  cleared: bigint;
}

/** A step of a card's history: a new authorization, or a change of an earlier one. */
const step = fc.record({
  gapMs: fc.oneof(fc.integer({ min: 0, max: 2 * hour }), fc.integer({ min: 20 * hour, max: 40 * day })),
  kind: fc.constantFrom("authorize", "authorize", "release", "clear", "decline"),
  cents: fc.bigInt({ min: 1n, max: 100_000n }),
  pick: fc.nat(),
});

test("card_spending equals the authorizations' spending in each window of now", async () => {
  const tenant = await createTenant(t, { available: 10_000 });
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: from, max: until - 400 * day }),
      fc.array(step, { maxLength: 14 }),
      async (start, steps) => {
        const card = await spendableCard(t, tenant, { commission: 0, funds: 0 });
        const made: Made[] = [];
        let now = start;
        for (const s of steps) {
          now += s.gapMs;
          const change = apply(made, s, now);
          if (!change) continue;
          const keys = windowKeysAt(now);
          const row = (m: Made) => ({
            card_id: card.id,
            created_at: new Date(m.at),
            status: m.status,
            held_cents: m.held,
            cleared_cents: m.cleared,
          });
          const deltas = spendingDeltas(
            [{ before: change.before ? row(change.before) : undefined, after: row(change.after) }],
            keys,
          );
          await t.ctx.db.transaction().execute((tx) => moveSpending(tx, deltas, keys));
          const stored = await t.ctx.db.transaction().execute((tx) => readSpending(tx, card.id));
          const spending = spendingAt(stored, keys);
          for (const window of ["DAY", "WEEK", "MONTH", "YEAR"] as const) {
            const inWindow = made.filter((m) => windowKeysAt(m.at)[window] === keys[window]);
            assert.equal(spending.cents[window], sum(inWindow), `${window} cents`);
            assert.equal(spending.count[window], counted(inWindow), `${window} count`);
          }
          assert.equal(spending.cents.LIFETIME, sum(made));
          assert.equal(spending.count.LIFETIME, counted(made));
        }
      },
    ),
    { numRuns: 25 },
  );
});

function apply(made: Made[], step: { kind: string; cents: bigint; pick: number }, now: number) {
  if (step.kind === "authorize" || step.kind === "decline") {
    const after: Made =
      step.kind === "decline"
        ? { at: now, status: "DECLINED", held: 0n, cleared: 0n }
        : { at: now, status: "PENDING", held: step.cents, cleared: 0n };
    made.push(after);
    return { after };
  }
  const pending = made.filter((m) => m.status === "PENDING");
  const target = pending[step.pick % Math.max(1, pending.length)];
  if (!target) return undefined;
  const before = { ...target };
  if (step.kind === "release") {
    const release = step.cents < target.held ? step.cents : target.held;
    target.held -= release;
    if (target.held === 0n) target.status = "VOIDED";
  } else {
    target.cleared += target.held + step.cents;
    target.held = 0n;
    target.status = "SETTLED";
  }
  return { before, after: target };
}

function sum(list: Made[]): bigint {
  return list.reduce(
    (total, m) => total + spendOf({ status: m.status, held_cents: m.held, cleared_cents: m.cleared }),
    0n,
  );
}

function counted(list: Made[]): number {
  return list.filter((m) => spendOf({ status: m.status, held_cents: m.held, cleared_cents: m.cleared }) > 0n)
    .length;
}
