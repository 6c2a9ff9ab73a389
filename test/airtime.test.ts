// Proves airtime top-up (4.9) paid from the main balance: the catalog in the Product shape, every
// field rule, the debit committed before the provider is called, a provider failure reversing
// it, an unanswered call finished by the worker, Idempotency-Key, events, and tenancy.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, beforeEach, test } from "node:test";
import { sql } from "kysely";
import { encryptFor } from "../src/crypto/rsa.ts";
import { AppError } from "../src/errors.ts";
import { systemAccounts } from "../src/ledger/accounts.ts";
import { balanceOf } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { providerRequest, topupAirtime } from "../src/modules/airtime/service.ts";
import { processPendingTopups } from "../src/modules/airtime/worker.ts";
import type { CardRef } from "../src/modules/cards/card-number.ts";
import { lockActiveCard, resolveActiveCard } from "../src/modules/cards/service.ts";
import { AirtimeSimulator } from "../src/rails/airtime/simulator.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { cardsFor, panOf } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { airtimeSimulator, assertLedgerBalanced, eventsOf, expireRailLeases } from "./helpers/rails.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ airtimeSimDelayMs: 0 });
  tenant = await createTenant(t, { available: 1000 });
});
after(() => t.close());
beforeEach(() => {
  airtimeSimulator(t).decide = undefined;
});

const telcel100 = "a1700000-0000-4000-8000-000000000100";

interface Product {
  id: string;
  name: string;
  type: { key: string; value: string };
  [field: string]: unknown;
}
interface TopupData {
  products: { total: number; detail: Product[] };
  topup: {
    id: string;
    status: "PENDING" | "COMPLETED" | "FAILED";
    product_id: string;
    phone_number: string;
    amount: number;
    provider_reference: string | null;
    external_id: string | null;
    failure_reason: string | null;
    created_at: string;
    completed_at: string | null;
  };
}

const body = (patch: Record<string, unknown> = {}) => ({
  product_id: telcel100,
  phone_number: "5512345678",
  email: "cliente@example.com",
  ...patch,
});
const topup = (who: Tenant, payload: unknown, key?: string) =>
  call<TopupData>(t.app, "POST", "/v1/airtime/topup", {
    token: who.token,
    body: payload,
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });
/** Pays `amount` pesos onto a card from `who`'s main balance. */
const fund = async (who: Tenant, cardId: string, amount: number) =>
  expectOk(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: who.token,
      body: { card_number: cardId, amount, payment_description: "fondeo", latitude: 19.4, longitude: -99.1 },
    }),
  );
const stored = (id: string) =>
  t.ctx.db.selectFrom("airtime_topups").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

test("the catalog: global airtime products in the contract's Product shape, type AIRTIME", async () => {
  const data = expectOk(
    await call<{ products: { total: number; detail: Product[] } }>(t.app, "GET", "/v1/airtime/products", {
      token: tenant.token,
    }),
  );
  assert.equal(data.products.total, data.products.detail.length);
  const names = data.products.detail.map((p) => p.name);
  for (const name of ["Telcel $50", "Telcel $100", "Telcel $200", "Movistar $100", "AT&T $100"]) {
    assert.ok(names.includes(name), name);
  }
  const product = data.products.detail.find((p) => p.id === telcel100);
  assert.deepEqual(product, {
    id: telcel100,
    name: "Telcel $100",
    description: "Tiempo aire Telcel 100 MXN",
    country: { code: "484", description: "México" },
    coin: { code: "484", description: "Peso mexicano" },
    type: { key: "AIRTIME", value: "Tiempo aire" },
    status: { key: "ACTIVE", value: "Activo" },
    affinity_group: "TELCEL",
    stock_cards: 0,
    allow_blank_curp: true,
    allow_blank_rfc: true,
  });
});

