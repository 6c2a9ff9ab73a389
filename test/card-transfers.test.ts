// Proves the card transfer out (contract 4.10) end to end: the exact shape and message, commission
// and IVA, PIN checks and lock, every rejection with nothing moved, idempotent retries, and the
// rail settling or returning the order with the ledger balanced after each.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { encryptFor } from "../src/crypto/rsa.ts";
import { hashSecret } from "../src/crypto/secrets.ts";
import { buildClabe } from "../src/domain/clabe.ts";
import { balanceOf, checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { sealStoredBeneficiaryCards } from "../src/modules/transfers/beneficiary-card.ts";
import { dispatchSpeiOrders, SpeiHandOver } from "../src/modules/transfers/dispatcher.ts";
import type { SpeiOrderMessage, SpeiRail } from "../src/rails/spei/port.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { type AssignedCard, cardsFor, panOf, spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { speiSimulator } from "./helpers/rails.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const where = { latitude: 19.4326, longitude: -99.1332 };
const bbvaClabe = buildClabe("012", "180", 1234567n);

interface Transfer {
  card: Record<string, string>;
  account: Record<string, string>;
  transfer: {
    id: string;
    tracking_key: string;
    operation_date: string;
    reference_operation: string;
    amount: number;
    commission: number;
    commission_type: string;
    iva: number;
  };
}

/** A tenant with an ACTIVE card of a product with a 10.00 commission, `funds` on the card and PIN 4821. */
async function readyCard(funds = 1000): Promise<{ tenant: Tenant; card: AssignedCard }> {
  const tenant = await createTenant(t, { available: funds + 1 });
  return { tenant, card: await spendableCard(t, tenant, { commission: 10, funds }) };
}

function body(cardNumber: string, overrides: Record<string, unknown> = {}) {
  return {
    card_number: cardNumber,
    payment_concept: "Pago de renta",
    beneficiary_account: bbvaClabe,
    beneficiary_institution: "40012",
    amount: 100,
    beneficiary_name: "Maria Lopez",
    numeric_reference: "1234567",
    beneficiary_rfc_curp: "ND",
    beneficiary_email: "maria@example.mx",
    pin: "4821",
    ...overrides,
  };
}

const send = (tenant: Tenant, b: unknown, headers?: Record<string, string>) =>
  call<Transfer>(t.app, "POST", "/v1/transfer/cards", {
    token: tenant.token,
    body: b,
    ...(headers ? { headers } : {}),
  });

test("a transfer answers the 4.10 shape and message, and the card pays amount + commission + IVA", async () => {
  const { tenant, card } = await readyCard();
  const response = await send(tenant, body(card.id));
  const data = expectOk(response);
  assert.equal(response.body.message, "Operación SPEI® Out exitosa.");
  assert.deepEqual(Object.keys(data).sort(), ["account", "card", "transfer"]);
  assert.deepEqual(data.card, {
    card_id: card.id,
    card_type: "PHYSICAL",
    masked_card_number: `************${card.lastFour}`,
    last_four: card.lastFour,
  });
  assert.deepEqual(Object.keys(data.account).sort(), [
    "account_id",
    "curp",
    "mobile_phone",
    "observations",
    "primary_phone",
    "rfc",
  ]);
  assert.equal(data.account.account_id, card.accountId);
  assert.match(data.account.curp ?? "", /^[A-Z0-9]{18}$/);
  const { transfer } = data;
  assert.deepEqual(
    { ...transfer, id: "", tracking_key: "", operation_date: "", reference_operation: "" },
    {
      id: "",
      tracking_key: "",
      operation_date: "",
      reference_operation: "",
      amount: 100,
      commission: 10,
      commission_type: "FLAT",
      iva: 1.6,
    },
  );
  assert.match(transfer.tracking_key, /^[A-Z0-9]{1,30}$/);
  assert.match(transfer.operation_date, /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/);
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 11_160n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
  const order = expectOk(
    await call<{ transfer: { status: string; card_id: string } }>(
      t.app,
      "GET",
      `/v1/transfer/cards/${transfer.id}`,
      { token: tenant.token },
    ),
  );
  assert.equal(order.transfer.card_id, card.id);
});

test("the rail settles the order, or returns it and the card gets everything back", async () => {
  const { tenant, card } = await readyCard();
  const sim = speiSimulator(t);
  const settled = expectOk(await send(tenant, body(card.id, { amount: 50 }))).transfer;
  const returned = expectOk(await send(tenant, body(card.id, { amount: 70 }))).transfer;
  await dispatchSpeiOrders({ db: t.ctx.db, rail: t.ctx.rails.spei, vaultKey: t.ctx.keys.vault });
  expectOk(
    await call(t.app, "POST", `/v1/sandbox/spei/orders/${returned.id}/return`, {
      token: tenant.token,
      body: { cause: "03" },
    }),
  );
  await sim.flush();
  const status = async (id: string) =>
    expectOk(
      await call<{ transfer: { status: string } }>(t.app, "GET", `/v1/transfer/cards/${id}`, {
        token: tenant.token,
      }),
    ).transfer.status;
  assert.equal(await status(settled.id), "LIQUIDADA");
  assert.equal(await status(returned.id), "DEVUELTA");
  // 1000 - (50 + 10 + 1.60); the returned 70 + 10 + 1.60 came back.
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 6_160n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

/** The order's status, and its rail job as it stands (attempts, seconds until due), if any. */
async function orderAndJob(id: string) {
  const order = await t.ctx.db
    .selectFrom("spei_orders")
    .select("status")
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
  const job = await t.ctx.db
    .selectFrom("rail_outbox")
    .select(["attempts", sql<number>`extract(epoch from next_attempt_at - now())::int`.as("due_in")])
    .where("ref_id", "=", id)
    .executeTakeFirst();
  return { status: order.status, job: job && { attempts: Number(job.attempts), dueIn: Number(job.due_in) } };
}

test("with the SPEI workers on, an order is on the rail once its batch commits, leased meanwhile", async () => {
  const { tenant, card } = await readyCard();
  const sim = speiSimulator(t);
  sim.hold();
  const handOver = new SpeiHandOver({ db: t.ctx.db, rail: sim, vaultKey: t.ctx.keys.vault });
  t.ctx.transferBatcher.handOverWith(handOver);
  const sent = await Promise.all([50, 60, 70].map((amount) => send(tenant, body(card.id, { amount }))));
  t.ctx.transferBatcher.handOverWith(undefined);
  await handOver.stop();
  for (const response of sent) {
    const order = expectOk(response).transfer;
    // No dispatcher pass ran: the hand-over sent it once, and its job waits out the lease, the
    // first settlement check.
    const { status, job } = await orderAndJob(order.id);
    assert.equal(status, "ENVIADA");
    assert.equal(job?.attempts, 1);
    assert.ok(job && job.dueIn > limits.railLeaseSeconds - 10 && job.dueIn <= limits.railLeaseSeconds);
    assert.equal(sim.submissions.filter((m) => m.trackingKey === order.tracking_key).length, 1);
  }
  await sim.flush();
  sim.release();
  for (const response of sent)
    assert.equal((await orderAndJob(expectOk(response).transfer.id)).status, "LIQUIDADA");
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("an order the hand-over has no room for, or that the rail does not take, waits for a pass", async () => {
  const { tenant, card } = await readyCard();
  const down: SpeiRail = Object.assign(Object.create(speiSimulator(t)) as SpeiRail, {
    submitOrder: () => Promise.reject(new Error("rail down")),
  });
  const full = new SpeiHandOver({ db: t.ctx.db, rail: speiSimulator(t), vaultKey: t.ctx.keys.vault }, 0);
  t.ctx.transferBatcher.handOverWith(full);
  const waiting = expectOk(await send(tenant, body(card.id, { amount: 10 }))).transfer;
  const failing = new SpeiHandOver({ db: t.ctx.db, rail: down, vaultKey: t.ctx.keys.vault });
  t.ctx.transferBatcher.handOverWith(failing);
  const unanswered = expectOk(await send(tenant, body(card.id, { amount: 20 }))).transfer;
  t.ctx.transferBatcher.handOverWith(undefined);
  await failing.stop();
  // No room: due at once, never claimed. Not taken: retried after the first backoff.
  assert.deepEqual(await orderAndJob(waiting.id), { status: "PENDIENTE", job: { attempts: 0, dueIn: 0 } });
  const retried = await orderAndJob(unanswered.id);
  assert.equal(retried.status, "PENDIENTE");
  assert.ok(retried.job && retried.job.attempts === 1 && retried.job.dueIn <= limits.railRetryBaseSeconds);
  await sql`update rail_outbox set next_attempt_at = now() where ref_id = ${unanswered.id}`.execute(t.ctx.db);
  await dispatchSpeiOrders({ db: t.ctx.db, rail: t.ctx.rails.spei, vaultKey: t.ctx.keys.vault });
  assert.equal((await orderAndJob(waiting.id)).status, "ENVIADA");
  assert.equal((await orderAndJob(unanswered.id)).status, "ENVIADA");
  await speiSimulator(t).flush();
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("PIN: clear or ciphered; wrong PINs are counted and lock it; a new PIN unlocks", async () => {
  const { tenant, card } = await readyCard();
  expectOk(
    await send(tenant, body(card.id, { amount: 1, pin: encryptFor(t.ctx.systemKey.publicKeyPem, "4821") })),
  );
  expectError(await send(tenant, body(card.id, { pin: "1111" })), 5309, 422);
  expectError(await send(tenant, body(card.id, { pin: "2222" })), 5309, 422);
  expectError(await send(tenant, body(card.id, { pin: "3333" })), 5308, 422);
  expectError(await send(tenant, body(card.id)), 5308, 422);
  expectError(await send(tenant, body(card.id, { pin: "12" })), 1000, 400);
  // Regression (contract audit): seven digits in clear were taken for a ciphertext (1005).
  expectError(await send(tenant, body(card.id, { pin: "1234567" })), 1000, 400);
  const pin = encryptFor(t.ctx.systemKey.publicKeyPem, "9090");
  expectOk(
    await call(t.app, "PUT", "/v1/cards/pin", { token: tenant.token, body: { card_number: card.id, pin } }),
  );
  expectOk(await send(tenant, body(card.id, { amount: 1, pin: "9090" })));
  // One payment of 1 + 10 + 1.60 each: 2 transfers went through, nothing else moved.
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 2n * 1_260n);
});

test("PIN: wrong PINs at once are counted exactly: the bound's worth answer 5309, then all 5308", async () => {
  const { tenant, card } = await readyCard();
  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, i) => send(tenant, body(card.id, { pin: String(1000 + i) }))),
  );
  const codes = answers.map((answer) => answer.body.code).sort();
  const incorrect = limits.pinAttemptsMax - 1;
  assert.deepEqual(codes, [
    ...Array<number>(24 - incorrect).fill(5308),
    ...Array<number>(incorrect).fill(5309),
  ]);
  const row = await t.ctx.db
    .selectFrom("cards")
    .select(["pin_failed_attempts", "pin_locked"])
    .where("id", "=", card.id)
    .executeTakeFirstOrThrow();
  assert.deepEqual(row, { pin_failed_attempts: limits.pinAttemptsMax, pin_locked: true });
  expectError(await send(tenant, body(card.id)), 5308, 422);
});

test("PIN: a right PIN at once with wrong ones clears the count only when it came before the lock", async () => {
  const { tenant, card } = await readyCard();
  expectError(await send(tenant, body(card.id, { pin: "1111" })), 5309, 422);
  const answers = await Promise.all([
    send(tenant, body(card.id, { amount: 1 })),
    send(tenant, body(card.id, { pin: "2222" })),
    send(tenant, body(card.id, { pin: "3333" })),
  ]);
  const right = answers[0];
  assert.ok(right);
  const row = await t.ctx.db
    .selectFrom("cards")
    .select(["pin_failed_attempts", "pin_locked"])
    .where("id", "=", card.id)
    .executeTakeFirstOrThrow();
  // Either order is exact: the right PIN cleared the count (two wrong ones since, not locked), or
  // the third wrong one locked the PIN first and the right one was refused.
  if (right.status === 200) assert.equal(row.pin_locked, false);
  else {
    expectError(right, 5308, 422);
    assert.deepEqual(row, { pin_failed_attempts: limits.pinAttemptsMax, pin_locked: true });
  }
});

test("PIN: a value stored as scrypt (before PIN verification values) still checks, and is re-keyed on its first right PIN", async () => {
  const { tenant, card } = await readyCard();
  // What PUT /v1/cards/pin stored before: scrypt over the HMAC of card id and PIN under the PIN key.
  const mac = createHmac("sha256", t.ctx.keys.pin).update(`${card.id}:4821`).digest("base64");
  const legacy = await hashSecret(mac);
  await t.ctx.db.updateTable("cards").set({ pin_hash: legacy }).where("id", "=", card.id).execute();
  const stored = async () =>
    t.ctx.db
      .selectFrom("cards")
      .select(["pin_hash", "pin_failed_attempts"])
      .where("id", "=", card.id)
      .executeTakeFirstOrThrow();
  expectError(await send(tenant, body(card.id, { pin: "1111" })), 5309, 422);
  assert.deepEqual(await stored(), { pin_hash: legacy, pin_failed_attempts: 1 });
  expectOk(await send(tenant, body(card.id, { amount: 1 })));
  const rekeyed = await stored();
  assert.equal(rekeyed.pin_failed_attempts, 0);
  assert.match(rekeyed.pin_hash ?? "", /^pvv1\$[A-Za-z0-9+/]{43}=$/);
  expectOk(await send(tenant, body(card.id, { amount: 1 })));
  expectError(await send(tenant, body(card.id, { pin: "1111" })), 5309, 422);
  assert.equal((await stored()).pin_hash, rekeyed.pin_hash);
});

test("every field is validated and a refused transfer moves nothing", async () => {
  const { tenant, card } = await readyCard();
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ beneficiary_account: "12345" }, "beneficiary_account"],
    [
      { beneficiary_account: `${bbvaClabe.slice(0, 17)}${(Number(bbvaClabe[17]) + 1) % 10}` },
      "beneficiary_account",
    ],
    [{ beneficiary_account: buildClabe("014", "180", 1n) }, "beneficiary_account"],
    [{ beneficiary_account: "4111111111111112" }, "beneficiary_account"],
    [{ beneficiary_institution: "99999" }, "beneficiary_institution"],
    [{ numeric_reference: "0" }, "numeric_reference"],
    [{ numeric_reference: "12345678" }, "numeric_reference"],
    [{ beneficiary_rfc_curp: "XYZ" }, "beneficiary_rfc_curp"],
    [{ beneficiary_rfc_curp: "JUAP800101HNEXXXA4" }, "beneficiary_rfc_curp"],
    [{ beneficiary_email: "not-an-email" }, "beneficiary_email"],
    [{ beneficiary_name: "n".repeat(41) }, "beneficiary_name"],
    [{ payment_concept: "" }, "payment_concept"],
    [{ payment_concept: "c".repeat(41) }, "payment_concept"],
    [{ amount: 1.001 }, "amount"],
    [{ amount: 0 }, "amount"],
    [{ extra: 1 }, "extra"],
  ];
  for (const [override, field] of cases) {
    const response = expectError(await send(tenant, body(card.id, override)), 1000, 400);
    assert.ok(
      (response.body.data as { details: Array<{ field: string }> }).details.some((d) => d.field === field),
      `${field}: ${JSON.stringify(response.body)}`,
    );
  }
  // Accepted edges: a phone, a Luhn card, an RFC, a CURP, 40-character names.
  for (const override of [
    { beneficiary_account: "5512345678" },
    {
      beneficiary_rfc_curp: "GODE561231GR8",
      beneficiary_name: "n".repeat(40),
      payment_concept: "c".repeat(40),
    },
    { beneficiary_rfc_curp: "HEGG560427MVZRRL04" },
  ]) {
    expectOk(await send(tenant, body(card.id, { ...override, amount: 1 })));
  }
  // A beneficiary's card number is masked in the order's view and its events, as Emisor's own are
  // (regression: it showed whole in GET /v1/transfer/cards/{id} and transfer.out.* events).
  const toCard = expectOk(
    await send(tenant, body(card.id, { beneficiary_account: "4111111111111111", amount: 1 })),
  ) as { transfer: { id: string } };
  const view = expectOk(
    await call<{ transfer: { beneficiary: { account: string; account_type: string } } }>(
      t.app,
      "GET",
      `/v1/transfer/cards/${toCard.transfer.id}`,
      { token: tenant.token },
    ),
  );
  assert.deepEqual(view.transfer.beneficiary.account, "************1111");
  const events = await t.ctx.db
    .selectFrom("events")
    .select("data")
    .where("client_id", "=", tenant.clientId)
    .execute();
  assert.ok(events.length > 0);
  assert.ok(!JSON.stringify(events).includes("4111111111111111"));
  expectError(await send(tenant, body("4111111111111111")), 1301, 400);
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 4n * 1_260n);
});

