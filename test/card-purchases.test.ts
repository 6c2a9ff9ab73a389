// Proves card purchases through the processor's signed messages and the sandbox simulator: holds on
// approval and declines from the catalog, partial approval, reversals, clearings (split, tips, after
// expiry), force posts past the balance recorded as what the card owes and repaid by the next
// payment, returns and their reversal, advices, balance inquiries, expiry, repeats of a message id,
// the card's available/held/balance, the authorization views, events, isolation and the ledger.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { shardsOf, systemAccounts } from "../src/ledger/accounts.ts";
import { balanceOf, postEntry } from "../src/ledger/ledger.ts";
import { expireHolds, repayOwingCards } from "../src/modules/purchases/expiry.ts";
import type { MessageAnswer } from "../src/modules/purchases/service.ts";
import { purchaseSettings } from "../src/modules/purchases/service.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { assertLedgerBalanced, eventsOf, messageId, postCardMessage } from "./helpers/rails.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-purchases" });
  tenant = await createTenant(t, { available: 100_000 });
});
after(() => t.close());

/** The processor's answer, as the service shapes it. */
type Answer = MessageAnswer;

const merchant = { name: "OXXO INSURGENTES", city: "CDMX", country: "MEX", mcc: "5411", acceptor_id: "T1" };
const restaurant = { ...merchant, name: "TACOS EL GUERO", mcc: "5812" };

async function card(funds: number): Promise<string> {
  return (await spendableCard(t, tenant, { commission: 0, funds })).id;
}

async function message(body: Record<string, unknown>): Promise<Answer> {
  return expectOk(await postCardMessage(t, body)) as Answer;
}

async function authorize(
  cardId: string,
  cents: number,
  extra: Record<string, unknown> = {},
): Promise<Answer> {
  return message({
    type: "AUTHORIZATION",
    card_id: cardId,
    amount: cents,
    merchant,
    channel: "POS_CHIP",
    ...extra,
  });
}

async function cardView(cardId: string) {
  return expectOk(await call(t.app, "GET", `/v1/cards/${cardId}`, { token: tenant.token })) as {
    card: { balance: number; available: number; held: number; owed: number };
  };
}

async function authorizationView(id: string, token = tenant.token) {
  return call(t.app, "GET", `/v1/authorizations/${id}`, { token });
}

test("the messages route refuses unsigned calls, and every call when no secret is set", async () => {
  const body = { type: "BALANCE_INQUIRY", card_id: "00000000-0000-4000-8000-00000000abcd" };
  expectError(await postCardMessage(t, body, { header: null }), 2801, 401);
  expectError(await postCardMessage(t, body, { secret: "another-secret" }), 2801, 401);
  const unset = await startTestApp({ cardNetworkSecret: undefined });
  try {
    expectError(await postCardMessage(unset, body, { secret: "x" }), 6801, 503);
  } finally {
    await unset.close();
  }
});

test("an approval holds the amount; a repeated message id answers the first answer and holds once", async () => {
  const cardId = await card(500);
  const id = messageId();
  const first = await authorize(cardId, 12_345, { message_id: id });
  assert.equal(first.result, "APPROVED");
  assert.match(first.authorization_code ?? "", /^[0-9]{6}$/);
  assert.deepEqual(first.balance, { available: 37_655, held: 12_345, owed: 0 });
  const again = await postCardMessage(t, {
    type: "AUTHORIZATION",
    card_id: cardId,
    amount: 12_345,
    merchant,
    channel: "POS_CHIP",
    message_id: id,
  });
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(again), first);
  const view = await cardView(cardId);
  assert.deepEqual(
    {
      balance: view.card.balance,
      available: view.card.available,
      held: view.card.held,
      owed: view.card.owed,
    },
    { balance: 500, available: 376.55, held: 123.45, owed: 0 },
  );
  const listed = expectOk(await call(t.app, "GET", "/v1/cards?per_page=100", { token: tenant.token })) as {
    cards: { items: Array<{ id: string; balance: number; available: number; held: number }> };
  };
  const inList = listed.cards.items.find((item) => item.id === cardId);
  assert.deepEqual([inList?.balance, inList?.available, inList?.held], [500, 376.55, 123.45]);
  const detail = expectOk(await authorizationView(first.authorization_id ?? "")) as {
    authorization: { status: string; held: number; messages: Array<{ message_id: string }> };
  };
  assert.equal(detail.authorization.status, "PENDING");
  assert.equal(detail.authorization.held, 123.45);
  assert.deepEqual(
    detail.authorization.messages.map((m) => m.message_id),
    [id],
  );
  await assertLedgerBalanced(t);
});

