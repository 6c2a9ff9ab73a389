// Proves the transfer-out engine: the exact debit (amount + FLAT commission + 16% IVA half-up),
// insufficient balance changes nothing, the outbox hands each order to the rail exactly once
// across crashes and concurrent dispatchers, settlement and returns (full refund) keep the ledger
// balanced, and orders are visible only inside the caller's subtree.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, beforeEach, test } from "node:test";
import { sql } from "kysely";
import type { Db } from "../src/db/database.ts";
import { AppError } from "../src/errors.ts";
import { systemAccounts } from "../src/ledger/accounts.ts";
import { balanceOf } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { type BeneficiaryInput, validateBeneficiary } from "../src/modules/transfers/beneficiary.ts";
import { dispatchSpeiOrders } from "../src/modules/transfers/dispatcher.ts";
import { applySpeiStateChange, createSpeiOrder, type SpeiOrder } from "../src/modules/transfers/outgoing.ts";
import { RailUnavailableError, type SpeiRail } from "../src/rails/spei/port.ts";
import { SpeiSimulator } from "../src/rails/spei/simulator.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import {
  assertLedgerBalanced,
  eventsOf,
  expireRailLeases,
  fundedCardAccount,
  postSigned,
  speiSimulator,
} from "./helpers/rails.ts";

const secret = "rail-secret-out";
let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ speiWebhookSecret: secret });
  tenant = await createTenant(t);
});
after(() => t.close());
beforeEach(() => {
  const sim = speiSimulator(t);
  sim.decide = undefined;
  sim.hold();
});

const beneficiary: BeneficiaryInput = {
  payment_concept: "Renta marzo",
  beneficiary_account: "012180000118359713",
  beneficiary_institution: "40012",
  beneficiary_name: "MARIA LOPEZ",
  numeric_reference: "1234567",
  beneficiary_rfc_curp: "ND",
  beneficiary_email: "maria@example.com",
};

async function order(
  payer: string,
  amountCents: bigint,
  commissionCents: bigint,
  who = tenant,
): Promise<SpeiOrder> {
  return t.ctx.db.transaction().execute((tx) =>
    createSpeiOrder(tx, {
      clientId: who.clientId,
      payerAccountId: payer,
      cardId: null,
      amountCents,
      commissionCents,
      beneficiary: validateBeneficiary(beneficiary),
      vaultKey: t.ctx.keys.vault,
    }),
  );
}

const statusOf = async (id: string) =>
  (await t.ctx.db.selectFrom("spei_orders").select("status").where("id", "=", id).executeTakeFirstOrThrow())
    .status;
const dispatch = (rail: SpeiRail = t.ctx.rails.spei, db: Db = t.ctx.db, lanes?: number) =>
  dispatchSpeiOrders({ db, rail, vaultKey: t.ctx.keys.vault, lanes });
const getOrder = (who: Tenant, id: string) =>
  call<{ transfer: Record<string, unknown> }>(t.app, "GET", `/v1/transfer/cards/${id}`, { token: who.token });

test("the payer is debited amount + commission + IVA (16%, half-up); each lands in its account", async () => {
  const cases: Array<[bigint, bigint, bigint]> = [
    // amount, FLAT commission, expected IVA (centavos)
    [100000n, 750n, 120n],
    [100n, 3n, 0n], // 0.0048 -> 0.00
    [100n, 5n, 1n], // 0.008 -> 0.01
    [12345n, 313n, 50n], // 50.08 -> 50
    [12345n, 1000n, 160n],
    [50n, 0n, 0n],
  ];
  for (const [amount, commission, iva] of cases) {
    const payer = await fundedCardAccount(t, tenant.clientId, 200000n);
    const before = {
      out: await balanceOf(t.ctx.db, systemAccounts.speiOut),
      fee: await balanceOf(t.ctx.db, systemAccounts.commissionRevenue),
      iva: await balanceOf(t.ctx.db, systemAccounts.ivaPayable),
    };
    const created = await order(payer, amount, commission);
    assert.equal(created.ivaCents, iva, `IVA of ${commission}`);
    assert.equal(created.totalCents, amount + commission + iva);
    assert.equal(await balanceOf(t.ctx.db, payer), 200000n - amount - commission - iva);
    assert.equal(await balanceOf(t.ctx.db, systemAccounts.speiOut), before.out + amount);
    assert.equal(await balanceOf(t.ctx.db, systemAccounts.commissionRevenue), before.fee + commission);
    assert.equal(await balanceOf(t.ctx.db, systemAccounts.ivaPayable), before.iva + iva);
    assert.match(created.trackingKey, /^[0-9A-Z]{1,30}$/);
    assert.equal(created.status, "PENDIENTE");
    assert.equal(created.view.commission_type, "FLAT");
  }
  await assertLedgerBalanced(t);
});

test("the order is stored, queued in the outbox and announced in the same transaction", async () => {
  const payer = await fundedCardAccount(t, tenant.clientId, 10000n);
  const created = await order(payer, 1000n, 500n);
  const queued = await t.ctx.db
    .selectFrom("rail_outbox")
    .select(["rail", "attempts"])
    .where("ref_id", "=", created.id)
    .executeTakeFirstOrThrow();
  assert.deepEqual(queued, { rail: "SPEI", attempts: 0 });
  const events = await eventsOf(t, tenant.clientId, "transfer.out.created");
  assert.deepEqual(events.at(-1), created.view);
  const view = expectOk(await getOrder(tenant, created.id)).transfer;
  assert.deepEqual(view, { ...created.view });
  assert.equal(view.reference_operation, created.referenceOperation);
  assert.equal(view.amount, 10);
  assert.equal(view.commission, 5);
  assert.equal(view.iva, 0.8);
  assert.equal(view.total, 15.8);
  assert.deepEqual(view.beneficiary, {
    account: beneficiary.beneficiary_account,
    account_type: "CLABE",
    institution: { key: "40012", value: "BBVA Mexico" },
    name: "MARIA LOPEZ",
    rfc_curp: "ND",
    email: "maria@example.com",
  });
});

