// Proves payments to cards (contract 4.6): the shape, exact balances and a balanced ledger, every
// rejection, idempotent retries, and that concurrent payments beyond the balance succeed exactly as
// far as the money goes.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { encryptFor } from "../src/crypto/rsa.ts";
import type { AppError } from "../src/errors.ts";
import { balanceOf, checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { findCardInScope } from "../src/modules/cards/repository.ts";
import { PaymentBatcher, type PaymentRequest } from "../src/modules/payments/batcher.ts";
import {
  call,
  createSubClient,
  createTenant,
  expectError,
  expectOk,
  type Response,
  type Tenant,
} from "./helpers/api.ts";
import { cardsFor, panOf } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { opensslEncrypt } from "./helpers/openssl.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

interface Payment {
  operation: { id: string; authorization_code: string; amount: number; payment_description: string };
  card: { id: string; masked_card_number: string; type: string; status: string };
  account: { id: string; reference: number };
}

const where = { latitude: 19.43261, longitude: -99.13321 };
function pay(
  tenant: Tenant,
  card_number: string,
  amount: unknown,
  extra: Record<string, unknown> = {},
  headers?: Record<string, string>,
) {
  return call<Payment>(t.app, "POST", "/v1/cards/payment", {
    token: tenant.token,
    body: { card_number, amount, payment_description: "Nómina quincenal", ...where, ...extra },
    ...(headers ? { headers } : {}),
  });
}

test("a payment moves exactly the amount and answers the 4.6 shape", async () => {
  const tenant = await createTenant(t, { available: 1000 });
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const data = expectOk(await pay(tenant, card.id, 250.75));
  assert.deepEqual(Object.keys(data).sort(), ["account", "card", "operation"]);
  assert.match(data.operation.authorization_code, /^[0-9]{6}$/);
  assert.equal(data.operation.amount, 250.75);
  assert.equal(data.operation.payment_description, "Nómina quincenal");
  assert.deepEqual(data.card, {
    id: card.id,
    masked_card_number: `************${card.lastFour}`,
    type: "PHYSICAL",
    status: "NEED_ACTIVATION",
  });
  assert.equal(data.account.id, card.accountId);
  assert.equal(typeof data.account.reference, "number");
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 74_925n);
  assert.equal(await balanceOf(t.ctx.db, card.id), 25_075n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
  const movements = expectOk(
    await call<{
      movements: {
        items: Array<{ type: string; amount: number; kind: string; description: string }>;
        total: number;
      };
    }>(t.app, "GET", `/v1/cards/${card.id}/movements`, { token: tenant.token }),
  );
  assert.equal(movements.movements.total, 1);
  assert.deepEqual(
    { ...movements.movements.items[0], id: undefined, entry_id: undefined, created_at: undefined },
    {
      id: undefined,
      entry_id: undefined,
      created_at: undefined,
      type: "CREDIT",
      amount: 250.75,
      kind: "CARD_PAYMENT",
      description: "Nómina quincenal",
    },
  );
  const detail = expectOk(
    await call<{ card: { balance: number } }>(t.app, "GET", `/v1/cards/${card.id}`, { token: tenant.token }),
  );
  assert.equal(detail.card.balance, 250.75);
});

interface MovementsPage {
  movements: {
    items: Array<{ id: string; amount: number }>;
    page: number;
    per_page: number;
    pages: number;
    total: number;
    next_cursor: string | null;
  };
}

test("card movements: a cursor walks every movement once while payments arrive; a cursor of another listing is 1000", async () => {
  const tenant = await createTenant(t, { available: 1000 });
  const [card, other] = await cardsFor(t, tenant, 2);
  assert.ok(card && other);
  for (let i = 1; i <= 5; i++) expectOk(await pay(tenant, card.id, i));
  const movements = (query: string) =>
    call<MovementsPage>(t.app, "GET", `/v1/cards/${card.id}/movements?${query}`, { token: tenant.token });
  const first = expectOk(await movements("per_page=2")).movements;
  assert.deepEqual(
    first.items.map((item) => item.amount),
    [5, 4],
  );
  assert.deepEqual([first.page, first.per_page, first.pages, first.total], [1, 2, 3, 5]);
  assert.ok(first.next_cursor);
  // Two payments arrive while the client pages: by page number, page 2 would repeat 4 and 5.
  expectOk(await pay(tenant, card.id, 6));
  expectOk(await pay(tenant, card.id, 7));
  const byPage = expectOk(await movements("per_page=2&page=2")).movements;
  assert.deepEqual(
    byPage.items.map((item) => item.amount),
    [5, 4],
  );
  const second = expectOk(await movements(`per_page=2&page=9&cursor=${first.next_cursor}`)).movements;
  assert.deepEqual(
    second.items.map((item) => item.amount),
    [3, 2],
  );
  assert.deepEqual([second.page, second.total, second.pages], [2, 7, 4]);
  assert.ok(second.next_cursor);
  const third = expectOk(await movements(`per_page=2&cursor=${second.next_cursor}`)).movements;
  assert.deepEqual(
    third.items.map((item) => item.amount),
    [1],
  );
  assert.equal(third.page, 3);
  assert.equal(third.next_cursor, null);
  // A page that ends exactly on the last movement has no next cursor either.
  const exact = expectOk(await movements("per_page=7")).movements;
  assert.equal(exact.items.length, 7);
  assert.equal(exact.next_cursor, null);

  const refusedFor = async (query: string, card_id = card.id) => {
    const answer = await call(t.app, "GET", `/v1/cards/${card_id}/movements?${query}`, {
      token: tenant.token,
    });
    return expectError(answer, 1000, 400).body.data as { details: Array<{ field: string; rule: string }> };
  };
  const cursor = first.next_cursor;
  const tag = createHash("sha256").update(`${card.id}\n2`).digest("base64url").slice(0, 12);
  const forged = (fields: object) => Buffer.from(JSON.stringify({ ...fields, q: tag })).toString("base64url");
  expectOk(await movements(`per_page=2&cursor=${forged({ i: "1", p: 1 })}`));
  for (const [query, cardId] of [
    [`per_page=3&cursor=${cursor}`, card.id],
    [`per_page=2&cursor=${cursor}`, other.id],
    ["cursor=bm90IGpzb24", card.id],
    [`per_page=2&cursor=${forged({ i: "9223372036854775808", p: 1 })}`, card.id],
    [`per_page=2&cursor=${forged({ i: "12", p: 0 })}`, card.id],
    [`per_page=2&cursor=${forged({ i: 12, p: 1 })}`, card.id],
    ["cursor=%2B%2B", card.id],
  ] as const) {
    const { details } = await refusedFor(query, cardId);
    assert.deepEqual(
      details.map((detail) => [detail.field, detail.rule]),
      [["cursor", "cursor"]],
      query,
    );
  }
});

test("a ciphered PAN made with openssl pays the right card", async () => {
  const tenant = await createTenant(t, { available: 100 });
  const [, card] = await cardsFor(t, tenant, 2, { activate: true });
  assert.ok(card);
  const cipher = opensslEncrypt(t.ctx.systemKey.publicKeyPem, await panOf(t, card.id));
  const data = expectOk(await pay(tenant, cipher, 10));
  assert.equal(data.card.id, card.id);
  assert.equal(data.card.status, "ACTIVE");
  assert.equal(await balanceOf(t.ctx.db, card.id), 1000n);
});

test("every invalid field is refused with 1000 and moves nothing", async () => {
  const tenant = await createTenant(t, { available: 100 });
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const cases: Array<[unknown, Record<string, unknown>]> = [
    [0, {}],
    [-1, {}],
    [1.001, {}],
    ["10", {}],
    [null, {}],
    [Number(limits.amountCentsMax) / 100 + 0.01, {}],
    [1, { payment_description: "" }],
    [1, { payment_description: "d".repeat(33) }],
    [1, { latitude: 90.1 }],
    [1, { longitude: -180.5 }],
    [1, { latitude: 19.123456 }],
    [1, { latitude: "19.4" }],
    [1, { extra: true }],
  ];
  for (const [amount, extra] of cases) expectError(await pay(tenant, card.id, amount, extra), 1000, 400);
  expectOk(
    await pay(tenant, card.id, 1, { payment_description: "d".repeat(32), latitude: -90, longitude: 180 }),
  );
  expectError(await pay(tenant, "4111111111111111", 1), 1301, 400);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 9_900n);
});