test("declines carry their reason; partial approval takes what the card can spend", async () => {
  const cardId = await card(100);
  const short = await authorize(cardId, 10_001);
  assert.deepEqual([short.result, short.decline_reason], ["DECLINED", "INSUFFICIENT_FUNDS"]);
  const partial = await authorize(cardId, 15_000, { partial_allowed: true });
  assert.deepEqual([partial.result, partial.amount, partial.partial], ["APPROVED", 10_000, true]);
  const unknown = await authorize("00000000-0000-4000-8000-0000000000ff", 100);
  assert.deepEqual(
    [unknown.result, unknown.decline_reason, unknown.authorization_id],
    ["DECLINED", "UNKNOWN_CARD", null],
  );
  const blocked = await card(100);
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: {
        card_number: blocked,
        status: "TEMPORARY_INACTIVE",
        reason: "lost",
        latitude: 19.4,
        longitude: -99.1,
      },
    }),
  );
  const refused = await authorize(blocked, 100);
  assert.deepEqual([refused.result, refused.decline_reason], ["DECLINED", "CARD_BLOCKED"]);
  const declined = expectOk(await authorizationView(short.authorization_id ?? "")) as {
    authorization: { status: string; decline_reason: string; held: number };
  };
  assert.deepEqual(
    [declined.authorization.status, declined.authorization.decline_reason, declined.authorization.held],
    ["DECLINED", "INSUFFICIENT_FUNDS", 0],
  );
});

test("reversals release part of a hold, then the rest, and the authorization is voided", async () => {
  const cardId = await card(200);
  const approved = await authorize(cardId, 10_000);
  const part = await message({
    type: "AUTHORIZATION_REVERSAL",
    authorization_id: approved.authorization_id,
    amount: 2_500,
  });
  assert.deepEqual([part.result, part.amount, part.balance?.held], ["RELEASED", 2_500, 7_500]);
  const rest = await message({ type: "AUTHORIZATION_REVERSAL", authorization_id: approved.authorization_id });
  assert.deepEqual([rest.amount, rest.balance?.available, rest.balance?.held], [7_500, 20_000, 0]);
  const view = expectOk(await authorizationView(approved.authorization_id ?? "")) as {
    authorization: { status: string; messages: unknown[] };
  };
  assert.equal(view.authorization.status, "VOIDED");
  assert.equal(view.authorization.messages.length, 3);
  await assertLedgerBalanced(t);
});

test("a final clearing for less gives the rest back; split clearings keep the hold between them", async () => {
  const cardId = await card(300);
  const networkBefore = await balanceOf(t.ctx.db, systemAccounts.cardNetwork);
  const gas = await authorize(cardId, 10_000);
  const cleared = await message({ type: "CLEARING", authorization_id: gas.authorization_id, amount: 4_500 });
  assert.deepEqual(
    [cleared.result, cleared.balance?.available, cleared.balance?.held],
    ["POSTED", 25_500, 0],
  );
  assert.equal((await balanceOf(t.ctx.db, systemAccounts.cardNetwork)) - networkBefore, 4_500n);
  const order = await authorize(cardId, 9_000);
  const first = await message({
    type: "CLEARING",
    authorization_id: order.authorization_id,
    amount: 3_000,
    is_final: false,
  });
  assert.deepEqual([first.balance?.held, first.balance?.available], [6_000, 16_500]);
  const second = await message({
    type: "CLEARING",
    authorization_id: order.authorization_id,
    amount: 6_000,
    is_final: false,
  });
  assert.equal(second.balance?.held, 0);
  const view = expectOk(await authorizationView(order.authorization_id ?? "")) as {
    authorization: { status: string; cleared: number; held: number };
  };
  assert.deepEqual([view.authorization.status, view.authorization.cleared], ["SETTLED", 90]);
  await assertLedgerBalanced(t);
});

