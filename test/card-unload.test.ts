// Proves the card unload (POST /v1/cards/unload): money leaves a card for its client's main balance
// in one balanced entry, in every card status (canceled, blocked, expired, a SPEI refund landed on a
// canceled card), part or all of the balance; more than the balance or an empty card is refused
// with nothing written; the money always reaches the card's own client, whoever of its ancestors
// calls; strangers get 3302; retries replay; concurrent unloads never overdraw the card.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { encryptFor } from "../src/crypto/rsa.ts";
import { buildClabe } from "../src/domain/clabe.ts";
import { balanceOf, checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { dispatchSpeiOrders } from "../src/modules/transfers/dispatcher.ts";
import {
  call,
  createSubClient,
  createTenant,
  expectError,
  expectOk,
  type Response,
  type Tenant,
} from "./helpers/api.ts";
import { type AssignedCard, cardsFor, panOf, spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { eventsOf, postSigned, speiSimulator } from "./helpers/rails.ts";
import { changesBetween, snapshot, tablesOf } from "./helpers/routes.ts";

let t: TestApp;
let tables: string[];
before(async () => {
  t = await startTestApp({ speiWebhookSecret: "rail-secret-unload" });
  speiSimulator(t).hold();
  tables = await tablesOf(t);
});
after(() => t.close());

interface Unload {
  operation: { id: string; kind: string; amount: number; description: string | null };
  card: {
    id: string;
    type: string;
    status: string;
    masked_card_number: string;
    last_four: string;
    balance: number;
  };
  client: { id: string; available: number };
}

interface Movement {
  entry_id: string;
  type: string;
  kind: string;
  amount: number;
  description: string | null;
}

const where = { latitude: 19.4326, longitude: -99.1332 };

function unload(
  tenant: Tenant,
  cardNumber: string,
  extra: Record<string, unknown> = {},
  headers?: Record<string, string>,
): Promise<Response<Unload>> {
  return call<Unload>(t.app, "POST", "/v1/cards/unload", {
    token: tenant.token,
    body: { card_number: cardNumber, ...extra },
    ...(headers ? { headers } : {}),
  });
}

function pay(tenant: Tenant, cardId: string, amount: number) {
  return call(t.app, "POST", "/v1/cards/payment", {
    token: tenant.token,
    body: { card_number: cardId, amount, payment_description: "fondeo", ...where },
  });
}

function setStatus(tenant: Tenant, cardId: string, status: string) {
  return call(t.app, "PUT", "/v1/cards/status", {
    token: tenant.token,
    body: { card_number: cardId, status, ...where },
  });
}

/** A tenant holding `available` pesos with `count` ACTIVE cards, each paid `funds` from it. */
async function fundedCards(
  available: number,
  funds: number,
  count = 1,
): Promise<{ tenant: Tenant; cards: AssignedCard[] }> {
  const tenant = await createTenant(t, { available });
  const cards = await cardsFor(t, tenant, count, { activate: true });
  for (const card of cards) if (funds > 0) expectOk(await pay(tenant, card.id, funds));
  return { tenant, cards };
}

async function movementsOf(tenant: Tenant, cardId: string): Promise<Movement[]> {
  return expectOk(
    await call<{ movements: { items: Movement[] } }>(t.app, "GET", `/v1/cards/${cardId}/movements`, {
      token: tenant.token,
    }),
  ).movements.items;
}

/** Runs `attempt`, which must be refused with `code`, and checks that no table changed. */
async function refusedWritingNothing(attempt: () => Promise<Response>, code: number): Promise<Response> {
  const before = await snapshot(t, tables);
  const response = expectError(await attempt(), code, code < 5000 ? undefined : 422);
  assert.deepEqual(changesBetween(before, await snapshot(t, tables)), []);
  return response;
}

test("an unload of part, then of the whole balance: the answer, the balances, the movements and the event", async () => {
  const {
    tenant,
    cards: [card],
  } = await fundedCards(1000, 250.75);
  assert.ok(card);
  const part = await unload(tenant, card.id, { amount: 100.5, description: "Devolución a empresa" });
  const data = expectOk(part);
  assert.deepEqual(Object.keys(data).sort(), ["card", "client", "operation"]);
  assert.match(data.operation.id, /^[0-9a-f-]{36}$/);
  assert.deepEqual(
    { ...data, operation: { ...data.operation, id: "" } },
    {
      operation: { id: "", kind: "CARD_UNLOAD", amount: 100.5, description: "Devolución a empresa" },
      card: {
        id: card.id,
        type: "PHYSICAL",
        status: "ACTIVE",
        masked_card_number: `************${card.lastFour}`,
        last_four: card.lastFour,
        balance: 150.25,
      },
      client: { id: tenant.clientId, available: 849.75 },
    },
  );
  assert.equal(await balanceOf(t.ctx.db, card.id), 15_025n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 84_975n);
  // The event is the answer, owned by the card's client, written with the change.
  assert.deepEqual((await eventsOf(t, tenant.clientId, "card.unloaded")).at(-1), data);

  // Without amount: the whole balance, and the card is left at 0.00.
  const whole = expectOk(await unload(tenant, card.id));
  assert.equal(whole.operation.amount, 150.25);
  assert.equal(whole.operation.description, null);
  assert.equal(whole.card.balance, 0);
  assert.equal(whole.client.available, 1000);
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 100_000n);

  // The card's movements show both, newest first, as debits of their own kind.
  const movements = await movementsOf(tenant, card.id);
  assert.deepEqual(
    movements.map(({ entry_id, type, kind, amount, description }) => ({
      entry_id,
      type,
      kind,
      amount,
      description,
    })),
    [
      { entry_id: whole.operation.id, type: "DEBIT", kind: "CARD_UNLOAD", amount: 150.25, description: null },
      {
        entry_id: data.operation.id,
        type: "DEBIT",
        kind: "CARD_UNLOAD",
        amount: 100.5,
        description: "Devolución a empresa",
      },
      {
        entry_id: movements[2]?.entry_id ?? "",
        type: "CREDIT",
        kind: "CARD_PAYMENT",
        amount: 250.75,
        description: "fondeo",
      },
    ],
  );
  const detail = expectOk(
    await call<{ card: { balance: number } }>(t.app, "GET", `/v1/cards/${card.id}`, { token: tenant.token }),
  );
  assert.equal(detail.card.balance, 0);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("canceled, blocked, not yet activated and expired cards can be unloaded (they can no longer spend)", async () => {
  const tenant = await createTenant(t, { available: 400 });
  const [canceled, blocked, fresh, expired] = await cardsFor(t, tenant, 4);
  assert.ok(canceled && blocked && fresh && expired);
  for (const card of [canceled, blocked, fresh, expired]) expectOk(await pay(tenant, card.id, 100));
  for (const card of [canceled, blocked, expired])
    expectOk(
      await call(t.app, "POST", "/v1/cards/activate", {
        token: tenant.token,
        body: { card_number: card.id, ...where },
      }),
    );
  expectOk(await setStatus(tenant, canceled.id, "CANCELED"));
  expectOk(await setStatus(tenant, blocked.id, "TEMPORARY_INACTIVE"));
  // No operation expires a card before its date: the test moves the date into the past.
  await sql`update cards set expires_on = date '2020-01-31' where id = ${expired.id}`.execute(t.ctx.db);
  // The auditor's case: 100 paid onto a card that was then canceled cannot be spent or paid onto.
  expectError(await pay(tenant, canceled.id, 1), 5402, 422);

  const cases: Array<[AssignedCard, string]> = [
    [canceled, "CANCELED"],
    [blocked, "TEMPORARY_INACTIVE"],
    [fresh, "NEED_ACTIVATION"],
    [expired, "ACTIVE"],
  ];
  for (const [card, status] of cases) {
    const data = expectOk(await unload(tenant, card.id));
    assert.equal(data.card.status, status);
    assert.equal(data.operation.amount, 100);
    assert.equal(data.card.balance, 0);
    assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  }
  // Every peso is back where it started; the canceled card is still canceled.
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 40_000n);
  const canceledNow = expectOk(
    await call<{ card: { status: string } }>(t.app, "GET", `/v1/cards/${canceled.id}`, {
      token: tenant.token,
    }),
  );
  assert.equal(canceledNow.card.status, "CANCELED");
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a SPEI transfer out returned after its card was canceled is refunded onto the card, and unloaded from it", async () => {
  const tenant = await createTenant(t, { available: 1001 });
  const card = await spendableCard(t, tenant, { commission: 10, funds: 1000 });
  const sent = expectOk(
    await call<{ transfer: { id: string; tracking_key: string; operation_date: string } }>(
      t.app,
      "POST",
      "/v1/transfer/cards",
      {
        token: tenant.token,
        body: {
          card_number: card.id,
          payment_concept: "Pago de renta",
          beneficiary_account: buildClabe("012", "180", 1234567n),
          beneficiary_institution: "40012",
          amount: 988.4,
          beneficiary_name: "Maria Lopez",
          numeric_reference: "1234567",
          beneficiary_rfc_curp: "ND",
          beneficiary_email: "maria@example.mx",
          pin: "4821",
        },
      },
    ),
  ).transfer;
  // 988.40 + 10.00 commission + 1.60 IVA: the card is empty while the transfer is out.
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  await dispatchSpeiOrders({ db: t.ctx.db, rail: t.ctx.rails.spei, vaultKey: t.ctx.keys.vault });
  expectOk(await setStatus(tenant, card.id, "CANCELED"));
  expectError(await unload(tenant, card.id), 5404, 422);
  // The receiving bank returns it: the rail's signed callback refunds the canceled card in full.
  const returned = expectOk(
    await postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: sent.tracking_key,
      FechaOperacion: sent.operation_date.replace(/-/g, ""),
      Estado: "DEVOLUCION",
      CausaDevolucion: "03",
    }),
  ) as { applied: boolean };
  assert.equal(returned.applied, true);
  assert.equal(await balanceOf(t.ctx.db, card.id), 100_000n);
  // The canceled card cannot spend it, and cannot be reactivated; the unload takes it out.
  expectError(await setStatus(tenant, card.id, "ACTIVE"), 5304, 422);
  const data = expectOk(await unload(tenant, card.id, { description: "Devolución SPEI" }));
  assert.equal(data.operation.amount, 1000);
  assert.equal(data.card.status, "CANCELED");
  assert.equal(data.client.available, 1001);
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 100_100n);
  const kinds = (await movementsOf(tenant, card.id)).map((m) => `${m.type} ${m.kind}`);
  assert.deepEqual(kinds.slice(0, 3), ["DEBIT CARD_UNLOAD", "CREDIT SPEI_OUT_RETURN", "DEBIT SPEI_OUT"]);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("more than the balance is 5403, an empty card is 5404, and neither writes anything", async () => {
  const {
    tenant,
    cards: [card, empty],
  } = await fundedCards(200, 100, 2);
  assert.ok(card && empty);
  expectOk(await unload(tenant, empty.id));
  const over = await refusedWritingNothing(() => unload(tenant, card.id, { amount: 100.01 }), 5403);
  assert.match(over.body.message, /100\.01.*100\.00/);
  // Empty: with or without an amount, there is nothing to unload.
  await refusedWritingNothing(() => unload(tenant, empty.id), 5404);
  await refusedWritingNothing(() => unload(tenant, empty.id, { amount: 1 }), 5404);
  // A card never paid has a balance of 0.00 too.
  const [unpaid] = await cardsFor(t, tenant, 1);
  assert.ok(unpaid);
  await refusedWritingNothing(() => unload(tenant, unpaid.id), 5404);
  // Exactly the balance is fine.
  expectOk(await unload(tenant, card.id, { amount: 100 }));
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 20_000n);
});