test("a beneficiary_institution that is not a catalog key is told so, a bank's name as well as an unknown code", async () => {
  // Regression (audit): "BBVA Mexico" was "must be at most 10 characters".
  const { tenant, card } = await readyCard();
  for (const institution of ["99999", "BBVA Mexico", "BBVA Bancomer, S.A., Institución de Banc"]) {
    const response = expectError(
      await send(tenant, body(card.id, { beneficiary_institution: institution, amount: 1 })),
      1000,
      400,
    );
    assert.equal(
      response.body.message,
      "beneficiary_institution: must be a key of the transfer_institutions catalog",
      institution,
    );
  }
  // A huge value is still refused for its length.
  const huge = expectError(
    await send(tenant, body(card.id, { beneficiary_institution: "4".repeat(41), amount: 1 })),
    1000,
    400,
  );
  assert.equal(huge.body.message, "beneficiary_institution: must be at most 40 characters");
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n);
});

test("beneficiary_name and payment_concept are 1-40 characters, an emoji one of them (not two UTF-16 units)", async () => {
  // Regression (audit): 21 emoji were refused as "must be at most 40 characters".
  const { tenant, card } = await readyCard();
  const data = expectOk(
    await send(
      tenant,
      body(card.id, { beneficiary_name: "😀".repeat(40), payment_concept: "é😀".repeat(20), amount: 1 }),
    ),
  );
  const view = expectOk(
    await call<{ transfer: { beneficiary: { name: string } } }>(
      t.app,
      "GET",
      `/v1/transfer/cards/${data.transfer.id}`,
      { token: tenant.token },
    ),
  );
  assert.equal(view.transfer.beneficiary.name, "😀".repeat(40));
  for (const field of ["beneficiary_name", "payment_concept"]) {
    const response = expectError(
      await send(tenant, body(card.id, { [field]: "😀".repeat(41), amount: 1 })),
      1000,
      400,
    );
    assert.equal(response.body.message, `${field}: must be at most 40 characters`);
  }
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 1_260n);
});