test("a restaurant clearing may add a 20% tip; beyond it posts and is flagged", async () => {
  const cardId = await card(500);
  const dinner = await authorize(cardId, 10_000, { merchant: restaurant });
  const tipped = await message({
    type: "CLEARING",
    authorization_id: dinner.authorization_id,
    amount: 12_000,
  });
  assert.deepEqual([tipped.over_tolerance, tipped.balance?.available], [false, 38_000]);
  const lunch = await authorize(cardId, 10_000, { merchant: restaurant });
  const over = await message({ type: "CLEARING", authorization_id: lunch.authorization_id, amount: 12_001 });
  assert.deepEqual([over.result, over.over_tolerance], ["POSTED", true]);
  const shop = await authorize(cardId, 1_000);
  const shopOver = await message({
    type: "CLEARING",
    authorization_id: shop.authorization_id,
    amount: 1_001,
  });
  assert.equal(shopOver.over_tolerance, true);
});

test("a force post past the balance is owed, shown on the card, and repaid first by the next payment", async () => {
  const cardId = await card(50);
  const forced = await message({ type: "CLEARING", card_id: cardId, amount: 8_000, merchant });
  assert.deepEqual([forced.result, forced.balance?.available, forced.balance?.owed], ["POSTED", 0, 3_000]);
  let view = await cardView(cardId);
  assert.deepEqual([view.card.available, view.card.owed, view.card.balance], [0, 30, -30]);
  const posted = (await eventsOf(t, tenant.clientId, "card_transaction.created")).find(
    (data) => data.message_id === forced.message_id,
  );
  assert.deepEqual(posted?.card, { available: 0, owed: 30 });
  const declined = await authorize(cardId, 1);
  assert.equal(declined.decline_reason, "INSUFFICIENT_FUNDS");
  expectOk(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: {
        card_number: cardId,
        amount: 100,
        payment_description: "abono",
        latitude: 19.4,
        longitude: -99.1,
      },
    }),
  );
  view = await cardView(cardId);
  assert.deepEqual([view.card.available, view.card.owed, view.card.balance], [70, 0, 70]);
  const list = expectOk(
    await call(t.app, "GET", `/v1/cards/${cardId}/authorizations`, { token: tenant.token }),
  ) as {
    authorizations: Array<{ force_post: boolean; status: string; cleared: number }>;
  };
  assert.deepEqual(
    list.authorizations.map((a) => [a.force_post, a.status, a.cleared]),
    [
      [false, "DECLINED", 0],
      [true, "SETTLED", 80],
    ],
  );
  await assertLedgerBalanced(t);
});

test("money that reaches a card that owes by another path is repaid by the sweep", async () => {
  const cardId = await card(10);
  await message({ type: "CLEARING", card_id: cardId, amount: 3_000, merchant });
  // As a returned transfer out credits a card: straight to its account, repaying nothing.
  await t.ctx.db.transaction().execute((tx) =>
    postEntry(tx, {
      kind: "TEST_CREDIT",
      clientId: tenant.clientId,
      postings: [
        { accountId: systemAccounts.sandboxFunding, amountCents: -5_000n },
        { accountId: cardId, amountCents: 5_000n },
      ],
    }),
  );
  let view = await cardView(cardId);
  assert.deepEqual([view.card.available, view.card.owed], [30, 20]);
  assert.ok((await repayOwingCards(t.ctx.db, 64)) >= 1);
  view = await cardView(cardId);
  assert.deepEqual([view.card.available, view.card.owed, view.card.balance], [30, 0, 30]);
  assert.equal(await repayOwingCards(t.ctx.db, 64), 0);
  await assertLedgerBalanced(t);
});

test("a return credits the card and can be reversed once", async () => {
  const cardId = await card(10);
  const returned = await message({ type: "RETURN", card_id: cardId, amount: 2_550, merchant });
  assert.deepEqual([returned.result, returned.balance?.available], ["POSTED", 3_550]);
  const reversal = { type: "RETURN_REVERSAL", original_message_id: returned.message_id };
  const undone = await message(reversal);
  assert.equal(undone.balance?.available, 1_000);
  expectError(await postCardMessage(t, reversal), 4801, 409);
  expectError(await postCardMessage(t, { type: "RETURN_REVERSAL", original_message_id: "NOPE" }), 3802, 404);
  await assertLedgerBalanced(t);
});