test("every invalid field is refused with 1000 (or 1301 for a number in clear) and moves nothing", async () => {
  const {
    tenant,
    cards: [card],
  } = await fundedCards(100, 50);
  assert.ok(card);
  const cases: Array<Record<string, unknown>> = [
    { amount: 0 },
    { amount: -1 },
    { amount: 1.001 },
    { amount: "10" },
    { amount: null },
    { amount: Number(limits.amountCentsMax) / 100 + 0.01 },
    { description: "" },
    { description: "   " },
    { description: "d".repeat(33) },
    { description: 5 },
    { latitude: 19.4 },
    { extra: true },
  ];
  for (const extra of cases) await refusedWritingNothing(() => unload(tenant, card.id, extra), 1000);
  await refusedWritingNothing(
    () => call(t.app, "POST", "/v1/cards/unload", { token: tenant.token, body: { amount: 1 } }),
    1000,
  );
  await refusedWritingNothing(() => unload(tenant, "4111111111111111"), 1301);
  await refusedWritingNothing(() => unload(tenant, "bm90IGEgY2lwaGVydGV4dA=="), 1005);
  const unauthenticated = await call(t.app, "POST", "/v1/cards/unload", { body: { card_number: card.id } });
  expectError(unauthenticated, 2001, 401);
  expectOk(await unload(tenant, card.id, { amount: 1, description: "d".repeat(32) }));
  assert.equal(await balanceOf(t.ctx.db, card.id), 4_900n);
});