test("insufficient balance: 5501, and no order, job, event or movement", async () => {
  const payer = await fundedCardAccount(t, tenant.clientId, 10000n);
  const count = async (table: "spei_orders" | "rail_outbox" | "events") =>
    Number(
      (await sql<{ n: string }>`select count(*)::text as n from ${sql.table(table)}`.execute(t.ctx.db))
        .rows[0]?.n,
    );
  const before = [await count("spei_orders"), await count("rail_outbox"), await count("events")];
  const out = await balanceOf(t.ctx.db, systemAccounts.speiOut);
  // 9,900 + 100 commission + 16 IVA = 10,016 > 10,000.
  await assert.rejects(order(payer, 9900n, 100n), (error: unknown) => {
    assert.ok(error instanceof AppError);
    assert.equal(error.def.code, 5501);
    assert.equal(error.def.status, 422);
    return true;
  });
  assert.deepEqual([await count("spei_orders"), await count("rail_outbox"), await count("events")], before);
  assert.equal(await balanceOf(t.ctx.db, payer), 10000n);
  assert.equal(await balanceOf(t.ctx.db, systemAccounts.speiOut), out);
  // Exactly enough is fine.
  await order(payer, 9884n, 100n);
  assert.equal(await balanceOf(t.ctx.db, payer), 0n);
});

test("dispatch hands the order to the rail (ENVIADA); the rail settles it later (LIQUIDADA, ts_liquidacion)", async () => {
  const sim = speiSimulator(t);
  const payer = await fundedCardAccount(t, tenant.clientId, 50000n);
  const created = await order(payer, 20000n, 750n);
  assert.ok((await dispatch()) >= 1);
  assert.equal(await statusOf(created.id), "ENVIADA");
  const sent = sim.submissions.filter((s) => s.trackingKey === created.trackingKey);
  assert.equal(sent.length, 1);
  assert.equal(sent[0]?.amountCents, 20000n);
  assert.equal(sent[0]?.beneficiaryAccountType, "40");
  await sim.flush();
  const view = expectOk(await getOrder(tenant, created.id)).transfer;
  assert.equal(view.status, "LIQUIDADA");
  assert.match(String(view.ts_liquidacion), /^\d{4}-\d{2}-\d{2}T/);
  assert.equal(view.return_cause, null);
  assert.deepEqual((await eventsOf(t, tenant.clientId, "transfer.out.settled")).at(-1), view);
  assert.equal(await balanceOf(t.ctx.db, payer), 50000n - 20870n);
  const job = await t.ctx.db
    .selectFrom("rail_outbox")
    .select("id")
    .where("ref_id", "=", created.id)
    .executeTakeFirst();
  assert.equal(job, undefined);
  await assertLedgerBalanced(t);
});

test("a return (DEVUELTA with its Banxico cause) refunds amount, commission and IVA; late callbacks are ignored", async () => {
  const sim = speiSimulator(t);
  sim.decide = () => ({ estado: "DEVOLUCION", causa: "03" });
  const payer = await fundedCardAccount(t, tenant.clientId, 50000n);
  const fees = await balanceOf(t.ctx.db, systemAccounts.commissionRevenue);
  const created = await order(payer, 20000n, 750n);
  await dispatch();
  await sim.flush();
  const view = expectOk(await getOrder(tenant, created.id)).transfer;
  assert.equal(view.status, "DEVUELTA");
  assert.deepEqual(view.return_cause, { code: "03", description: "Cuenta cancelada" });
  assert.equal(await balanceOf(t.ctx.db, payer), 50000n);
  assert.equal(await balanceOf(t.ctx.db, systemAccounts.commissionRevenue), fees);
  assert.deepEqual((await eventsOf(t, tenant.clientId, "transfer.out.returned")).at(-1), view);
  // The rail repeating itself, or settling a returned order, changes nothing.
  const late = await postSigned(t, "/v1/rails/spei/order-state", {
    ClaveRastreo: created.trackingKey,
    FechaOperacion: created.operationDate,
    Estado: "LIQUIDACION",
  });
  assert.equal((expectOk(late) as { applied: boolean }).applied, false);
  assert.equal(await balanceOf(t.ctx.db, payer), 50000n);
  await assertLedgerBalanced(t);
});