test("a refusal is final for its key: after funding, the same key replays 5401 and pays nothing; a new key pays", async () => {
  const tenant = await createTenant(t, { available: 50 });
  const [card] = await cardsFor(t, tenant, 1, { activate: true });
  assert.ok(card);
  const refused = await pay(tenant, card.id, 50.01, {}, { "idempotency-key": "refused-1" });
  expectError(refused, 5401, 422);
  expectOk(await call(t.app, "POST", "/v1/sandbox/funding", { token: tenant.token, body: { amount: 100 } }));
  const again = await pay(tenant, card.id, 50.01, {}, { "idempotency-key": "refused-1" });
  expectError(again, 5401, 422);
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(again.body, refused.body);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 15_000n);
  expectOk(await pay(tenant, card.id, 50.01, {}, { "idempotency-key": "refused-2" }));
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 15_000n - 5_001n);
});

test("rejections: insufficient balance 5401, blocked or canceled card 5402, another tenant's card 3302", async () => {
  const tenant = await createTenant(t, { available: 50 });
  const [card, blocked, canceled] = await cardsFor(t, tenant, 3, { activate: true });
  assert.ok(card && blocked && canceled);
  expectError(await pay(tenant, card.id, 50.01), 5401, 422);
  const status = (id: string, s: string) =>
    call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: id, status: s, ...where },
    });
  expectOk(await status(blocked.id, "TEMPORARY_INACTIVE"));
  expectOk(await status(canceled.id, "CANCELED"));
  expectError(await pay(tenant, blocked.id, 1), 5402, 422);
  expectError(await pay(tenant, canceled.id, 1), 5402, 422);
  const stranger = await createTenant(t, { available: 50 });
  expectError(await pay(stranger, card.id, 1), 3302, 404);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 5_000n);
  assert.equal(await balanceOf(t.ctx.db, stranger.clientId), 5_000n);
  expectOk(await pay(tenant, card.id, 50));
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 0n);
});