test("main balance pays: debit to AIRTIME_PAYABLE, provider called after, COMPLETED with its reference", async () => {
  const payer = await createTenant(t, { available: 500 });
  const payable = await balanceOf(t.ctx.db, systemAccounts.airtimePayable);
  const data = expectOk(await topup(payer, body({ external_id: "ORD-1", additional_data: "nota" })));
  assert.equal(data.products.total, 1);
  assert.equal(data.products.detail[0]?.id, telcel100);
  assert.deepEqual(Object.keys(data.topup).sort(), [
    "amount",
    "completed_at",
    "created_at",
    "external_id",
    "failure_reason",
    "id",
    "phone_number",
    "product_id",
    "provider_reference",
    "status",
  ]);
  assert.equal(data.topup.status, "COMPLETED");
  assert.equal(data.topup.amount, 100);
  assert.equal(data.topup.phone_number, "5512345678");
  assert.equal(data.topup.external_id, "ORD-1");
  assert.match(data.topup.provider_reference ?? "", /^AT/);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 40000n);
  assert.equal(await balanceOf(t.ctx.db, systemAccounts.airtimePayable), payable + 10000n);
  const row = await stored(data.topup.id);
  assert.equal(row.additional_data, "nota");
  assert.equal(row.payer_account_id, payer.clientId);
  assert.deepEqual((await eventsOf(t, payer.clientId, "airtime.completed")).at(-1), data.topup);
  // The provider saw this top-up by its id (its deduplication key) with the product's SKU.
  const request = airtimeSimulator(t).requests.find((r) => r.id === data.topup.id);
  assert.deepEqual(request, {
    id: data.topup.id,
    sku: "TELCEL_100",
    carrier: "TELCEL",
    phoneNumber: "5512345678",
    amountCents: 10000n,
  });
  // A SKU names a product too; the contract's misspelling additional_date is accepted.
  const bySku = expectOk(await topup(payer, body({ product_id: "telcel_50", additional_date: "otra" })));
  assert.equal(bySku.topup.amount, 50);
  assert.equal((await stored(bySku.topup.id)).additional_data, "otra");
  await assertLedgerBalanced(t);
});

test("every field rule: phone 10 digits, email, external_id string or number of 1-128, additional_data 1-2048", async () => {
  const invalid = async (patch: Record<string, unknown>, field: string, drop?: string) => {
    const payload: Record<string, unknown> = body(patch);
    if (drop) delete payload[drop];
    const response = expectError(await topup(tenant, payload), 1000, 400);
    const details = (response.body.data as { details: Array<{ field: string }> }).details;
    assert.ok(
      details.some((d) => d.field === field),
      `${JSON.stringify(patch)}: ${JSON.stringify(details)}`,
    );
  };
  const before = await balanceOf(t.ctx.db, tenant.clientId);
  await invalid({ phone_number: "551234567" }, "phone_number");
  await invalid({ phone_number: "55123456789" }, "phone_number");
  await invalid({ phone_number: "55-1234567" }, "phone_number");
  await invalid({}, "phone_number", "phone_number");
  await invalid({ email: "no-at-sign" }, "email");
  await invalid({}, "email", "email");
  await invalid({ product_id: "" }, "product_id");
  await invalid({ product_id: "x".repeat(41) }, "product_id");
  await invalid({}, "product_id", "product_id");
  await invalid({ external_id: "" }, "external_id");
  await invalid({ external_id: "x".repeat(129) }, "external_id");
  await invalid({ external_id: "😀".repeat(129) }, "external_id");
  await invalid({ external_id: true }, "external_id");
  await invalid({ additional_data: "" }, "additional_data");
  await invalid({ additional_data: "x".repeat(2049) }, "additional_data");
  await invalid({ additional_date: "x".repeat(2049) }, "additional_date");
  await invalid({ additional_data: "a", additional_date: "b" }, "additional_date");
  await invalid({ amount: 10 }, "amount");
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), before);
  const edge = expectOk(
    await topup(
      tenant,
      body({ external_id: "x".repeat(128), additional_data: "y".repeat(2048), product_id: "TELCEL_50" }),
    ),
  );
  assert.equal(edge.topup.external_id, "x".repeat(128));
  // 128 characters, counted as the schema counts them: an emoji is one character, not two UTF-16
  // units (regression: 65 emoji were refused as more than 128 characters).
  const emoji = expectOk(
    await topup(tenant, body({ external_id: "😀".repeat(128), product_id: "TELCEL_50" })),
  );
  assert.equal(emoji.topup.external_id, "😀".repeat(128));
  const numeric = expectOk(await topup(tenant, body({ external_id: 12345.5, product_id: "TELCEL_50" })));
  assert.equal(numeric.topup.external_id, "12345.5");
  // Kept as decimal text, never in exponent form (1e21 was kept as "1e+21").
  for (const [raw, text] of [
    ["1e21", "1000000000000000000000"],
    ["2.5E25", "25000000000000000000000000"],
    ["1.5e-7", "0.00000015"],
  ]) {
    const response = await call<TopupData>(t.app, "POST", "/v1/airtime/topup", {
      token: tenant.token,
      raw: JSON.stringify(body({ product_id: "TELCEL_50", external_id: 0 })).replace(
        '"external_id":0',
        `"external_id":${raw}`,
      ),
    });
    assert.equal(expectOk(response).topup.external_id, text);
  }
  expectError(await topup(tenant, body({ product_id: "TELCEL_999" })), 3601, 404);
  expectError(await topup(tenant, body({ product_id: randomUUID() })), 3601, 404);
});