test("a settled order can still be returned by the receiving bank; the refund is posted once", async () => {
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  const created = await order(payer, 10000n, 1000n);
  await dispatch();
  await speiSimulator(t).flush();
  assert.equal(await statusOf(created.id), "LIQUIDADA");
  const signed = (estado: string, extra: Record<string, unknown> = {}) =>
    postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: created.trackingKey,
      FechaOperacion: created.operationDate.replace(/-/g, ""),
      Estado: estado,
      ...extra,
    });
  const returned = expectOk(
    await signed("DEVOLUCION", { CausaDevolucion: "01", Detalle: "Cuenta inexistente" }),
  );
  assert.equal((returned as { applied: boolean }).applied, true);
  expectOk(await signed("DEVOLUCION", { CausaDevolucion: "01" }));
  assert.equal(await balanceOf(t.ctx.db, payer), 30000n);
  // A cause outside Banxico's table, or none, still returns the money (refusing it would leave the
  // payer debited while the rail retried); the cause is kept as sent. Regression (domain audit): a
  // cause written as its number (3, "3", "003") was refused, leaving the payer debited. Regression
  // (third audit): so were "999", "A1", a blank cause, a null or over-long Detalle and a null
  // TsLiquidacion: nothing optional refuses a return.
  const cancelled = { code: "03", description: "Cuenta cancelada" };
  const unknown = (code: string) => ({ code, description: "Causa desconocida" });
  for (const [fields, shown] of [
    [{ CausaDevolucion: "99" }, unknown("99")],
    [{}, null],
    [{ CausaDevolucion: 3 }, cancelled],
    [{ CausaDevolucion: "3" }, cancelled],
    [{ CausaDevolucion: "003" }, cancelled],
    [{ CausaDevolucion: " 3 " }, cancelled],
    [{ CausaDevolucion: "999" }, unknown("999")],
    [{ CausaDevolucion: "A1", Detalle: "D".repeat(5000) }, unknown("A1")],
    // The first 16 (200) characters, not UTF-16 units: an emoji at the cut is kept or dropped
    // whole (regression: it was cut in half).
    [
      { CausaDevolucion: `${"A".repeat(15)}😀😀`, Detalle: `${"D".repeat(199)}😀😀` },
      unknown(`${"A".repeat(15)}😀`),
    ],
    [{ CausaDevolucion: "", Detalle: null, TsLiquidacion: null }, null],
    [{ CausaDevolucion: null, TsLiquidacion: "not a time" }, null],
  ] as const) {
    const more = await order(payer, 5000n, 0n);
    await dispatch();
    await speiSimulator(t).flush();
    const answer = await postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: more.trackingKey,
      FechaOperacion: more.operationDate,
      Estado: "DEVOLUCION",
      ...fields,
    });
    const applied = expectOk(answer) as {
      applied: boolean;
      transfer: { status: string; return_cause: unknown };
    };
    assert.equal(applied.applied, true);
    assert.equal(applied.transfer.status, "DEVUELTA");
    assert.deepEqual(applied.transfer.return_cause, shown);
    assert.equal(await balanceOf(t.ctx.db, payer), 30000n);
  }
  // The rail may date an order sent after its cut-off, or on a non-business day, with the next
  // business day: the key, which carries the date Emisor sent it on, still finds the order.
  // Regression (audit): such a callback answered 3502 forever and a return never refunded.
  const late = await order(payer, 5000n, 0n);
  await dispatch();
  await speiSimulator(t).flush();
  const nextDay = new Date(Date.parse(`${late.operationDate}T12:00:00Z`) + 86_400_000)
    .toISOString()
    .slice(0, 10);
  const returnedLate = expectOk(
    await postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: late.trackingKey,
      FechaOperacion: nextDay.replace(/-/g, ""),
      Estado: "DEVOLUCION",
      CausaDevolucion: "01",
    }),
  ) as { applied: boolean; transfer: { id: string; status: string } };
  assert.deepEqual(
    [returnedLate.applied, returnedLate.transfer.id, returnedLate.transfer.status],
    [true, late.id, "DEVUELTA"],
  );
  assert.equal(await balanceOf(t.ctx.db, payer), 30000n);
  // A key in another letter case names the same order (Emisor's keys are upper case). Regression
  // (audit): a lower-case key answered 3502 forever.
  const lower = await order(payer, 5000n, 0n);
  await dispatch();
  await speiSimulator(t).flush();
  const returnedLower = expectOk(
    await postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: lower.trackingKey.toLowerCase(),
      FechaOperacion: lower.operationDate,
      Estado: "DEVOLUCION",
    }),
  ) as { applied: boolean; transfer: { id: string } };
  assert.deepEqual([returnedLower.applied, returnedLower.transfer.id], [true, lower.id]);
  assert.equal(await balanceOf(t.ctx.db, payer), 30000n);
  // A key shaped like Emisor's whose date does not exist names no order: 3502, not a 500.
  for (const key of ["EMS20251340AAAAAAAAAAAA", "EMS20250230AAAAAAAAAAAA", "EMS00000101AAAAAAAAAAAA"])
    expectError(
      await postSigned(t, "/v1/rails/spei/order-state", {
        ClaveRastreo: key,
        FechaOperacion: created.operationDate,
        Estado: "LIQUIDACION",
      }),
      3502,
      404,
    );
  expectError(
    await postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: "NOSUCHKEY1",
      FechaOperacion: created.operationDate,
      Estado: "LIQUIDACION",
    }),
    3502,
    404,
  );
  expectError(
    await postSigned(
      t,
      "/v1/rails/spei/order-state",
      { ClaveRastreo: created.trackingKey, Estado: "X" },
      { header: null },
    ),
    2501,
    401,
  );
  await assertLedgerBalanced(t);
});