test("a beneficiary's card number is stored sealed, handed whole to the rail, and orders stored before are sealed at start", async () => {
  // Regression (third audit): spei_orders.beneficiary_account held the card number in clear (a
  // database dump showed it), while every answer, event and log masked it.
  const { tenant, card } = await readyCard();
  const created = expectOk(
    await send(tenant, body(card.id, { beneficiary_account: "4111111111111111", amount: 1 })),
  ).transfer;
  const stored = () =>
    t.ctx.db
      .selectFrom("spei_orders")
      .select(["beneficiary_account", "beneficiary_card_sealed"])
      .where("id", "=", created.id)
      .executeTakeFirstOrThrow();
  const row = await stored();
  assert.equal(row.beneficiary_account, "************1111");
  assert.match(row.beneficiary_card_sealed ?? "", /^v1\./);
  assert.ok(!JSON.stringify(row).includes("4111111111111111"));
  // An order as stored before migration 0013: the start-up step seals it, once.
  await t.ctx.db
    .updateTable("spei_orders")
    .set({ beneficiary_account: "4111111111111111", beneficiary_card_sealed: null })
    .where("id", "=", created.id)
    .execute();
  assert.equal(await sealStoredBeneficiaryCards(t.ctx.db, t.ctx.keys.vault), 1);
  assert.equal(await sealStoredBeneficiaryCards(t.ctx.db, t.ctx.keys.vault), 0);
  assert.equal((await stored()).beneficiary_account, "************1111");
  // The rail gets the whole number.
  const sent: SpeiOrderMessage[] = [];
  const rail: SpeiRail = {
    ...t.ctx.rails.spei,
    submitOrder: (message) => {
      sent.push(message);
      return t.ctx.rails.spei.submitOrder(message);
    },
  };
  await dispatchSpeiOrders({ db: t.ctx.db, rail, vaultKey: t.ctx.keys.vault });
  const message = sent.find((m) => m.trackingKey === created.tracking_key);
  assert.equal(message?.beneficiaryAccount, "4111111111111111");
  assert.equal(message?.beneficiaryAccountType, "3");
});