test("advices change a hold and stand in for a decision; nothing refuses them", async () => {
  const cardId = await card(100);
  const hotel = await authorize(cardId, 5_000, { merchant: { ...merchant, mcc: "7011" } });
  const raised = await message({
    type: "AUTHORIZATION_ADVICE",
    authorization_id: hotel.authorization_id,
    amount: 12_000,
  });
  assert.deepEqual([raised.result, raised.balance?.held, raised.balance?.owed], ["APPROVED", 12_000, 2_000]);
  const lowered = await message({
    type: "AUTHORIZATION_ADVICE",
    authorization_id: hotel.authorization_id,
    amount: 9_000,
  });
  assert.deepEqual(
    [lowered.balance?.held, lowered.balance?.owed, lowered.balance?.available],
    [9_000, 0, 1_000],
  );
  const view = expectOk(await authorizationView(hotel.authorization_id ?? "")) as {
    authorization: { expires_at: string; created_at: string };
  };
  const days =
    (Date.parse(view.authorization.expires_at) - Date.parse(view.authorization.created_at)) / 86_400_000;
  assert.ok(Math.abs(days - 30) < 0.01, "a hotel holds for 30 days");
  const standIn = await message({
    type: "AUTHORIZATION_ADVICE",
    card_id: cardId,
    amount: 3_000,
    merchant,
    channel: "ATM",
  });
  assert.deepEqual([standIn.result, standIn.balance?.owed], ["APPROVED", 2_000]);
  await assertLedgerBalanced(t);
});

test("expired holds are released by the worker once, and a later clearing still posts", async () => {
  const cardId = await card(100);
  const approved = await authorize(cardId, 4_000);
  await sql`update card_authorizations set expires_at = now() - interval '1 minute'
    where id = ${approved.authorization_id}::uuid`.execute(t.ctx.db);
  assert.ok((await expireHolds(t.ctx.db, purchaseSettings(t.ctx), 64)) >= 1);
  assert.equal(await expireHolds(t.ctx.db, purchaseSettings(t.ctx), 64), 0);
  const expired = expectOk(await authorizationView(approved.authorization_id ?? "")) as {
    authorization: { status: string; held: number; messages: Array<{ type: string }> };
  };
  assert.deepEqual([expired.authorization.status, expired.authorization.held], ["EXPIRED", 0]);
  assert.equal(expired.authorization.messages.at(-1)?.type, "AUTHORIZATION_EXPIRY");
  const late = await message({
    type: "CLEARING",
    authorization_id: approved.authorization_id,
    amount: 4_000,
  });
  assert.deepEqual([late.result, late.balance?.available], ["POSTED", 6_000]);
  await assertLedgerBalanced(t);
});

test("an advice or a clearing of a declined authorization takes it up: neither can be refused", async () => {
  const cardId = await card(10);
  const declined = await authorize(cardId, 5_000);
  assert.equal(declined.decline_reason, "INSUFFICIENT_FUNDS");
  const advised = await message({
    type: "AUTHORIZATION_ADVICE",
    authorization_id: declined.authorization_id,
    amount: 300,
  });
  assert.deepEqual([advised.result, advised.balance?.held], ["APPROVED", 300]);
  const cleared = await message({
    type: "CLEARING",
    authorization_id: declined.authorization_id,
    amount: 400,
  });
  assert.deepEqual([cleared.result, cleared.balance?.available, cleared.balance?.held], ["POSTED", 600, 0]);
  const view = expectOk(await authorizationView(declined.authorization_id ?? "")) as {
    authorization: { status: string; decline_reason: string | null; cleared: number };
  };
  assert.deepEqual(
    [view.authorization.status, view.authorization.decline_reason, view.authorization.cleared],
    ["SETTLED", null, 4],
  );
  const other = await authorize(cardId, 5_000);
  const forced = await message({ type: "CLEARING", authorization_id: other.authorization_id, amount: 100 });
  assert.equal(forced.result, "POSTED");
  await assertLedgerBalanced(t);
});

test("a balance inquiry answers the balances and moves nothing", async () => {
  const cardId = await card(75);
  await authorize(cardId, 500);
  const inquiry = await message({ type: "BALANCE_INQUIRY", card_id: cardId });
  assert.deepEqual([inquiry.result, inquiry.balance], ["ANSWERED", { available: 7_000, held: 500, owed: 0 }]);
});