test("a crash between commit and hand-over loses nothing; a lost rail answer does not duplicate the order", async () => {
  const sim = speiSimulator(t);
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  // Committed, then the process "dies" before any dispatcher ran: the job is in the outbox.
  const created = await order(payer, 1000n, 0n);
  // The next dispatcher reaches the rail, but its answer is lost (the process dies right after).
  const lostAnswer: SpeiRail = {
    submitOrder: async (message) => {
      await sim.submitOrder(message);
      throw new RailUnavailableError("connection reset after sending");
    },
    onStateChange: () => {},
    close: async () => {},
  };
  await dispatch(lostAnswer);
  assert.equal(await statusOf(created.id), "PENDIENTE");
  const job = await t.ctx.db
    .selectFrom("rail_outbox")
    .select(["attempts", "last_error"])
    .where("ref_id", "=", created.id)
    .executeTakeFirstOrThrow();
  assert.equal(job.attempts, 1);
  assert.match(job.last_error ?? "", /connection reset/);
  // Not due yet (backoff): nothing is sent again early.
  await dispatch();
  assert.equal(sim.submissions.filter((s) => s.trackingKey === created.trackingKey).length, 1);
  // Time passes; the order is re-sent, and the rail recognises its tracking key.
  await expireRailLeases(t);
  await dispatch();
  assert.equal(sim.submissions.filter((s) => s.trackingKey === created.trackingKey).length, 2);
  assert.equal(await statusOf(created.id), "ENVIADA");
  const accepted = sim.ordersAccepted;
  await sim.flush();
  assert.equal(sim.ordersAccepted, accepted);
  assert.equal(await statusOf(created.id), "LIQUIDADA");
  assert.equal(await balanceOf(t.ctx.db, payer), 29000n);
  await assertLedgerBalanced(t);
});

test("an order the rail lost (a restarted simulator) is sent again at the settlement check, and settles once", async () => {
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  const created = await order(payer, 1000n, 100n);
  await dispatch();
  assert.equal(await statusOf(created.id), "ENVIADA");
  const restarted = new SpeiSimulator({ settleDelayMs: 0, returnProbability: 0, unavailableProbability: 0 });
  restarted.hold();
  restarted.onStateChange(async (change) => {
    await applySpeiStateChange(t.ctx.db, change);
  });
  await dispatch(restarted);
  assert.equal(restarted.submissions.length, 0, "not due before the settlement check");
  await expireRailLeases(t);
  await dispatch(restarted);
  assert.equal(restarted.submissions.filter((s) => s.trackingKey === created.trackingKey).length, 1);
  // Accepted again while ENVIADA: the next check is the settlement check's interval away.
  const next = await t.ctx.db
    .selectFrom("rail_outbox")
    .select(sql<number>`extract(epoch from next_attempt_at - now())::int`.as("due_in"))
    .where("ref_id", "=", created.id)
    .executeTakeFirstOrThrow();
  assert.ok(Number(next.due_in) > limits.speiSettlementCheckSeconds - 10, `due in ${next.due_in} s`);
  await restarted.flush();
  await restarted.close();
  assert.equal(await statusOf(created.id), "LIQUIDADA");
  const job = await t.ctx.db
    .selectFrom("rail_outbox")
    .select("id")
    .where("ref_id", "=", created.id)
    .executeTakeFirst();
  assert.equal(job, undefined);
  // The first simulator's own outcome arrives late and changes nothing.
  await speiSimulator(t).flush();
  assert.equal(await balanceOf(t.ctx.db, payer), 30000n - 1116n);
  assert.equal(
    (await eventsOf(t, tenant.clientId, "transfer.out.settled")).filter((e) => e.id === created.id).length,
    1,
  );
  await assertLedgerBalanced(t);
});

test("an outcome whose callbacks all failed is delivered again when the settlement check re-sends the order, once", async () => {
  // Regression (audit): after its last redelivery the simulator dropped the outcome, and a re-send
  // answered "accepted" without delivering it: the order stayed ENVIADA with the money held.
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  const rail = new SpeiSimulator({ settleDelayMs: 0, returnProbability: 0, unavailableProbability: 0 });
  rail.hold();
  let down = true;
  const failed: string[] = [];
  const delivered: string[] = [];
  rail.onStateChange(async (change) => {
    if (down) {
      failed.push(change.trackingKey);
      throw new Error("callback target unreachable");
    }
    await applySpeiStateChange(t.ctx.db, change);
    delivered.push(change.trackingKey);
  });
  try {
    const created = await order(payer, 1000n, 100n);
    const ours = (keys: string[]) => keys.filter((key) => key === created.trackingKey).length;
    await dispatch(rail);
    assert.equal(await statusOf(created.id), "ENVIADA");
    // The callback target fails more often than the simulator tries.
    for (let i = 0; i < 40; i++) await rail.flush();
    const tries = ours(failed);
    assert.ok(tries > 1 && tries < 40, `the simulator gave up after ${tries} tries`);
    down = false;
    await rail.flush();
    assert.equal(ours(delivered), 0, "nothing is delivered before a re-send asks");
    assert.equal(expectOk(await getOrder(tenant, created.id)).transfer.status, "ENVIADA");
    // The settlement check comes due and re-sends the order: the outcome is delivered again.
    await expireRailLeases(t);
    await dispatch(rail);
    const sent = rail.submissions.filter((s) => s.trackingKey === created.trackingKey);
    assert.equal(sent.length, 2);
    await rail.flush();
    assert.equal(ours(delivered), 1);
    const view = expectOk(await getOrder(tenant, created.id)).transfer;
    assert.equal(view.status, "LIQUIDADA");
    // Once: a further re-send finds the outcome delivered and delivers nothing.
    const [first] = sent;
    assert.ok(first);
    await rail.submitOrder(first);
    await rail.flush();
    assert.equal(ours(delivered), 1);
    assert.equal(
      (await eventsOf(t, tenant.clientId, "transfer.out.settled")).filter((e) => e.id === created.id).length,
      1,
    );
    assert.equal(await balanceOf(t.ctx.db, payer), 30000n - 1116n);
    const job = await t.ctx.db
      .selectFrom("rail_outbox")
      .select("id")
      .where("ref_id", "=", created.id)
      .executeTakeFirst();
    assert.equal(job, undefined);
    await assertLedgerBalanced(t);
  } finally {
    await rail.close();
  }
});