test("a parent unloads its sub-client's card: the sub-client's main balance gets the money; outsiders get 3302", async () => {
  const root = await createTenant(t, { available: 1000 });
  const sub = await createSubClient(t, root, 300);
  const [subCard] = await cardsFor(t, sub, 1, { activate: true });
  const [rootCard] = await cardsFor(t, root, 1, { activate: true });
  assert.ok(subCard && rootCard);
  expectOk(await pay(sub, subCard.id, 200));
  expectOk(await pay(root, rootCard.id, 50));
  const pem = t.ctx.systemKey.publicKeyPem;

  // The parent names the card by its ciphered number: the sub-client is credited, not the parent.
  const data = expectOk(await unload(root, encryptFor(pem, await panOf(t, subCard.id)), { amount: 80 }));
  assert.deepEqual(data.client, { id: sub.clientId, available: 180 });
  assert.equal(await balanceOf(t.ctx.db, sub.clientId), 18_000n);
  assert.equal(await balanceOf(t.ctx.db, root.clientId), 70_000n - 5_000n);
  // The event belongs to the card's client, and the entry records who asked.
  assert.deepEqual((await eventsOf(t, sub.clientId, "card.unloaded")).at(-1), data);
  assert.deepEqual(await eventsOf(t, root.clientId, "card.unloaded"), []);
  const entry = await t.ctx.db
    .selectFrom("journal_entries")
    .select(["client_id", "metadata"])
    .where("id", "=", data.operation.id)
    .executeTakeFirstOrThrow();
  assert.equal(entry.client_id, sub.clientId);
  assert.deepEqual(entry.metadata, {
    card_id: subCard.id,
    unloaded_by_client_id: root.clientId,
    api_key_id: root.apiKeyId,
  });

  // A sub-client never reaches its parent's card, and a stranger reaches neither, by either form.
  const stranger = await createTenant(t, { available: 10 });
  for (const [actor, card] of [
    [sub, rootCard],
    [stranger, rootCard],
    [stranger, subCard],
  ] as const) {
    await refusedWritingNothing(() => unload(actor, card.id), 3302);
    await refusedWritingNothing(
      async () => unload(actor, encryptFor(pem, await panOf(t, card.id)), { amount: 1 }),
      3302,
    );
  }
  await refusedWritingNothing(() => unload(root, "00000000-0000-4000-8000-000000000000"), 3302);
  assert.equal(await balanceOf(t.ctx.db, rootCard.id), 5_000n);
  assert.equal(await balanceOf(t.ctx.db, subCard.id), 12_000n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("an Idempotency-Key replays the first answer and moves money once; another request under it is 409", async () => {
  const {
    tenant,
    cards: [card, other],
  } = await fundedCards(1000, 300, 2);
  assert.ok(card && other);
  const key = { "idempotency-key": "unload-1" };
  const first = expectOk(await unload(tenant, card.id, { amount: 10 }, key));
  const again = await unload(tenant, card.id, { amount: 10 }, key);
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(again), first);
  expectError(await unload(tenant, card.id, { amount: 11 }, key), 4001, 409);
  expectError(await unload(tenant, other.id, { amount: 10 }, key), 4001, 409);
  // The whole balance under a key: the retry is the first answer, not 5404 for the card now empty.
  const wholeKey = { "idempotency-key": "unload-whole" };
  const whole = expectOk(await unload(tenant, card.id, {}, wholeKey));
  assert.equal(whole.operation.amount, 290);
  const wholeAgain = await unload(tenant, card.id, {}, wholeKey);
  assert.equal(wholeAgain.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(wholeAgain), whole);
  // Ciphered again on retry (RSA-OAEP differs every time): still the same request.
  const pem = t.ctx.systemKey.publicKeyPem;
  const pan = await panOf(t, other.id);
  const cipheredKey = { "idempotency-key": "unload-ciphered" };
  const ciphered = expectOk(await unload(tenant, encryptFor(pem, pan), { amount: 5 }, cipheredKey));
  const cipheredAgain = await unload(tenant, encryptFor(pem, pan), { amount: 5 }, cipheredKey);
  assert.equal(cipheredAgain.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(cipheredAgain), ciphered);
  // A refusal is the key's final answer: funding the card does not let the retry move money.
  const refusedKey = { "idempotency-key": "unload-refused" };
  expectError(await unload(tenant, card.id, { amount: 50 }, refusedKey), 5404, 422);
  expectOk(await pay(tenant, card.id, 100));
  const refusedAgain = expectError(await unload(tenant, card.id, { amount: 50 }, refusedKey), 5404, 422);
  assert.equal(refusedAgain.headers["idempotent-replayed"], "true");
  assert.equal(await balanceOf(t.ctx.db, card.id), 10_000n);
  // Racing duplicates move the money once.
  const racing = await Promise.all(
    Array.from({ length: 8 }, () => unload(tenant, card.id, { amount: 7 }, { "idempotency-key": "race" })),
  );
  assert.equal(new Set(racing.map((r) => expectOk(r).operation.id)).size, 1);
  assert.equal(await balanceOf(t.ctx.db, card.id), 10_000n - 700n);
  const unloads = await t.ctx.db
    .selectFrom("journal_entries")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("kind", "=", "CARD_UNLOAD")
    .where("metadata", "@>", JSON.stringify({ card_id: card.id }))
    .executeTakeFirstOrThrow();
  assert.equal(Number(unloads.n), 3);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("20 concurrent unloads of 10 from a card holding 100: exactly 10 succeed, the card never goes below 0", async () => {
  const {
    tenant,
    cards: [card, odd],
  } = await fundedCards(200, 100, 2);
  assert.ok(card && odd);
  const responses = await Promise.all(
    Array.from({ length: 20 }, () => unload(tenant, card.id, { amount: 10 })),
  );
  const succeeded = responses.filter((r) => r.status === 200);
  assert.equal(succeeded.length, 10);
  // The ten refused found the card emptied by the ten that went first.
  for (const r of responses) if (r.status !== 200) expectError(r, 5404, 422);
  // Each success saw the balance its own debit left: 90, 80, ... 0, each once.
  assert.deepEqual(
    succeeded.map((r) => expectOk(r).card.balance).sort((x, y) => x - y),
    [0, 10, 20, 30, 40, 50, 60, 70, 80, 90],
  );
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 10_000n);

  // 95.00 on the card: nine succeed, and the rest are refused for the 5.00 left (5403).
  expectOk(await unload(tenant, odd.id, { amount: 5 }));
  const partial = await Promise.all(Array.from({ length: 20 }, () => unload(tenant, odd.id, { amount: 10 })));
  assert.equal(partial.filter((r) => r.status === 200).length, 9);
  for (const r of partial) if (r.status !== 200) expectError(r, 5403, 422);
  assert.equal(await balanceOf(t.ctx.db, odd.id), 500n);

  // Whole-balance unloads racing: one takes everything, the rest find the card empty.
  expectOk(await pay(tenant, card.id, 60));
  const wholes = await Promise.all(Array.from({ length: 6 }, () => unload(tenant, card.id)));
  assert.equal(wholes.filter((r) => r.status === 200).length, 1);
  for (const r of wholes) if (r.status !== 200) expectError(r, 5404, 422);
  assert.equal(await balanceOf(t.ctx.db, card.id), 0n);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 20_000n - 500n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("unloads racing payments of the same client and card: no deadlock, no error, every centavo accounted for", async () => {
  // An unload credits the main balance a payment debits, and debits the card the payment credits:
  // it takes its locks in the payment's order, so neither waits for the other in a cycle.
  const {
    tenant,
    cards: [card],
  } = await fundedCards(100, 50);
  assert.ok(card);
  const requests = Array.from({ length: 30 }, (_, i) =>
    i % 2 === 0 ? pay(tenant, card.id, 1) : unload(tenant, card.id, { amount: 1 }),
  );
  const responses = await Promise.all(requests);
  let paid = 0n;
  let unloaded = 0n;
  responses.forEach((r, i) => {
    expectOk(r);
    if (i % 2 === 0) paid += 100n;
    else unloaded += 100n;
  });
  assert.equal(await balanceOf(t.ctx.db, card.id), 5_000n + paid - unloaded);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 5_000n - paid + unloaded);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("unloads are rate limited per API key like the other money routes (2009, Retry-After)", async () => {
  const limited = await startTestApp({ rateLimitPerSecond: 3 });
  try {
    const tenant = await createTenant(limited, { available: 10 });
    const [card] = await cardsFor(limited, tenant, 1);
    assert.ok(card);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const response = await call(limited.app, "POST", "/v1/cards/unload", {
        token: tenant.token,
        body: { card_number: card.id },
      });
      statuses.push(response.status);
      if (response.status === 429) {
        expectError(response, 2009, 429);
        assert.ok(Number(response.headers["retry-after"]) >= 1);
      } else expectError(response, 5404, 422);
    }
    assert.ok(statuses.includes(429), `no 429 in ${statuses}`);
  } finally {
    await limited.close();
  }
});