test("malformed messages are 400s in the envelope, and nothing is recorded", async () => {
  const cardId = await card(10);
  const bad = [
    { type: "AUTHORIZATION", card_id: cardId, merchant, channel: "POS_CHIP" },
    { type: "AUTHORIZATION", amount: 100, merchant, channel: "POS_CHIP" },
    { type: "PURCHASE", card_id: cardId, amount: 100 },
    { type: "AUTHORIZATION", card_id: cardId, amount: -1, merchant, channel: "POS_CHIP" },
    { type: "AUTHORIZATION", card_id: cardId, amount: 100, currency: "840", merchant, channel: "POS_CHIP" },
    {
      type: "AUTHORIZATION",
      card_id: cardId,
      amount: 100,
      merchant: { ...merchant, mcc: "54" },
      channel: "POS_CHIP",
    },
    { type: "CLEARING", card_id: cardId, amount: 100 },
    { type: "AUTHORIZATION_REVERSAL" },
  ];
  for (const body of bad) expectError(await postCardMessage(t, body), 1000, 400);
  expectError(
    await postCardMessage(t, {
      type: "AUTHORIZATION_REVERSAL",
      authorization_id: "00000000-0000-4000-8000-000000000999",
    }),
    3801,
    404,
  );
  const foreign = await message({
    type: "AUTHORIZATION",
    card_id: cardId,
    amount: 100_00,
    currency: "840",
    billing_amount: 900,
    merchant,
    channel: "ECOMMERCE",
  });
  assert.equal(foreign.amount, 900);
});

test("the sandbox simulator runs the same path, and only the card's client and its ancestors see it", async () => {
  const cardId = await card(100);
  const auth = { token: tenant.token };
  const approved = expectOk(
    await call(t.app, "POST", "/v1/sandbox/cards/authorizations", {
      ...auth,
      body: { card_id: cardId, amount: 25.5, merchant: { name: "CINEPOLIS", mcc: "7832" } },
    }),
  ) as Answer;
  assert.deepEqual([approved.result, approved.amount], ["APPROVED", 2_550]);
  const id = approved.authorization_id ?? "";
  const clear = await call(t.app, "POST", `/v1/sandbox/cards/authorizations/${id}/clear`, {
    ...auth,
    body: {},
  });
  assert.equal((expectOk(clear) as Answer).amount, 2_550);
  const refund = expectOk(
    await call(t.app, "POST", "/v1/sandbox/cards/refunds", {
      ...auth,
      headers: { "idempotency-key": "refund-1" },
      body: {
        card_id: cardId,
        amount: 5,
        merchant: { name: "CINEPOLIS", mcc: "7832" },
        authorization_id: id,
      },
    }),
  ) as Answer;
  const repeated = await call(t.app, "POST", "/v1/sandbox/cards/refunds", {
    ...auth,
    headers: { "idempotency-key": "refund-1" },
    body: { card_id: cardId, amount: 5, merchant: { name: "CINEPOLIS", mcc: "7832" }, authorization_id: id },
  });
  assert.equal(repeated.headers["idempotent-replayed"], "true");
  const again = expectOk(repeated) as Answer;
  assert.deepEqual(again, refund);
  assert.equal(refund.balance?.available, 100_00 - 2_550 + 500);
  const stranger = await createTenant(t);
  expectError(await authorizationView(id, stranger.token), 3801, 404);
  expectError(
    await call(t.app, "GET", `/v1/cards/${cardId}/authorizations`, { token: stranger.token }),
    3302,
    404,
  );
  expectError(
    await call(t.app, "POST", `/v1/sandbox/cards/authorizations/${id}/reverse`, {
      token: stranger.token,
      body: {},
    }),
    3801,
    404,
  );
  const types = new Set(
    [
      ...(await eventsOf(t, tenant.clientId, "card_authorization.created")),
      ...(await eventsOf(t, tenant.clientId, "card_transaction.created")),
    ].map((data) => (data as { card_id: string }).card_id),
  );
  assert.ok(types.has(cardId));
});

test("concurrent authorizations never approve beyond what the card can spend", async () => {
  const cardId = await card(1_000);
  const answers = await Promise.all(Array.from({ length: 25 }, () => authorize(cardId, 10_000)));
  assert.equal(answers.filter((a) => a.result === "APPROVED").length, 10);
  assert.equal(answers.filter((a) => a.decline_reason === "INSUFFICIENT_FUNDS").length, 15);
  const held = await sql<{ s: string }>`select sum(balance_cents)::text as s from ledger_accounts
    where id = any(${[...shardsOf(systemAccounts.cardHolds)]}::uuid[])`.execute(t.ctx.db);
  assert.ok(BigInt(held.rows[0]?.s ?? "0") >= 100_000n);
  await assertLedgerBalanced(t);
});