test("concurrent dispatchers send each order exactly once (FOR UPDATE SKIP LOCKED)", async () => {
  const sim = speiSimulator(t);
  await expireRailLeases(t);
  await dispatch();
  const payer = await fundedCardAccount(t, tenant.clientId, 100000n);
  const orders = [];
  for (let i = 0; i < 12; i++) orders.push(await order(payer, 100n + BigInt(i), 0n));
  const before = sim.submissions.length;
  await Promise.all([dispatch(), dispatch(), dispatch()]);
  const sent = sim.submissions.slice(before).map((s) => s.trackingKey);
  assert.equal(sent.length, 12);
  assert.equal(new Set(sent).size, 12);
  for (const o of orders) assert.equal(await statusOf(o.id), "ENVIADA");
  await sim.flush();
});

test("a dispatcher whose claimed batch outlived the lease skips the jobs another dispatcher took over", async () => {
  // Regression (audit): a batch of 20 claimed jobs, each a rail call of up to 10 s, outlives the
  // 30 s lease; another dispatcher then claimed and sent the rest, and the first sent them again.
  const sim = speiSimulator(t);
  await expireRailLeases(t);
  await dispatch();
  const payer = await fundedCardAccount(t, tenant.clientId, 100000n);
  const orders = [];
  for (let i = 0; i < 4; i++) orders.push(await order(payer, 200n + BigInt(i), 0n));
  const keys = new Set(orders.map((o) => o.trackingKey));
  // The first dispatcher's first rail call hangs until the test lets it go.
  let release: () => void = () => {};
  let stalled: (key: string) => void = () => {};
  const stalledOn = new Promise<string>((resolve) => {
    stalled = resolve;
  });
  const slowFirst: SpeiRail = {
    submitOrder: async (message) => {
      if (sim.submissions.every((s) => !keys.has(s.trackingKey))) {
        stalled(message.trackingKey);
        await new Promise<void>((resolve) => {
          release = resolve;
        });
      }
      return sim.submitOrder(message);
    },
    onStateChange: () => {},
    close: async () => {},
  };
  const before = sim.submissions.length;
  // One lane: the rest of its batch waits behind the hanging call, as the jobs of any lane do.
  const first = dispatch(slowFirst, t.ctx.db, 1);
  const hanging = await stalledOn;
  // Meanwhile the leases of the rest of its batch run out, and a second dispatcher claims them.
  await sql`update rail_outbox set next_attempt_at = now() - interval '1 second'
    where ref_id in (select id from spei_orders where tracking_key <> ${hanging})`.execute(t.ctx.db);
  await dispatch();
  release();
  await first;
  const sent = sim.submissions
    .slice(before)
    .map((s) => s.trackingKey)
    .filter((key) => keys.has(key));
  assert.equal(sent.length, 4, `sent ${sent.join(", ")}`);
  assert.equal(new Set(sent).size, 4);
  for (const o of orders) assert.equal(expectOk(await getOrder(tenant, o.id)).transfer.status, "ENVIADA");
  await sim.flush();
  await assertLedgerBalanced(t);
});

test("an unreachable rail is retried later; a refusal cancels the order with a full refund", async () => {
  const sim = speiSimulator(t);
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  sim.decide = () => "UNAVAILABLE";
  const waiting = await order(payer, 1000n, 100n);
  await dispatch();
  assert.equal(await statusOf(waiting.id), "PENDIENTE");
  sim.decide = () => ({ reject: "Cuenta ordenante sin saldo en el participante" });
  await expireRailLeases(t);
  await dispatch();
  const view = expectOk(await getOrder(tenant, waiting.id)).transfer;
  assert.equal(view.status, "CANCELADA");
  assert.equal(view.status_detail, "Cuenta ordenante sin saldo en el participante");
  assert.equal(await balanceOf(t.ctx.db, payer), 30000n);
  assert.equal((await eventsOf(t, tenant.clientId, "transfer.out.returned")).at(-1)?.status, "CANCELADA");
  await assertLedgerBalanced(t);
});

