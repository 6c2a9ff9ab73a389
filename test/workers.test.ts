// Proves the background workers as main.ts runs them: a transfer out is handed to the rail and
// settled without anyone calling a dispatcher by hand, an abandoned airtime top-up is finished,
// expired idempotency keys are purged, and stop() returns with nothing left running.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "kysely";
import { balanceOf } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { validateBeneficiary } from "../src/modules/transfers/beneficiary.ts";
import { createSpeiOrder } from "../src/modules/transfers/outgoing.ts";
import { startWorkers, type WorkerLog } from "../src/workers.ts";
import { call, createTenant, expectOk } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import {
  airtimeSimulator,
  assertLedgerBalanced,
  expireRailLeases,
  fundedCardAccount,
} from "./helpers/rails.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp({ speiSimSettleMs: 20, airtimeSimDelayMs: 0 });
});
after(() => t.close());

const problems: string[] = [];
const log: WorkerLog = {
  warn: () => {},
  error: (detail, message) => problems.push(`${message} ${String(detail.err)}`),
};

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await sleep(50);
  }
  assert.fail(`${what} did not happen`);
}

test("started workers dispatch and settle transfers out, and finish abandoned top-ups; stop() ends them", async () => {
  const tenant = await createTenant(t, { available: 100 });
  const payer = await fundedCardAccount(t, tenant.clientId, 10000n);
  const order = await t.ctx.db.transaction().execute((tx) =>
    createSpeiOrder(tx, {
      clientId: tenant.clientId,
      payerAccountId: payer,
      vaultKey: t.ctx.keys.vault,
      amountCents: 1000n,
      commissionCents: 100n,
      beneficiary: validateBeneficiary({
        payment_concept: "Pago",
        beneficiary_account: "5512345678",
        beneficiary_institution: "40012",
        beneficiary_name: "ANA",
        numeric_reference: "1",
        beneficiary_rfc_curp: "ND",
        beneficiary_email: "ana@example.com",
      }),
    }),
  );
  airtimeSimulator(t).decide = () => "UNAVAILABLE";
  const topup = expectOk(
    await call<{ topup: { id: string; status: string } }>(t.app, "POST", "/v1/airtime/topup", {
      token: tenant.token,
      body: { product_id: "TELCEL_50", phone_number: "5512345678", email: "a@example.com" },
    }),
  ).topup;
  assert.equal(topup.status, "PENDING");
  airtimeSimulator(t).decide = undefined;
  await expireRailLeases(t);

  const workers = startWorkers(t.ctx, log);
  try {
    const statusOf = async () =>
      (
        await t.ctx.db
          .selectFrom("spei_orders")
          .select("status")
          .where("id", "=", order.id)
          .executeTakeFirstOrThrow()
      ).status;
    await until("settlement", async () => (await statusOf()) === "LIQUIDADA");
    await until("airtime completion", async () => {
      const row = await t.ctx.db
        .selectFrom("airtime_topups")
        .select("status")
        .where("id", "=", topup.id)
        .executeTakeFirstOrThrow();
      return row.status === "COMPLETED";
    });
  } finally {
    await workers.stop();
  }
  assert.deepEqual(problems, []);
  assert.equal(await balanceOf(t.ctx.db, payer), 10000n - 1116n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 5000n);
  await assertLedgerBalanced(t);
});

test("started workers purge expired idempotency keys and keep the fresh ones", async () => {
  // Regression (audit): purgeIdempotencyKeys had no caller, so the table grew without bound.
  const tenant = await createTenant(t);
  for (const key of ["w-old-1", "w-old-2", "w-fresh"])
    expectOk(
      await call(t.app, "POST", "/v1/sandbox/funding", {
        token: tenant.token,
        body: { amount: 1 },
        headers: { "idempotency-key": key },
      }),
    );
  await sql`
    update idempotency_keys set created_at = now() - make_interval(hours => ${limits.idempotencyKeyTtlHours + 1})
    where api_key_id = ${tenant.apiKeyId} and key like 'w-old-%'`.execute(t.ctx.db);
  const keys = async () =>
    (
      await t.ctx.db
        .selectFrom("idempotency_keys")
        .select("key")
        .where("api_key_id", "=", tenant.apiKeyId)
        .orderBy("key")
        .execute()
    ).map((r) => r.key);
  const workers = startWorkers(t.ctx, log);
  try {
    await until("the purge", async () => (await keys()).length === 1);
  } finally {
    await workers.stop();
  }
  assert.deepEqual(await keys(), ["w-fresh"]);
  assert.deepEqual(problems, []);
});