test("insufficient card balance is 5501; an inactive, blocked, canceled or foreign card is refused", async () => {
  const { tenant, card } = await readyCard(100);
  expectError(await send(tenant, body(card.id, { amount: 88.41 })), 5501, 422); // 88.41 + 10 + 1.60 > 100
  expectOk(await send(tenant, body(card.id, { amount: 88.4 })));
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  const [fresh] = await cardsFor(t, tenant, 1);
  assert.ok(fresh);
  expectError(await send(tenant, body(fresh.id)), 5307, 422);
  const { tenant: other, card: blocked } = await readyCard();
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: other.token,
      body: { card_number: blocked.id, status: "TEMPORARY_INACTIVE", ...where },
    }),
  );
  expectError(await send(other, body(blocked.id)), 5307, 422);
  // Refused under an Idempotency-Key, the refusal is the key's answer: unblocking the card does
  // not let a retry of that attempt move money later (it did: 200, the card paid).
  const key = { "idempotency-key": "blocked-card-1" };
  expectError(await send(other, body(blocked.id), key), 5307, 422);
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: other.token,
      body: { card_number: blocked.id, status: "ACTIVE", ...where },
    }),
  );
  const balance = await balanceOf(t.ctx.db, blocked.id);
  const retried = expectError(await send(other, body(blocked.id), key), 5307, 422);
  assert.equal(retried.headers["idempotent-replayed"], "true");
  assert.equal(await balanceOf(t.ctx.db, blocked.id), balance);
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: other.token,
      body: { card_number: blocked.id, status: "CANCELED", ...where },
    }),
  );
  expectError(await send(other, body(blocked.id)), 5304, 422);
  expectError(await send(tenant, body(blocked.id)), 3302, 404);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("an idempotent retry sends once; another body with the key is 409", async () => {
  const { tenant, card } = await readyCard();
  const key = { "idempotency-key": "renta-noviembre" };
  const first = await send(tenant, body(card.id), key);
  const again = await send(tenant, body(card.id), key);
  assert.deepEqual(again.body, first.body);
  assert.equal(again.headers["idempotent-replayed"], "true");
  expectError(await send(tenant, body(card.id, { amount: 101 }), key), 4001, 409);
  // Ciphered again on retry (card number and PIN): the same request, replayed (regression: 4001).
  const pem = t.ctx.systemKey.publicKeyPem;
  const pan = await panOf(t, card.id);
  const ciphered = () => body(encryptFor(pem, pan), { pin: encryptFor(pem, "4821") });
  const cipheredKey = { "idempotency-key": "renta-diciembre" };
  const firstCiphered = expectOk(await send(tenant, ciphered(), cipheredKey));
  const retried = await send(tenant, ciphered(), cipheredKey);
  assert.equal(retried.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(retried), firstCiphered);
  expectError(await send(tenant, body(encryptFor(pem, pan), { amount: 99 }), cipheredKey), 4001, 409);
  const orders = await t.ctx.db
    .selectFrom("spei_orders")
    .select("id")
    .where("card_id", "=", card.id)
    .execute();
  assert.equal(orders.length, 2);
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 2n * 11_160n);
});