test("a refused re-send of an order the rail accepted keeps it ENVIADA; a refused first send cancels and refunds", async () => {
  // Regression (audit): a refusal was applied as a cancellation whatever the order's state, so a
  // participant answering "duplicate tracking key" to the settlement check's re-send cancelled an
  // accepted order and refunded the payer while the rail could still settle it: money created.
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  const accepted = await order(payer, 1000n, 100n);
  await dispatch();
  assert.equal(await statusOf(accepted.id), "ENVIADA");
  const charged = 30000n - 1116n;
  assert.equal(await balanceOf(t.ctx.db, payer), charged);
  const refusing: SpeiRail = {
    submitOrder: async () => ({ accepted: false, detail: "Clave de rastreo duplicada" }),
    onStateChange: () => {},
    close: async () => {},
  };
  const warnings: Array<[string, Record<string, unknown>]> = [];
  await expireRailLeases(t);
  await dispatchSpeiOrders({
    db: t.ctx.db,
    rail: refusing,
    vaultKey: t.ctx.keys.vault,
    warn: (message, detail) => warnings.push([message, detail]),
  });
  const view = expectOk(await getOrder(tenant, accepted.id)).transfer;
  assert.equal(view.status, "ENVIADA");
  assert.equal(await balanceOf(t.ctx.db, payer), charged);
  assert.equal(
    (await eventsOf(t, tenant.clientId, "transfer.out.returned")).filter((e) => e.id === accepted.id).length,
    0,
  );
  const job = await t.ctx.db
    .selectFrom("rail_outbox")
    .select(["last_error", sql<number>`extract(epoch from next_attempt_at - now())::int`.as("due_in")])
    .where("ref_id", "=", accepted.id)
    .executeTakeFirstOrThrow();
  assert.match(job.last_error ?? "", /Clave de rastreo duplicada/);
  // Due again at the next settlement check (600 s), not sooner.
  assert.ok(job.due_in > 590 && job.due_in <= 600, `due in ${job.due_in} s`);
  const warned = warnings.find(([, detail]) => detail.order_id === accepted.id);
  assert.ok(warned, "the refusal is logged");
  assert.equal(warned[1].detail, "Clave de rastreo duplicada");
  // The rail's own outcome still arrives and is applied once.
  await speiSimulator(t).flush();
  assert.equal(expectOk(await getOrder(tenant, accepted.id)).transfer.status, "LIQUIDADA");
  assert.equal(await balanceOf(t.ctx.db, payer), charged);
  // An order the rail never accepted and now refuses is cancelled and refunded, as before.
  const fresh = await order(payer, 2000n, 100n);
  await dispatch(refusing);
  const cancelled = expectOk(await getOrder(tenant, fresh.id)).transfer;
  assert.equal(cancelled.status, "CANCELADA");
  assert.equal(cancelled.status_detail, "Clave de rastreo duplicada");
  assert.equal(await balanceOf(t.ctx.db, payer), charged);
  await assertLedgerBalanced(t);
});

test("sandbox forced return: DEVUELTA with the cause, idempotent, once; another tenant's order is 404", async () => {
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  const created = await order(payer, 5000n, 500n);
  await dispatch();
  const force = (who: Tenant, id: string, body: unknown, key?: string) =>
    call<{ transfer: Record<string, unknown> }>(t.app, "POST", `/v1/sandbox/spei/orders/${id}/return`, {
      token: who.token,
      body,
      ...(key ? { headers: { "idempotency-key": key } } : {}),
    });
  const stranger = await createTenant(t);
  expectError(await force(stranger, created.id, {}), 3502, 404);
  expectError(await getOrder(stranger, created.id), 3502, 404);
  expectError(await force(tenant, created.id, { cause: "99" }), 1000, 400);
  const first = await force(tenant, created.id, { cause: "02" }, "ret-1");
  const view = expectOk(first).transfer;
  assert.equal(view.status, "DEVUELTA");
  assert.deepEqual(view.return_cause, { code: "02", description: "Cuenta bloqueada" });
  const replay = await force(tenant, created.id, { cause: "02" }, "ret-1");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.deepEqual(replay.body, first.body);
  expectError(await force(tenant, created.id, {}), 5502, 422);
  assert.equal(await balanceOf(t.ctx.db, payer), 30000n);
  // The simulator forgot its own outcome for the order: nothing further arrives.
  assert.equal(await speiSimulator(t).flush(), 0);
  assert.equal(await statusOf(created.id), "DEVUELTA");
  expectError(await getOrder(tenant, randomUUID()), 3502, 404);
  expectError(await getOrder(tenant, "not-a-uuid"), 1000, 400);
  await assertLedgerBalanced(t);
});