test("each authorization decides on the card as it is now, whatever moved it since the last one", async () => {
  const cardId = await card(500);
  const first = await authorize(cardId, 10_000);
  assert.deepEqual(
    [first.result, first.balance?.available, first.balance?.held],
    ["APPROVED", 40_000, 10_000],
  );
  const pay = (amount: number) =>
    call(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: { card_number: cardId, amount, payment_description: "abono", latitude: 19.4, longitude: -99.1 },
    });
  expectOk(await pay(1_000));
  // A payment arrived by another path: the next decision and its answer see it.
  const after = await authorize(cardId, 130_000, { partial_allowed: true });
  assert.deepEqual(
    [after.result, after.amount, after.partial, after.balance?.available, after.balance?.held],
    ["APPROVED", 130_000, false, 10_000, 140_000],
  );
  // Money taken by another process's entry (here the ledger, straight): a decision never spends it.
  await t.ctx.db.transaction().execute((tx) =>
    postEntry(tx, {
      kind: "TEST_DEBIT",
      description: "another process",
      postings: [
        { accountId: cardId, amountCents: -6_000n },
        { accountId: systemAccounts.sandboxFunding, amountCents: 6_000n },
      ],
    }),
  );
  const short = await authorize(cardId, 5_000);
  assert.deepEqual([short.result, short.decline_reason], ["DECLINED", "INSUFFICIENT_FUNDS"]);
  const rest = await authorize(cardId, 5_000, { partial_allowed: true });
  assert.deepEqual([rest.result, rest.amount, rest.balance?.available], ["APPROVED", 4_000, 0]);
  const status = (to: string) =>
    call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: cardId, status: to, reason: "lost", latitude: 19.4, longitude: -99.1 },
    });
  expectOk(await pay(10));
  expectOk(await status("TEMPORARY_INACTIVE"));
  assert.equal((await authorize(cardId, 100)).decline_reason, "CARD_BLOCKED");
  expectOk(await status("ACTIVE"));
  const again = await authorize(cardId, 100);
  assert.deepEqual([again.result, again.balance?.available], ["APPROVED", 900]);
  const view = await cardView(cardId);
  assert.deepEqual([view.card.available, view.card.held, view.card.balance], [9, 1_441, 1_450]);
  await assertLedgerBalanced(t);
});

test("listing pages newest first with a cursor", async () => {
  const cardId = await card(100);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await authorize(cardId, 100)).authorization_id ?? "");
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `?per_page=2&cursor=${encodeURIComponent(cursor)}` : "?per_page=2";
    const page = expectOk(
      await call(t.app, "GET", `/v1/cards/${cardId}/authorizations${query}`, { token: tenant.token }),
    ) as { authorizations: Array<{ id: string }>; next_cursor: string | null };
    seen.push(...page.authorizations.map((a) => a.id));
    cursor = page.next_cursor;
  } while (cursor);
  assert.deepEqual(seen, ids.reverse());
});

test("the database refuses authorizations and messages naming rows that do not exist, and keeps cards", async () => {
  const cardId = await card(10);
  const approved = await authorize(cardId, 100);
  const refused = (error: { code?: string }) => error.code === "23503";
  const missing = "00000000-0000-4000-8000-00000000dead";
  const copy = (column: string) =>
    sql`insert into card_authorizations select (jsonb_populate_record(null::card_authorizations,
        to_jsonb(a) || jsonb_build_object('id', gen_random_uuid(), ${column}::text, ${missing}::uuid))).*
      from card_authorizations a where a.id = ${approved.authorization_id}::uuid`.execute(t.ctx.db);
  await assert.rejects(copy("card_id"), refused);
  await assert.rejects(copy("client_id"), refused);
  await assert.rejects(
    sql`insert into card_network_messages (message_id, type, authorization_id)
      values (${messageId()}, 'CLEARING', ${missing}::uuid)`.execute(t.ctx.db),
    refused,
  );
  await assert.rejects(
    sql`update card_authorizations set card_id = ${missing}::uuid where id = ${approved.authorization_id}::uuid`.execute(
      t.ctx.db,
    ),
    refused,
  );
  await assert.rejects(sql`delete from cards where id = ${cardId}::uuid`.execute(t.ctx.db), refused);
});