test("transfers at once are batched and exact: a card pays what it covers, in full, and no more", async () => {
  // 1000.00 on the card; each transfer costs 100 + 10 + 1.60 = 111.60: eight fit, the rest are 5501.
  const { tenant, card } = await readyCard();
  const { tenant: other, card: otherCard } = await readyCard();
  const answers = await Promise.all([
    ...Array.from({ length: 12 }, () => send(tenant, body(card.id))),
    ...Array.from({ length: 4 }, () => send(other, body(otherCard.id))),
  ]);
  const codes = answers.map((answer) => answer.body.code);
  assert.deepEqual(
    codes.slice(0, 12).sort(),
    [...Array<number>(8).fill(0), ...Array<number>(4).fill(5501)],
    JSON.stringify(codes),
  );
  assert.deepEqual(codes.slice(12), [0, 0, 0, 0]);
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 8n * 11_160n);
  assert.equal(await balanceOf(t.ctx.db, otherCard.id), 100_000n - 4n * 11_160n);
  const orders = await t.ctx.db
    .selectFrom("spei_orders")
    .select(["id", "card_id", "tracking_key"])
    .where("card_id", "in", [card.id, otherCard.id])
    .execute();
  assert.equal(orders.length, 12);
  const made = answers.flatMap((answer) => (answer.body.code === 0 ? [answer.body.data] : []));
  assert.deepEqual(
    made.map((data) => (data as Transfer).transfer.tracking_key).sort(),
    orders.map((order) => order.tracking_key).sort(),
    "each answered transfer is a stored order",
  );
  const jobs = await t.ctx.db
    .selectFrom("rail_outbox")
    .select("ref_id")
    .where(
      "ref_id",
      "in",
      orders.map((order) => order.id),
    )
    .execute();
  assert.equal(jobs.length, 12);
  const events = await t.ctx.db
    .selectFrom("events")
    .select("data")
    .where("type", "=", "transfer.out.created")
    .where("client_id", "in", [tenant.clientId, other.clientId])
    .execute();
  assert.equal(events.length, 12);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a batch whose card changed falls back to each transfer on its own, which answers its own refusal", async () => {
  const { tenant, card } = await readyCard();
  const where = { latitude: 19.4326, longitude: -99.1332 };
  // The block lands while the transfers are queued or being written: each is either made before
  // it or refused for it (5307), and the card pays exactly the transfers answered 200.
  const sending = Array.from({ length: 6 }, () => send(tenant, body(card.id, { amount: 1 })));
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: card.id, status: "TEMPORARY_INACTIVE", ...where },
    }),
  );
  const answers = await Promise.all(sending);
  for (const answer of answers) assert.ok([0, 5307].includes(answer.body.code), JSON.stringify(answer.body));
  const made = answers.filter((answer) => answer.body.code === 0).length;
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - BigInt(made) * 1_260n);
  expectError(await send(tenant, body(card.id, { amount: 1 })), 5307, 422);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a card sent from before is checked again by its batch: a changed PIN, a wrong PIN and a block all count", async () => {
  const { tenant, card } = await readyCard();
  const where = { latitude: 19.4326, longitude: -99.1332 };
  expectOk(await send(tenant, body(card.id, { amount: 1 })));
  // The PIN changes: the old one is now wrong (and counted), the new one pays.
  const pin = encryptFor(t.ctx.systemKey.publicKeyPem, "7373");
  expectOk(
    await call(t.app, "PUT", "/v1/cards/pin", { token: tenant.token, body: { card_number: card.id, pin } }),
  );
  expectError(await send(tenant, body(card.id, { amount: 1 })), 5309, 422);
  const attempts = async () =>
    (
      await t.ctx.db
        .selectFrom("cards")
        .select("pin_failed_attempts")
        .where("id", "=", card.id)
        .executeTakeFirstOrThrow()
    ).pin_failed_attempts;
  assert.equal(await attempts(), 1);
  expectOk(await send(tenant, body(card.id, { amount: 1, pin: "7373" })));
  assert.equal(await attempts(), 0);
  expectOk(await send(tenant, body(card.id, { amount: 1, pin: "7373" })));
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: card.id, status: "TEMPORARY_INACTIVE", ...where },
    }),
  );
  expectError(await send(tenant, body(card.id, { amount: 1, pin: "7373" })), 5307, 422);
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n - 3n * 1_260n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});