test("beneficiary validation: every rule of 4.10, all failures listed at once", () => {
  const failing = (patch: Partial<BeneficiaryInput>): string[] => {
    try {
      validateBeneficiary({ ...beneficiary, ...patch });
      return [];
    } catch (error) {
      assert.ok(error instanceof AppError);
      assert.equal(error.def.code, 1000);
      return (error.details ?? []).map((d) => `${d.field}:${d.rule}`);
    }
  };
  const ok = (patch: Partial<BeneficiaryInput>) =>
    assert.deepEqual(failing(patch), [], JSON.stringify(patch));
  ok({});
  ok({ beneficiary_account: "5512345678" }); // a 10-digit phone
  ok({ beneficiary_account: "4111111111111111" }); // a Luhn-valid card
  ok({ beneficiary_account: "030180000118359711", beneficiary_institution: "40030" });
  ok({ beneficiary_rfc_curp: "GODE561231GR8" });
  ok({ beneficiary_rfc_curp: "ABC010101AB1" });
  ok({ beneficiary_rfc_curp: "BOXW310820HNERXN09" });
  ok({ numeric_reference: "1" });
  ok({ numeric_reference: "0000001" });
  ok({ beneficiary_name: "N".repeat(40), payment_concept: "C".repeat(40) });
  const cases: Array<[Partial<BeneficiaryInput>, string]> = [
    [{ beneficiary_account: "123456789" }, "beneficiary_account:pattern"],
    [{ beneficiary_account: "12345678901" }, "beneficiary_account:pattern"],
    [{ beneficiary_account: "12345678901234567" }, "beneficiary_account:pattern"],
    [{ beneficiary_account: "012180000118359718" }, "beneficiary_account:clabe"],
    [{ beneficiary_institution: "40030" }, "beneficiary_account:clabe_institution"],
    [{ beneficiary_account: "4111111111111112" }, "beneficiary_account:luhn"],
    [{ beneficiary_institution: "99999" }, "beneficiary_institution:catalog"],
    [{ numeric_reference: "0" }, "numeric_reference:minimum"],
    [{ numeric_reference: "12345678" }, "numeric_reference:pattern"],
    [{ numeric_reference: "12a" }, "numeric_reference:pattern"],
    [{ numeric_reference: "" }, "numeric_reference:pattern"],
    [{ beneficiary_rfc_curp: "XX" }, "beneficiary_rfc_curp:rfc_curp"],
    [{ beneficiary_rfc_curp: "JUAP800101HNEXXXA4" }, "beneficiary_rfc_curp:rfc_curp"],
    [{ beneficiary_rfc_curp: "nd" }, "beneficiary_rfc_curp:rfc_curp"],
    [{ beneficiary_name: "" }, "beneficiary_name:minLength"],
    [{ beneficiary_name: "   " }, "beneficiary_name:blank"],
    [{ beneficiary_name: "N".repeat(41) }, "beneficiary_name:maxLength"],
    [{ beneficiary_name: "MARIA\nLOPEZ" }, "beneficiary_name:characters"],
    [{ beneficiary_name: "MARIA\u202ELOPEZ" }, "beneficiary_name:characters"],
    [{ payment_concept: "Renta\u200B" }, "payment_concept:characters"],
    [{ payment_concept: " " }, "payment_concept:blank"],
    [{ payment_concept: "C".repeat(41) }, "payment_concept:maxLength"],
    [{ beneficiary_email: "not-an-email" }, "beneficiary_email:format"],
  ];
  for (const [patch, expected] of cases) assert.deepEqual(failing(patch), [expected], JSON.stringify(patch));
  assert.deepEqual(
    failing({ beneficiary_account: "1", numeric_reference: "0", beneficiary_email: "x" }).sort(),
    ["beneficiary_account:pattern", "beneficiary_email:format", "numeric_reference:minimum"],
  );
  // A card number in the text has its own code, as through the schema.
  assert.throws(
    () => validateBeneficiary({ ...beneficiary, payment_concept: "Tarjeta 5311 0105 6911 4749" }),
    (error) =>
      error instanceof AppError &&
      error.def.code === 1010 &&
      error.message === "payment_concept: must not contain a card number",
  );
});

test("a settlement's TsLiquidacion without a zone is Mexico City time; one that names no time settles without it", async () => {
  // Regression (audit): "2025-03-05T10:00:00" was a 400, and the order stayed ENVIADA while the
  // rail retried; the README says nothing optional refuses a state change.
  const payer = await fundedCardAccount(t, tenant.clientId, 30000n);
  const zoneless = await order(payer, 1000n, 0n);
  const unreadable = await order(payer, 1000n, 0n);
  await dispatch();
  for (const [sent, ts, shown] of [
    [zoneless, "2025-03-05T10:00:00", "2025-03-05T16:00:00.000Z"],
    [unreadable, "0000-01-01T00:00:00Z", undefined],
  ] as const) {
    const answer = expectOk(
      await postSigned(t, "/v1/rails/spei/order-state", {
        ClaveRastreo: sent.trackingKey,
        FechaOperacion: sent.operationDate,
        Estado: "LIQUIDACION",
        TsLiquidacion: ts,
      }),
    ) as { applied: boolean; transfer: { status: string; ts_liquidacion: string | null } };
    assert.deepEqual([answer.applied, answer.transfer.status], [true, "LIQUIDADA"], ts);
    if (shown) assert.equal(answer.transfer.ts_liquidacion, shown);
  }
  await assertLedgerBalanced(t);
});