test("with id, an ACTIVE card of the caller's subtree pays (UUID or ciphered number); others are refused", async () => {
  const owner = await createTenant(t, { available: 500 });
  const [card, inactive] = await cardsFor(t, owner, 2);
  assert.ok(card && inactive);
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", {
      token: owner.token,
      body: { card_number: card.id, latitude: 19.4, longitude: -99.1 },
    }),
  );
  await fund(owner, card.id, 150);
  const mainBefore = await balanceOf(t.ctx.db, owner.clientId);
  const paid = expectOk(await topup(owner, body({ id: card.id })));
  assert.equal(paid.topup.status, "COMPLETED");
  assert.equal(await balanceOf(t.ctx.db, card.id), 5_000n);
  assert.equal(await balanceOf(t.ctx.db, owner.clientId), mainBefore);
  const cipher = encryptFor(t.ctx.systemKey.publicKeyPem, await panOf(t, card.id));
  expectError(await topup(owner, body({ id: cipher })), 5601, 422); // 50.00 left, 100.00 asked
  const fifty = body({ id: cipher, product_id: "TELCEL_50" });
  const paidFifty = expectOk(await topup(owner, fifty, "fifty"));
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  // A retry ciphering the card number again is a replay (regression: 4001, the ciphertext differed).
  const recipher = { ...fifty, id: encryptFor(t.ctx.systemKey.publicKeyPem, await panOf(t, card.id)) };
  const replay = await topup(owner, recipher, "fifty");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(replay), paidFifty);
  expectError(await topup(owner, body({ id: inactive.id })), 5307, 422);
  // Under an Idempotency-Key the refusal is final: once the card is active and funded, a retry of
  // that attempt is still refused (it was evaluated again and paid).
  expectError(await topup(owner, body({ id: inactive.id }), "inactive-card"), 5307, 422);
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", {
      token: owner.token,
      body: { card_number: inactive.id, latitude: 19.4, longitude: -99.1 },
    }),
  );
  await fund(owner, inactive.id, 100);
  const retried = expectError(await topup(owner, body({ id: inactive.id }), "inactive-card"), 5307, 422);
  assert.equal(retried.headers["idempotent-replayed"], "true");
  assert.equal(await balanceOf(t.ctx.db, inactive.id), 10_000n);
  expectError(await topup(tenant, body({ id: card.id })), 3302, 404);
  expectError(await topup(owner, body({ id: randomUUID() })), 3302, 404);
  const clear = expectError(await topup(owner, body({ id: "4111111111111111" })), 1301, 400);
  assert.match(clear.body.message, /^id must be the card's UUID/);
  await assertLedgerBalanced(t);
});