test("an idempotent retry pays once, even when the retries race; another body with the key is 409", async () => {
  const tenant = await createTenant(t, { available: 100 });
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const key = { "idempotency-key": "pay-1" };
  const first = expectOk(await pay(tenant, card.id, 10, {}, key));
  const again = await pay(tenant, card.id, 10, {}, key);
  assert.deepEqual(expectOk(again), first);
  assert.equal(again.headers["idempotent-replayed"], "true");
  expectError(await pay(tenant, card.id, 11, {}, key), 4001, 409);
  // Refused before its batch (no such card), the request still finds its key used: 409, not 404.
  expectError(await pay(tenant, "00000000-0000-4000-8000-000000000000", 10, {}, key), 4001, 409);
  const racing = await Promise.all(
    Array.from({ length: 10 }, () => pay(tenant, card.id, 5, {}, { "idempotency-key": "pay-2" })),
  );
  assert.equal(new Set(racing.map((r) => expectOk(r).operation.id)).size, 1);
  const mixed = await Promise.all([
    pay(tenant, card.id, 1, {}, { "idempotency-key": "pay-3" }),
    pay(tenant, card.id, 2, {}, { "idempotency-key": "pay-3" }),
  ]);
  assert.deepEqual(mixed.map((r) => r.status).sort(), [200, 409]);
  const paidOnce = 100n * 100n - 1000n - 500n - (mixed[0]?.status === 200 ? 100n : 200n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), paidOnce);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a retry that ciphers the card number again, or writes the UUID in capitals, is a replay, not a 409", async () => {
  // Regression (contract audit): RSA-OAEP gives another ciphertext at every encryption, and the
  // key's fingerprint held the ciphertext, so a client that ciphered again on retry got 4001.
  const tenant = await createTenant(t, { available: 100 });
  const [card, other] = await cardsFor(t, tenant, 2);
  assert.ok(card && other);
  const pem = t.ctx.systemKey.publicKeyPem;
  const pan = await panOf(t, card.id);
  const key = { "idempotency-key": "pay-ciphered" };
  const first = expectOk(await pay(tenant, encryptFor(pem, pan), 10, {}, key));
  const again = await pay(tenant, encryptFor(pem, pan), 10, {}, key);
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(again), first);
  // What the ciphertext names still counts: another card, or another amount, is another request.
  expectError(await pay(tenant, encryptFor(pem, await panOf(t, other.id)), 10, {}, key), 4001, 409);
  expectError(await pay(tenant, encryptFor(pem, pan), 11, {}, key), 4001, 409);
  const upperKey = { "idempotency-key": "pay-upper" };
  const byId = expectOk(await pay(tenant, card.id, 5, {}, upperKey));
  const upper = await pay(tenant, card.id.toUpperCase(), 5, {}, upperKey);
  assert.equal(upper.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(upper), byId);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 10_000n - 1_000n - 500n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