test("a burst of rail callbacks is applied in batches, each answered as it would be alone", async () => {
  const payer = await fundedCardAccount(t, tenant.clientId, 100000n);
  const orders: SpeiOrder[] = [];
  for (let i = 0; i < 7; i++) orders.push(await order(payer, 1000n + BigInt(i), 100n));
  await dispatch();
  const [a, b, c, returned, twice, nextDay, cancelled] = orders as [SpeiOrder, ...SpeiOrder[]] & SpeiOrder[];
  const state = (o: SpeiOrder | undefined, Estado: string, extra: Record<string, unknown> = {}) =>
    postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: o?.trackingKey,
      FechaOperacion: o?.operationDate,
      Estado,
      ...extra,
    });
  const settledBefore = (await eventsOf(t, tenant.clientId, "transfer.out.settled")).length;
  const applied = { ...t.ctx.speiStateChanges.applied };
  // Sent at once: while the first is written the rest queue, and go as the next batch.
  const answers = await Promise.all([
    state(a, "LIQUIDACION"),
    state(b, "LIQUIDACION"),
    state(c, "LIQUIDACION", { Detalle: "Tarjeta 5311 0105 6911 4749" }),
    state(returned, "DEVOLUCION", { CausaDevolucion: "03" }),
    state(twice, "LIQUIDACION"),
    state(twice, "DEVOLUCION", { CausaDevolucion: "01" }),
    // The rail moved the operation date to the next day; the key still names the order.
    state(nextDay, "LIQUIDACION", { FechaOperacion: "2099-01-02" }),
    state(cancelled, "CANCELACION", { Detalle: "Cancelada por el participante" }),
    state({ ...(a as SpeiOrder), trackingKey: "EMNOSUCHKEY0000000000001" }, "LIQUIDACION"),
    state(a, "LIQUIDACION"),
  ]);
  expectError(answers[8] as Awaited<ReturnType<typeof state>>, 3502, 404);
  // The first alone, the other nine together.
  assert.deepEqual(t.ctx.speiStateChanges.applied, {
    inBatches: applied.inBatches + 9,
    alone: applied.alone + 1,
  });
  const seen = answers
    .filter((_, i) => i !== 8)
    .map((answer) => {
      const data = expectOk(answer) as {
        applied: boolean;
        transfer: { status: string; status_detail: string | null };
      };
      return [data.applied, data.transfer.status];
    });
  assert.deepEqual(seen, [
    [true, "LIQUIDADA"],
    [true, "LIQUIDADA"],
    [true, "LIQUIDADA"],
    [true, "DEVUELTA"],
    [true, "LIQUIDADA"],
    [true, "DEVUELTA"],
    [true, "LIQUIDADA"],
    [true, "CANCELADA"],
    [false, "LIQUIDADA"],
  ]);
  const masked = expectOk(await getOrder(tenant, (c as SpeiOrder).id)).transfer;
  assert.doesNotMatch(String(masked.status_detail), /5311 0105 6911 4749/);
  // Three returned in full; four settled, each announced once, with the view the API shows.
  const fees = 100n + 16n;
  const kept = [a, b, c, nextDay].reduce((sum, o) => sum + (o as SpeiOrder).amountCents + fees, 0n);
  assert.equal(await balanceOf(t.ctx.db, payer), 100000n - kept);
  const settled = (await eventsOf(t, tenant.clientId, "transfer.out.settled")).slice(settledBefore);
  assert.equal(settled.length, 5);
  for (const o of [a, b, c, nextDay]) {
    const view = expectOk(await getOrder(tenant, (o as SpeiOrder).id)).transfer;
    assert.deepEqual(
      settled.filter((e) => e.id === view.id),
      [view],
    );
  }
  const jobs = await t.ctx.db
    .selectFrom("rail_outbox")
    .select("id")
    .where(
      "ref_id",
      "in",
      orders.map((o) => o.id),
    )
    .execute();
  assert.deepEqual(jobs, []);
  await assertLedgerBalanced(t);
});

test("one dispatch pass sends a chunk at once: accepted, refused and unanswered orders each end as alone", async () => {
  const sim = speiSimulator(t);
  await expireRailLeases(t);
  await dispatch();
  const payer = await fundedCardAccount(t, tenant.clientId, 100000n);
  const [ok1, refused, unanswered, ok2] = [
    await order(payer, 1000n, 100n),
    await order(payer, 2000n, 100n),
    await order(payer, 3000n, 100n),
    await order(payer, 4000n, 100n),
  ];
  sim.decide = (message) =>
    message.trackingKey === refused?.trackingKey
      ? { reject: "Cuenta beneficiaria inexistente" }
      : message.trackingKey === unanswered?.trackingKey
        ? "UNAVAILABLE"
        : { estado: "LIQUIDACION" };
  assert.equal(await dispatch(), 4);
  assert.deepEqual(
    [
      await statusOf(ok1.id),
      await statusOf(refused.id),
      await statusOf(unanswered.id),
      await statusOf(ok2.id),
    ],
    ["ENVIADA", "CANCELADA", "PENDIENTE", "ENVIADA"],
  );
  const due = async (id: string) =>
    (
      await t.ctx.db
        .selectFrom("rail_outbox")
        .select(sql<number>`extract(epoch from next_attempt_at - now())::int`.as("due_in"))
        .where("ref_id", "=", id)
        .executeTakeFirst()
    )?.due_in;
  // Sent: due when its lease ends (the first settlement check); refused: done; unanswered: retried
  // after its backoff.
  for (const sent of [ok1, ok2]) {
    const dueIn = Number(await due(sent.id));
    assert.ok(dueIn > 25 && dueIn <= limits.railLeaseSeconds, `due in ${dueIn} s`);
  }
  assert.equal(await due(refused.id), undefined);
  assert.ok(Number(await due(unanswered.id)) <= 2);
  assert.equal(await balanceOf(t.ctx.db, payer), 100000n - (1000n + 116n) - (3000n + 116n) - (4000n + 116n));
  const ref = await t.ctx.db
    .selectFrom("spei_orders")
    .select(["rail_reference", "sent_at"])
    .where("id", "=", ok1.id)
    .executeTakeFirstOrThrow();
  assert.match(String(ref.rail_reference), /^SIM/);
  assert.ok(ref.sent_at);
  await sim.flush();
  await assertLedgerBalanced(t);
});

test("the database refuses a transfer out naming a missing client or payer, and never reassigns one", async () => {
  const [order] = (
    await sql<{ id: string }>`select id from spei_orders order by created_at limit 1`.execute(t.ctx.db)
  ).rows;
  assert.ok(order, "an order exists");
  const refused = (error: { code?: string }) => error.code === "23503";
  for (const column of ["client_id", "payer_account_id"]) {
    await assert.rejects(
      sql`insert into spei_orders select (jsonb_populate_record(null::spei_orders, to_jsonb(o) || jsonb_build_object(
          'id', ${randomUUID()}::uuid, 'tracking_key', 'TESTREFS' || floor(random() * 1e9)::text,
          ${column}::text, ${randomUUID()}::uuid))).*
        from spei_orders o where o.id = ${order.id}::uuid`.execute(t.ctx.db),
      refused,
      column,
    );
    await assert.rejects(
      sql`update spei_orders set ${sql.ref(column)} = ${randomUUID()}::uuid where id = ${order.id}::uuid`.execute(
        t.ctx.db,
      ),
      refused,
      `${column} changed`,
    );
  }
});