test("a card blocked or canceled after it was resolved, before its debit, pays nothing", async () => {
  const owner = await createTenant(t, { available: 500 });
  const [card] = await cardsFor(t, owner, 1, { activate: true });
  assert.ok(card);
  await fund(owner, card.id, 150);
  // The race an audit found (5 of 6 runs debited a card canceled a moment before): the card is
  // canceled between the status read and the debit's transaction.
  const caller = await t.ctx.auth.authenticate(`Bearer ${owner.token}`);
  const deps = {
    db: t.ctx.db,
    provider: t.ctx.rails.airtime,
    findPayingCard: async (who: typeof caller, ref: CardRef) => {
      const found = await resolveActiveCard(t.ctx, who, ref);
      expectOk(
        await call(t.app, "PUT", "/v1/cards/status", {
          token: owner.token,
          body: {
            card_number: card.id,
            status: "CANCELED",
            reason: "STOLEN",
            latitude: 19.4,
            longitude: -99.1,
          },
        }),
      );
      return found;
    },
    lockPayingCard: lockActiveCard,
  };
  await assert.rejects(
    topupAirtime(
      deps,
      caller,
      { cardRef: { id: card.id }, productId: telcel100, phoneNumber: "5512345678", email: "a@example.com" },
      undefined,
    ),
    (error: unknown) => error instanceof AppError && error.def.code === 5304,
  );
  assert.equal(await balanceOf(t.ctx.db, card.id), 15_000n);
  await assertLedgerBalanced(t);
});

test("a provider failure on a card payment gives the card its money back", async () => {
  const owner = await createTenant(t, { available: 200 });
  const [card] = await cardsFor(t, owner, 1, { activate: true });
  assert.ok(card);
  await fund(owner, card.id, 100);
  airtimeSimulator(t).decide = () => ({ status: "FAILED", reason: "TELCEL no disponible", retryable: true });
  try {
    expectError(await topup(owner, body({ id: card.id })), 6601, 502);
  } finally {
    airtimeSimulator(t).decide = undefined;
  }
  assert.equal(await balanceOf(t.ctx.db, card.id), 10_000n);
  await assertLedgerBalanced(t);
});

test("insufficient main balance: 5601 and nothing changes", async () => {
  const poor = await createTenant(t, { available: 99.99 });
  expectError(await topup(poor, body()), 5601, 422);
  assert.equal(await balanceOf(t.ctx.db, poor.clientId), 9999n);
  const count = await t.ctx.db
    .selectFrom("airtime_topups")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("client_id", "=", poor.clientId)
    .executeTakeFirstOrThrow();
  assert.equal(Number(count.n), 0);
});

test("a provider failure reverses the debit (6601, retryable) and a retry with the same key is evaluated again", async () => {
  const payer = await createTenant(t, { available: 300 });
  airtimeSimulator(t).decide = () => ({ status: "FAILED", reason: "TELCEL no disponible", retryable: true });
  const failed = expectError(await topup(payer, body(), "air-fail-1"), 6601, 502);
  assert.match(failed.body.message, /TELCEL no disponible/);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 30000n);
  const [event] = await eventsOf(t, payer.clientId, "airtime.failed");
  assert.equal(event?.status, "FAILED");
  const row = await stored(String(event?.id));
  assert.equal(row.status, "FAILED");
  assert.ok(row.reversal_entry_id);
  airtimeSimulator(t).decide = undefined;
  const retried = expectOk(await topup(payer, body(), "air-fail-1"));
  assert.equal(retried.topup.status, "COMPLETED");
  assert.notEqual(retried.topup.id, event?.id);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 20000n);
  await assertLedgerBalanced(t);
});

test("a number the carrier refuses is 5604 and refunded, and the key's final answer, also when the worker learns it", async () => {
  const sim = airtimeSimulator(t);
  const payer = await createTenant(t, { available: 100 });
  expectError(await topup(payer, body({ phone_number: "0512345678" })), 5604, 422);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 10000n);
  // Regression (concurrency audit): the key was forgotten on a failure, so a replay after the
  // refusal, or after a PENDING answer the worker later settled as refused, started a new top-up.
  const refused = expectError(
    await topup(payer, body({ phone_number: "0512345678" }), "air-refused"),
    5604,
    422,
  );
  const replay = await topup(payer, body({ phone_number: "0512345678" }), "air-refused");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.deepEqual(replay.body, refused.body);
  sim.decide = () => "UNAVAILABLE";
  const pending = expectOk(await topup(payer, body({ phone_number: "0512345679" }), "air-later"));
  assert.equal(pending.topup.status, "PENDING");
  sim.decide = () => ({ status: "FAILED", reason: "Número no válido", retryable: false });
  await expireRailLeases(t);
  assert.equal(await processPendingTopups({ db: t.ctx.db, provider: t.ctx.rails.airtime }), 1);
  sim.decide = undefined;
  const settled = await topup(payer, body({ phone_number: "0512345679" }), "air-later");
  expectError(settled, 5604, 422);
  assert.equal(settled.headers["idempotent-replayed"], "true");
  const attempts = await t.ctx.db
    .selectFrom("airtime_topups")
    .select("id")
    .where("client_id", "=", payer.clientId)
    .execute();
  assert.equal(attempts.length, 3);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 10000n);
  await assertLedgerBalanced(t);
});