/** The final balance is below every refused amount: nothing affordable was refused. */
function assertExactlyAffordable(
  start: bigint,
  amounts: bigint[],
  responses: Response<Payment>[],
  final: bigint,
) {
  let paid = 0n;
  responses.forEach((response, i) => {
    if (response.status === 200) paid += amounts[i] ?? 0n;
    else expectError(response, 5401, 422);
  });
  assert.equal(final, start - paid);
  assert.ok(final >= 0n);
  responses.forEach((response, i) => {
    if (response.status !== 200)
      assert.ok((amounts[i] ?? 0n) > final, `a refused payment of ${amounts[i]} fits in ${final}`);
  });
}

test("50 concurrent payments beyond the balance: exactly the affordable ones succeed", async () => {
  const tenant = await createTenant(t, { available: 1000 });
  const cards = await cardsFor(t, tenant, 5, { activate: true });
  const amounts = Array.from({ length: 50 }, () => 3_000n); // 50 x 30.00 against 1000.00
  const responses = await Promise.all(
    amounts.map((a, i) => pay(tenant, cards[i % 5]?.id ?? "", Number(a) / 100)),
  );
  assert.equal(responses.filter((r) => r.status === 200).length, 33);
  const final = await balanceOf(t.ctx.db, tenant.clientId);
  assert.equal(final, 1_000n);
  assertExactlyAffordable(100_000n, amounts, responses, final);
  const onCards = await Promise.all(cards.map((c) => balanceOf(t.ctx.db, c.id)));
  assert.equal(
    onCards.reduce((a, b) => a + b, 0n),
    99_000n,
  );
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("property: random concurrent payments never overdraw and never refuse what fits", async () => {
  const tenant = await createTenant(t);
  const cards = await cardsFor(t, tenant, 3);
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 1, max: 40_000 }), { minLength: 1, maxLength: 30 }),
      fc.integer({ min: 0, max: 200_000 }),
      async (raw, fund) => {
        const start = await balanceOf(t.ctx.db, tenant.clientId);
        if (fund > 0)
          expectOk(
            await call(t.app, "POST", "/v1/sandbox/funding", {
              token: tenant.token,
              body: { amount: fund / 100 },
            }),
          );
        const before = start + BigInt(fund);
        const amounts = raw.map(BigInt);
        const responses = await Promise.all(
          amounts.map((a, i) => pay(tenant, cards[i % 3]?.id ?? "", Number(a) / 100)),
        );
        assertExactlyAffordable(before, amounts, responses, await balanceOf(t.ctx.db, tenant.clientId));
      },
    ),
    { numRuns: 15 },
  );
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("payers paying at the same moment share batches, and each is decided against its own balance", async () => {
  const [a, b, c, d, e] = await Promise.all([
    createTenant(t, { available: 100 }),
    createTenant(t, { available: 100 }),
    createTenant(t, { available: 30 }),
    createTenant(t, { available: 50 }),
    createTenant(t, { available: 50 }),
  ]);
  assert.ok(a && b && c && d && e);
  const [aCards, bCards, cCards, dCards, eCards] = await Promise.all(
    [a, b, c, d, e].map((tenant) => cardsFor(t, tenant, 2, { activate: true })),
  );
  const blocked = cCards?.[1]?.id ?? "";
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: c.token,
      body: { card_number: blocked, status: "TEMPORARY_INACTIVE", ...where },
    }),
  );
  // Interleaved, all in flight at once: A and B pay 12 x 10.00 from 100.00, C pays 4 x 10.00 from
  // 30.00 and 1.00 twice to its blocked card; D sends one key twice, E the same key string.
  const requests: Array<{ payer: Tenant; run: () => Promise<Response<Payment>> }> = [];
  for (let i = 0; i < 12; i++) {
    requests.push({ payer: a, run: () => pay(a, aCards?.[i % 2]?.id ?? "", 10) });
    requests.push({ payer: b, run: () => pay(b, bCards?.[i % 2]?.id ?? "", 10) });
    if (i < 4) requests.push({ payer: c, run: () => pay(c, cCards?.[0]?.id ?? "", 10) });
    if (i < 2) requests.push({ payer: c, run: () => pay(c, blocked, 1) });
    if (i < 2)
      requests.push({
        payer: d,
        run: () => pay(d, dCards?.[0]?.id ?? "", 10, {}, { "idempotency-key": "k" }),
      });
  }
  requests.push({ payer: e, run: () => pay(e, eCards?.[0]?.id ?? "", 10, {}, { "idempotency-key": "k" }) });
  const responses = await Promise.all(requests.map((r) => r.run()));
  const codes = (payer: Tenant) =>
    responses
      .filter((_, i) => requests[i]?.payer === payer)
      .map((r) => (r.status === 200 ? 0 : r.body.code))
      .sort();
  assert.deepEqual(codes(a), [...Array(10).fill(0), 5401, 5401]);
  assert.deepEqual(codes(b), [...Array(10).fill(0), 5401, 5401]);
  assert.deepEqual(codes(c), [0, 0, 0, 5401, 5402, 5402]);
  assert.deepEqual(codes(d), [0, 0]);
  const dResponses = responses
    .filter((_, i) => requests[i]?.payer === d)
    .map((r) => expectOk(r).operation.id);
  assert.equal(new Set(dResponses).size, 1, "one key, one payment");
  const eId = expectOk(responses.at(-1) as Response<Payment>).operation.id;
  assert.ok(!dResponses.includes(eId), "the same key string of another API key is another payment");
  const balances = await Promise.all([a, b, c, d, e].map((x) => balanceOf(t.ctx.db, x.clientId)));
  assert.deepEqual(balances, [0n, 0n, 0n, 4_000n, 4_000n]);
  // Every entry, posting and event belongs to its own payer.
  const entries = await t.ctx.db
    .selectFrom("journal_entries as j")
    .innerJoin("postings as p", "p.entry_id", "j.id")
    .select(["j.client_id", "p.account_id", "p.amount_cents"])
    .where("j.kind", "=", "CARD_PAYMENT")
    .where(
      "j.client_id",
      "in",
      [a, b, c, d, e].map((x) => x.clientId),
    )
    .where("p.amount_cents", "<", 0n)
    .execute();
  assert.equal(entries.length, 10 + 10 + 3 + 1 + 1);
  for (const row of entries)
    assert.equal(row.account_id, row.client_id, "the payer leg debits the entry's client");
  const events = await t.ctx.db
    .selectFrom("events")
    .select(["client_id", (eb) => eb.fn.countAll<string>().as("n")])
    .where("type", "=", "card.payment")
    .where(
      "client_id",
      "in",
      [a, b, c, d, e].map((x) => x.clientId),
    )
    .groupBy("client_id")
    .execute();
  const eventsOf = new Map(events.map((x) => [x.client_id, Number(x.n)]));
  assert.deepEqual(
    [a, b, c, d, e].map((x) => eventsOf.get(x.clientId)),
    [10, 10, 3, 1, 1],
  );
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("two processes paying from one balance: the guarded debit keeps exactly the affordable payments", async () => {
  // Two batchers on one database stand for two processes: neither knows what the other has in
  // flight, so provisional decisions race and the guarded debit, or the decision under the payer
  // locks, must settle them. A second payer with ample balance shares the batches, so a debit that
  // fails for one payer has to be taken back for the other.
  const tight = await createTenant(t, { available: 100 });
  const ample = await createTenant(t, { available: 10_000 });
  const cardsOf = async (tenant: Tenant) => {
    const cards = await cardsFor(t, tenant, 3, { activate: true });
    return Promise.all(cards.map((c) => findCardInScope(t.ctx.db, tenant.clientId, { id: c.id })));
  };
  const [tightCards, ampleCards] = await Promise.all([cardsOf(tight), cardsOf(ample)]);
  const processes = [new PaymentBatcher(t.ctx.db), new PaymentBatcher(t.ctx.db)];
  const request = (tenant: Tenant, i: number, amountCents: bigint): PaymentRequest => {
    const cards = tenant === tight ? tightCards : ampleCards;
    const card = cards[i % cards.length];
    assert.ok(card);
    return {
      payerId: tenant.clientId,
      apiKeyId: tenant.apiKeyId,
      card,
      amountCents,
      description: "dos procesos",
      ...where,
      idempotency: undefined,
    };
  };
  for (let round = 0; round < 3; round++) {
    const amounts = Array.from({ length: 40 }, (_, i) => BigInt(300 + ((i * 7919) % 400)));
    const [start, ampleStart] = await Promise.all([
      balanceOf(t.ctx.db, tight.clientId),
      balanceOf(t.ctx.db, ample.clientId),
    ]);
    const [results] = await Promise.all([
      Promise.allSettled(amounts.map((amount, i) => processes[i % 2]?.submit(request(tight, i, amount)))),
      Promise.all(amounts.map((amount, i) => processes[(i + 1) % 2]?.submit(request(ample, i, amount)))),
    ]);
    let paid = 0n;
    results.forEach((r, i) => {
      if (r.status === "fulfilled") paid += amounts[i] ?? 0n;
      else assert.equal((r.reason as AppError).def?.code, 5401, String(r.reason));
    });
    const final = await balanceOf(t.ctx.db, tight.clientId);
    assert.equal(final, start - paid);
    assert.ok(final >= 0n);
    results.forEach((r, i) => {
      if (r.status === "rejected")
        assert.ok((amounts[i] ?? 0n) > final, "a refused payment fits the final balance");
    });
    const ampleTotal = amounts.reduce((a, b) => a + b, 0n);
    assert.equal(await balanceOf(t.ctx.db, ample.clientId), ampleStart - ampleTotal);
    expectOk(await call(t.app, "POST", "/v1/sandbox/funding", { token: tight.token, body: { amount: 100 } }));
  }
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a batcher whose payer another process debits between its batches takes turns, and stops when alone", async () => {
  // Two batchers on one database stand for two processes paying from one balance. Alone, a
  // batcher finds the balance where its last batch left it; when the other debits in between, it
  // sends one batch per turn and gathers what is queued, and every payment still lands once.
  const payer = await createTenant(t, { available: 100_000 });
  const cards = await cardsFor(t, payer, 2, { activate: true });
  const card = await findCardInScope(t.ctx.db, payer.clientId, { id: cards[0]?.id ?? "" });
  assert.ok(card);
  const reported: boolean[] = [];
  const here = new PaymentBatcher(t.ctx.db, (_form, _size, sharing) => reported.push(sharing));
  const elsewhere = new PaymentBatcher(t.ctx.db);
  const pay = (batcher: PaymentBatcher, cents: bigint) =>
    batcher.submit({
      payerId: payer.clientId,
      apiKeyId: payer.apiKeyId,
      card,
      amountCents: cents,
      description: "turnos",
      ...where,
      idempotency: undefined,
    });
  const wave = (batcher: PaymentBatcher) => Promise.all(Array.from({ length: 5 }, () => pay(batcher, 100n)));
  const start = await balanceOf(t.ctx.db, payer.clientId);
  for (let i = 0; i < 8; i++) await wave(here);
  assert.equal(here.sharing, false);
  for (let i = 0; i < 8; i++) {
    await pay(elsewhere, 100n);
    await pay(here, 100n);
  }
  assert.equal(here.sharing, true);
  assert.equal(reported.at(-1), true, "the batch reports the sharing to /metrics");
  assert.equal(elsewhere.sharing, true);
  await Promise.all([wave(here), wave(here), wave(here)]);
  for (let i = 0; i < 8; i++) await wave(here);
  assert.equal(here.sharing, false);
  assert.equal(reported.at(-1), false);
  assert.equal(await balanceOf(t.ctx.db, payer.clientId), start - 100n * (40n + 16n + 15n + 40n));
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a batch decided at once falls back under lock when what it was decided on changed, and keeps arrival order", async () => {
  // One batcher stands for this process; a second one, on the same database, for another process
  // that changes the balance behind its back.
  const tenant = await createTenant(t, { available: 101 });
  const [x, y] = await Promise.all(
    (await cardsFor(t, tenant, 2)).map((c) => findCardInScope(t.ctx.db, tenant.clientId, { id: c.id })),
  );
  assert.ok(x && y);
  const forms: string[] = [];
  const batcher = new PaymentBatcher(t.ctx.db, (form) => forms.push(form));
  const elsewhere = new PaymentBatcher(t.ctx.db);
  const request = (card: typeof x, amountCents: bigint, key?: string): PaymentRequest => ({
    payerId: tenant.clientId,
    apiKeyId: tenant.apiKeyId,
    card,
    amountCents,
    description: "a la vez",
    ...where,
    idempotency: key ? { apiKeyId: tenant.apiKeyId, key, requestHash: `hash-${key}` } : undefined,
  });

  // 1.00 to X while it needs activation: at once; the batcher now believes 100.00 and X NEED_ACTIVATION.
  const first = await batcher.submit(request(x, 100n));
  assert.equal((first.body.data as Payment).card.status, "NEED_ACTIVATION");
  assert.deepEqual(forms, ["at_once"]);
  // Behind its back: X is activated and another process pays 30.00 (70.00 left).
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", {
      token: tenant.token,
      body: { card_number: x.id, ...where },
    }),
  );
  await elsewhere.submit(request(y, 3_000n));

  // 60.00 to X, then 30.00 to Y, in two batches in flight together. The first one's statement
  // finds X ACTIVE and writes nothing; the second one must then not take the money the first one's
  // payment still has a right to: it needs 90.00 and finds 70.00, so it falls back too, and under
  // lock, in arrival order, 60.00 is paid and 30.00 is refused.
  const [sixty, thirty] = await Promise.allSettled([
    batcher.submit(request(x, 6_000n)),
    batcher.submit(request(y, 3_000n)),
  ]);
  assert.equal(sixty.status, "fulfilled");
  assert.equal(sixty.status === "fulfilled" && (sixty.value.body.data as Payment).card.status, "ACTIVE");
  assert.equal(thirty.status, "rejected");
  assert.equal(thirty.status === "rejected" && (thirty.reason as AppError).def?.code, 5401);
  // Both fell back (the order in which the two report it is not fixed; their outcomes are).
  assert.deepEqual([...forms].sort(), ["at_once", "fell_back", "fell_back", "under_lock", "under_lock"]);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 1_000n);

  // A key another process already answered: the statement finds it taken, and the payment under
  // lock replays that answer instead of paying twice.
  const stored = await elsewhere.submit(request(y, 100n, "k-1"));
  forms.length = 0;
  const replay = await batcher.submit(request(y, 100n, "k-1"));
  assert.equal(replay.replayed, true);
  assert.deepEqual(replay.body, stored.body);
  assert.deepEqual(forms, ["fell_back", "under_lock"]);

  // A card canceled behind its back: refused under lock with 5402, nothing moved.
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: y.id, status: "CANCELED", ...where },
    }),
  );
  forms.length = 0;
  await assert.rejects(batcher.submit(request(y, 100n)), (error: AppError) => error.def?.code === 5402);
  assert.deepEqual(forms, ["fell_back", "under_lock"]);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 900n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("/metrics counts payment batches by the form they were applied in", async () => {
  const tenant = await createTenant(t, { available: 100 });
  const [card] = await cardsFor(t, tenant, 1, { activate: true });
  assert.ok(card);
  expectOk(await pay(tenant, card.id, 1));
  const metrics = await t.app.inject({ method: "GET", url: "/metrics" });
  const counted = (name: string) =>
    Number(new RegExp(`^${name}\\{form="at_once"\\} (\\d+)$`, "m").exec(metrics.body)?.[1] ?? 0);
  assert.ok(counted("emisor_payment_batches_total") >= 1, metrics.body);
  assert.ok(counted("emisor_payment_batch_payments_total") >= 1);
  assert.match(metrics.body, /^emisor_payment_batcher_sharing [01]$/m);
});