test("when recording the provider's answer fails, the paid top-up is answered PENDING, never 503", async () => {
  // Regression (concurrency audit): a database outage between the provider's answer and its record
  // was answered 503 (6001) although the top-up was paid and delivered: a retry without a key paid
  // twice. The worker records the answer later.
  const payer = await createTenant(t, { available: 100 });
  const caller = await t.ctx.auth.authenticate(`Bearer ${payer.token}`);
  let down = false;
  const db = new Proxy(t.ctx.db, {
    get(target, property) {
      if (property === "transaction" && down) {
        return () => ({ execute: () => Promise.reject(new Error("Connection terminated unexpectedly")) });
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const provider = {
    topup: async (request: Parameters<typeof t.ctx.rails.airtime.topup>[0]) => {
      const answer = await t.ctx.rails.airtime.topup(request);
      down = true;
      return answer;
    },
    close: async () => {},
  };
  const answer = await topupAirtime(
    { db, provider },
    caller,
    { productId: telcel100, phoneNumber: "5512345678", email: "a@example.com" },
    { apiKeyId: caller.apiKeyId, key: "air-outage", requestHash: "h" },
  );
  assert.equal(answer.status, 200);
  const data = (answer.body as { data: TopupData }).data;
  assert.equal(data.topup.status, "PENDING");
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 0n);
  await expireRailLeases(t);
  assert.equal(await processPendingTopups({ db: t.ctx.db, provider: t.ctx.rails.airtime }), 1);
  assert.equal((await stored(data.topup.id)).status, "COMPLETED");
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 0n);
  await assertLedgerBalanced(t);
});

test("an unanswered provider call leaves the top-up PENDING and paid; the worker finishes it once", async () => {
  const sim = airtimeSimulator(t);
  const payer = await createTenant(t, { available: 200 });
  sim.decide = () => "UNAVAILABLE";
  const pending = expectOk(await topup(payer, body(), "air-pending"));
  assert.equal(pending.topup.status, "PENDING");
  assert.equal(pending.topup.provider_reference, null);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 10000n);
  const deps = { db: t.ctx.db, provider: t.ctx.rails.airtime };
  // The request leased its job past its own call: a worker does not race it.
  assert.equal(await processPendingTopups(deps), 0);
  // The process "died" (or the provider stayed silent); after the lease the worker asks again.
  await expireRailLeases(t);
  assert.equal(await processPendingTopups(deps), 1);
  assert.equal((await stored(pending.topup.id)).status, "PENDING");
  sim.decide = undefined;
  await expireRailLeases(t);
  await processPendingTopups(deps);
  const done = expectOk(
    await call<TopupData>(t.app, "GET", `/v1/airtime/topups/${pending.topup.id}`, { token: payer.token }),
  );
  assert.equal(done.topup.status, "COMPLETED");
  assert.ok(done.topup.provider_reference);
  // The stored response follows the final outcome: a replay tells COMPLETED, and charges nothing.
  const replay = await topup(payer, body(), "air-pending");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.deepEqual(replay.body.data, done);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 10000n);
  assert.equal(sim.requests.filter((r) => r.id === pending.topup.id).length, 3);
  assert.equal((await eventsOf(t, payer.clientId, "airtime.completed")).length, 1);
  await expireRailLeases(t);
  assert.equal(await processPendingTopups(deps), 0);
  await assertLedgerBalanced(t);
});