test("a disabled sub-client's cards receive no payment (5405) until it is enabled; its parent still unloads them", async () => {
  const root = await createTenant(t, { available: 1000 });
  const sub = await createSubClient(t, root, 100);
  const [subCard] = await cardsFor(t, sub, 1);
  const [ownCard] = await cardsFor(t, root, 1);
  assert.ok(subCard && ownCard);
  expectOk(await pay(root, subCard.id, 40));
  const setStatus = (status: string) =>
    call(t.app, "PUT", `/v1/clients/${sub.clientId}/status`, { token: root.token, body: { status } });
  expectOk(await setStatus("DISABLED"));
  // Money into a disabled client is refused, as incoming SPEI to it is returned; nothing moves,
  // and a retry under the same key answers the same refusal.
  const headers = { "idempotency-key": `disabled-${subCard.id}` };
  expectError(await pay(root, subCard.id, 10, {}, headers), 5405, 422);
  expectError(await pay(root, subCard.id, 10, {}, headers), 5405, 422);
  assert.equal(await balanceOf(t.ctx.db, root.clientId), 86_000n);
  assert.equal(await balanceOf(t.ctx.db, subCard.id), 4_000n);
  // The parent's own cards are not concerned, and it can still wind the sub-client down: the
  // card's money goes back to the sub-client's main balance.
  expectOk(await pay(root, ownCard.id, 5));
  expectOk(
    await call(t.app, "POST", "/v1/cards/unload", { token: root.token, body: { card_number: subCard.id } }),
  );
  assert.equal(await balanceOf(t.ctx.db, sub.clientId), 14_000n);
  expectOk(await setStatus("ACTIVE"));
  // The refusal was the key's answer: enabled again, the attempt it refused still moves nothing.
  // Regression (review): the 5405 was not stored, and the same key then paid.
  const replayed = expectError(await pay(root, subCard.id, 10, {}, headers), 5405, 422);
  assert.equal(replayed.headers["idempotent-replayed"], "true");
  assert.equal(await balanceOf(t.ctx.db, subCard.id), 0n);
  expectOk(await pay(root, subCard.id, 10));
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a payment onto a sub-client's card is announced to the sub-client too (card.payment.received), and only then", async () => {
  const root = await createTenant(t, { available: 1000 });
  const sub = await createSubClient(t, root, 0);
  const [subCard] = await cardsFor(t, sub, 1);
  const [ownCard] = await cardsFor(t, root, 1);
  assert.ok(subCard && ownCard);
  const answer = expectOk(await pay(root, subCard.id, 12.5));
  expectOk(await pay(root, ownCard.id, 1));
  type Feed = { events: Array<{ type: string; client_id: string; data: unknown }> };
  const feed = async (who: typeof root) =>
    expectOk(
      await call<Feed>(t.app, "GET", "/v1/events?type=card.payment,card.payment.received", {
        token: who.token,
      }),
    ).events.map((e) => [e.type, e.client_id, e.data]);
  // The sub-client's integration hears that its card was paid: the same data, the card and the
  // operation, nothing of the payer's balance.
  assert.deepEqual(await feed(sub), [["card.payment.received", sub.clientId, answer]]);
  const ownAnswerCount = (await feed(root)).filter(([type]) => type === "card.payment.received").length;
  assert.equal(ownAnswerCount, 1, "a payment onto one's own card has no received event");
  assert.deepEqual(
    (await feed(root)).map(([type, owner]) => [type, owner]),
    [
      ["card.payment", root.clientId],
      ["card.payment.received", sub.clientId],
      ["card.payment", root.clientId],
    ],
  );
});