test("a top-up finished after its key expired and was reused leaves the new request's answer alone", async () => {
  // Once a key is older than 48 hours it is free for a new request; the provider's late answer
  // to the old top-up must not replace (or forget) the answer stored for the new one.
  const sim = airtimeSimulator(t);
  const payer = await createTenant(t, { available: 300 });
  sim.decide = () => "UNAVAILABLE";
  const old = expectOk(await topup(payer, body(), "air-reused")).topup;
  assert.equal(old.status, "PENDING");
  await sql`
    update idempotency_keys set created_at = now() - make_interval(hours => ${limits.idempotencyKeyTtlHours + 1})
    where api_key_id = ${payer.apiKeyId} and key = 'air-reused'`.execute(t.ctx.db);
  sim.decide = undefined;
  const renewed = await topup(payer, body(), "air-reused");
  assert.equal(renewed.headers["idempotent-replayed"], undefined);
  const fresh = expectOk(renewed).topup;
  assert.notEqual(fresh.id, old.id);
  assert.equal(fresh.status, "COMPLETED");
  await expireRailLeases(t);
  assert.equal(await processPendingTopups({ db: t.ctx.db, provider: t.ctx.rails.airtime }), 1);
  assert.equal((await stored(old.id)).status, "COMPLETED");
  const replay = await topup(payer, body(), "air-reused");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.equal(expectOk(replay).topup.id, fresh.id);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 10000n);
  await assertLedgerBalanced(t);
});

test("a provider slower than the call's timeout: the retry is answered at once and the top-up reaches its final state", async () => {
  // Regression (audit): with EMISOR_SIM_AIRTIME_DELAY_MS at or above the call's timeout, the
  // simulator waited the whole delay again before looking up its answer, so every retry timed out
  // too and the top-up stayed PENDING for ever, its debit held.
  const payer = await createTenant(t, { available: 200 });
  airtimeSimulator(t).decide = () => "UNAVAILABLE";
  const pending = expectOk(await topup(payer, body(), "air-slow")).topup;
  assert.equal(pending.status, "PENDING");
  const slow = new AirtimeSimulator({ delayMs: 6 * limits.railCallTimeoutMs, failureProbability: 0 });
  try {
    const product = await t.ctx.db
      .selectFrom("airtime_products")
      .selectAll()
      .where("id", "=", telcel100)
      .executeTakeFirstOrThrow();
    // The first call reached the provider, which decided it; its answer comes after the caller's
    // deadline gave up on it (askProvider abandons the call as this does).
    void slow.topup(providerRequest(pending.id, pending.phone_number, product));
    await expireRailLeases(t);
    const started = Date.now();
    assert.equal(await processPendingTopups({ db: t.ctx.db, provider: slow }), 1);
    assert.ok(Date.now() - started < limits.railCallTimeoutMs, "the retry waited the delay again");
  } finally {
    await slow.close();
  }
  const done = await stored(pending.id);
  assert.equal(done.status, "COMPLETED");
  assert.ok(done.provider_reference);
  assert.equal(slow.requests.filter((r) => r.id === pending.id).length, 2);
  assert.equal(slow.delivered, 1);
  const replay = await topup(payer, body(), "air-slow");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.equal(expectOk(replay).topup.status, "COMPLETED");
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 10000n);
  await assertLedgerBalanced(t);
});

test("Idempotency-Key: the same request twice (and concurrently) charges once and answers alike", async () => {
  const payer = await createTenant(t, { available: 1000 });
  const first = await topup(payer, body(), "air-idem");
  const again = await topup(payer, body(), "air-idem");
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(again.body, first.body);
  expectError(await topup(payer, body({ phone_number: "5599999999" }), "air-idem"), 4001, 409);
  const racing = await Promise.all(Array.from({ length: 5 }, () => topup(payer, body(), "air-race")));
  assert.equal(new Set(racing.map((r) => expectOk(r).topup.id)).size, 1);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), 80000n);
  assert.equal(airtimeSimulator(t).requests.filter((r) => r.id === expectOk(first).topup.id).length, 1);
});

test("tenancy: another tenant's top-up is 404", async () => {
  const data = expectOk(await topup(tenant, body({ product_id: "BAIT_50" })));
  const stranger = await createTenant(t);
  expectError(
    await call(t.app, "GET", `/v1/airtime/topups/${data.topup.id}`, { token: stranger.token }),
    3602,
    404,
  );
  expectError(
    await call(t.app, "GET", `/v1/airtime/topups/${randomUUID()}`, { token: tenant.token }),
    3602,
    404,
  );
  expectOk(await call(t.app, "GET", `/v1/airtime/topups/${data.topup.id}`, { token: tenant.token }));
});
