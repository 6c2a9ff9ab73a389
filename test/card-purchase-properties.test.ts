// Properties of card purchases, through the front door: random sequences of the processor's
// messages on fresh cards (authorizations, partial too; advices on an authorization and stand-in;
// partial and whole reversals; clearings split, final, over the hold, after expiry; force posts;
// returns and their reversals; repeated message ids; expiries by the sandbox route and by the
// worker; payments onto the card, which repay what it owes) run against a model kept here. Each answer must be the model's, and after each sequence
// the cards' money, holds and debts reconcile with the postings, every authorization holds what
// its status allows, every earlier message answers again identically and moves nothing, and the
// ledger's invariants hold. EMISOR_PROPS_RUNS sets the runs (default 25), EMISOR_PROPS_SEED
// replays one.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { sql } from "kysely";
import { shardsOf, systemAccounts } from "../src/ledger/accounts.ts";
import { checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { expireHolds } from "../src/modules/purchases/expiry.ts";
import type { MessageAnswer } from "../src/modules/purchases/service.ts";
import { purchaseSettings } from "../src/modules/purchases/service.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { messageId, postCardMessage } from "./helpers/rails.ts";

const runs = Number(process.env.EMISOR_PROPS_RUNS ?? 25);
const seed = process.env.EMISOR_PROPS_SEED ? Number(process.env.EMISOR_PROPS_SEED) : undefined;

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-properties" });
  tenant = await createTenant(t, { available: 10_000_000 });
});
after(() => t.close());

/** The processor's answer, as the service shapes it. */
type Answer = MessageAnswer;

type Status = "PENDING" | "SETTLED" | "VOIDED" | "EXPIRED" | "DECLINED";

/** A card as the model sees it (centavos), with the flows the reconciliation counts. */
interface CardModel {
  id: string;
  balance: number;
  owed: number;
  funded: number;
  cleared: number;
  returned: number;
  returnsReversed: number;
}

interface AuthModel {
  id: string;
  card: CardModel;
  status: Status;
  held: number;
  cleared: number;
  authorized: number;
  mcc: string;
  code: string | null;
}

/** A message answered 200, as it was sent: re-sending it must answer `answer` again. */
interface Sent {
  /** `mutate`: the same message id with another amount (a network message only). */
  send: (mutate: boolean) => Promise<{ replayed: boolean; answer: Answer }>;
  answer: Answer;
}

interface World {
  cards: CardModel[];
  auths: AuthModel[];
  sent: Sent[];
  returns: Array<{ messageId: string; card: CardModel; amount: number; reversed: boolean }>;
  /** Messages answered 200 whose ids must each be one row of card_network_messages. */
  messageIds: Set<string>;
}

// The commands: indexes pick among what exists when the command runs (modulo its count).
// Mostly amounts a card of a few hundred pesos covers, now and then more than it holds.
const cents = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 6_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 40_000 }) },
);
const index = fc.nat({ max: 1_000 });
const mcc = fc.constantFrom("5411", "5812", "7011");
const command = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant("auth" as const),
      card: index,
      amount: cents,
      partial: fc.boolean(),
      mcc,
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("unknownCard" as const), amount: cents }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("advice" as const), auth: index, amount: cents }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("standIn" as const), card: index, amount: cents }) },
  {
    weight: 3,
    arbitrary: fc.record({ t: fc.constant("reverse" as const), auth: index, amount: fc.option(cents) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant("clear" as const),
      auth: index,
      percent: fc.integer({ min: 0, max: 150 }),
      extra: fc.constantFrom(0, 0, 0, 1, 2_500),
      final: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("force" as const), card: index, amount: cents }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("return" as const),
      card: index,
      auth: fc.option(index),
      amount: cents,
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("returnReversal" as const), ret: index }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("expire" as const),
      auth: index,
      worker: fc.boolean(),
      keyed: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant("repeat" as const), sent: index, mutate: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("inquiry" as const), card: index }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("load" as const),
      card: index,
      pesos: fc.integer({ min: 1, max: 300 }),
    }),
  },
);
type Command = typeof command extends fc.Arbitrary<infer C> ? C : never;

/** What the runs exercised, printed at the end (a property that never meets its case proves little). */
const coverage = new Map<string, number>();
const note = (label: string) => coverage.set(label, (coverage.get(label) ?? 0) + 1);

const merchantOf = (code: string) => ({ name: `MERCHANT ${code}`, city: "CDMX", country: "MEX", mcc: code });
const at = <T>(items: T[], i: number): T | undefined => items[i % Math.max(items.length, 1)];

function spendable(card: CardModel): number {
  return Math.max(card.balance - card.owed, 0);
}

/** The card's side of an entry, as card-money.ts posts it: money in repays what it owes first. */
function moveCard(card: CardModel, delta: number): void {
  if (delta > 0) {
    const repay = Math.min(delta, card.owed);
    card.owed -= repay;
    card.balance += delta - repay;
  } else if (delta < 0) {
    const take = Math.min(card.balance, -delta);
    card.balance -= take;
    card.owed += -delta - take;
  }
}

function heldOn(world: World, card: CardModel): number {
  return world.auths
    .filter((a) => a.card === card && a.status === "PENDING")
    .reduce((sum, a) => sum + a.held, 0);
}

function balanceOf(world: World, card: CardModel) {
  return { available: spendable(card), held: heldOn(world, card), owed: card.owed };
}

/** Sends a signed network message, expects 200 and remembers how to send it again. */
async function network(world: World, body: Record<string, unknown>): Promise<Answer> {
  const full: Record<string, unknown> = { message_id: messageId(), ...body };
  const send = async (mutate: boolean) => {
    const amount = typeof full.amount === "number" ? full.amount : 0;
    const response = await postCardMessage(t, mutate ? { ...full, amount: amount + 1 } : full);
    const replayed = response.headers["idempotent-replayed"] === "true";
    return { replayed, answer: expectOk(response) as Answer };
  };
  const first = await send(false);
  assert.equal(first.replayed, false, `a new message id ${String(full.message_id)} was answered as a repeat`);
  world.sent.push({ send, answer: first.answer });
  world.messageIds.add(String(full.message_id));
  return first.answer;
}

/** The parts of an answer the model decides. */
function assertAnswer(world: World, answer: Answer, expected: Partial<Answer>, card: CardModel | null): void {
  const seen = {
    result: answer.result,
    amount: answer.amount,
    decline_reason: answer.decline_reason,
    partial: answer.partial,
    over_tolerance: answer.over_tolerance,
    balance: answer.balance,
  };
  const wanted = {
    decline_reason: null,
    partial: false,
    over_tolerance: false,
    ...expected,
    balance: card ? balanceOf(world, card) : null,
  };
  assert.deepEqual(
    seen,
    {
      result: wanted.result,
      amount: wanted.amount,
      decline_reason: wanted.decline_reason,
      partial: wanted.partial,
      over_tolerance: wanted.over_tolerance,
      balance: wanted.balance,
    },
    `answer to ${answer.type} ${answer.message_id}`,
  );
}

function newAuth(world: World, card: CardModel, fields: Partial<AuthModel> & { id: string }): AuthModel {
  const auth: AuthModel = {
    card,
    status: "PENDING",
    held: 0,
    cleared: 0,
    authorized: 0,
    mcc: "0000",
    code: null,
    ...fields,
  };
  world.auths.push(auth);
  return auth;
}

async function authorize(world: World, c: Extract<Command, { t: "auth" }>): Promise<void> {
  const card = at(world.cards, c.card) as CardModel;
  const available = spendable(card);
  const answer = await network(world, {
    type: "AUTHORIZATION",
    card_id: card.id,
    amount: c.amount,
    merchant: merchantOf(c.mcc),
    channel: "POS_CHIP",
    partial_allowed: c.partial,
  });
  const id = answer.authorization_id ?? "";
  let approved = c.amount;
  if (c.amount > available) approved = c.partial && available > 0 ? available : -1;
  // Never beyond what the card could spend at that moment, whatever the model says.
  if (answer.result === "APPROVED") assert.ok(answer.amount <= available, "approved beyond spendable");
  note(approved < 0 ? "authorization declined" : approved < c.amount ? "partial approval" : "approval");
  if (approved < 0) {
    newAuth(world, card, { id, status: "DECLINED", mcc: c.mcc });
    assertAnswer(
      world,
      answer,
      { result: "DECLINED", amount: 0, decline_reason: "INSUFFICIENT_FUNDS" },
      card,
    );
    assert.equal(answer.authorization_code, null);
    return;
  }
  moveCard(card, -approved);
  assert.match(answer.authorization_code ?? "", /^[0-9]{6}$/);
  newAuth(world, card, {
    id,
    status: approved > 0 ? "PENDING" : "VOIDED",
    held: approved,
    authorized: approved,
    mcc: c.mcc,
    code: answer.authorization_code,
  });
  assertAnswer(world, answer, { result: "APPROVED", amount: approved, partial: approved < c.amount }, card);
}

async function unknownCard(world: World, c: Extract<Command, { t: "unknownCard" }>): Promise<void> {
  const answer = await network(world, {
    type: "AUTHORIZATION",
    card_id: "00000000-0000-4000-8000-00000000dead",
    amount: c.amount,
    merchant: merchantOf("5411"),
    channel: "ECOMMERCE",
  });
  assertAnswer(world, answer, { result: "DECLINED", amount: 0, decline_reason: "UNKNOWN_CARD" }, null);
  assert.equal(answer.authorization_id, null);
}

/** An advice on an authorization: its hold becomes the amount, whatever its status was. */
async function advise(world: World, c: Extract<Command, { t: "advice" }>): Promise<void> {
  const auth = at(world.auths, c.auth);
  if (!auth) return;
  const answer = await network(world, {
    type: "AUTHORIZATION_ADVICE",
    authorization_id: auth.id,
    amount: c.amount,
  });
  note(`advice on a ${auth.status} authorization`);
  moveCard(auth.card, auth.held - c.amount);
  const reopened = auth.status !== "PENDING" && c.amount > 0;
  auth.held = c.amount;
  auth.authorized = auth.cleared + c.amount;
  // An advice of nothing leaves an authorization that held nothing as it was.
  if (c.amount > 0) auth.status = "PENDING";
  else if (auth.status === "PENDING") auth.status = auth.cleared > 0 ? "SETTLED" : "VOIDED";
  assertAnswer(world, answer, { result: "APPROVED", amount: c.amount }, auth.card);
  assert.equal(answer.authorization_id, auth.id);
  // A declined authorization (or a force post) the network approves after all gets a code.
  if (reopened && auth.code === null) {
    assert.match(answer.authorization_code ?? "", /^[0-9]{6}$/);
    auth.code = answer.authorization_code;
  }
  assert.equal(answer.authorization_code, auth.code);
}

async function standIn(world: World, c: Extract<Command, { t: "standIn" }>): Promise<void> {
  const card = at(world.cards, c.card) as CardModel;
  const answer = await network(world, {
    type: "AUTHORIZATION_ADVICE",
    card_id: card.id,
    amount: c.amount,
    merchant: merchantOf("5411"),
    channel: "ATM",
  });
  moveCard(card, -c.amount);
  newAuth(world, card, {
    id: answer.authorization_id ?? "",
    status: c.amount > 0 ? "PENDING" : "VOIDED",
    held: c.amount,
    authorized: c.amount,
    mcc: "5411",
    code: answer.authorization_code,
  });
  assertAnswer(world, answer, { result: "APPROVED", amount: c.amount }, card);
}

/** Gives back `amount` of the hold (all when null); a hold emptied ends the authorization. */
function release(auth: AuthModel, amount: number | null, expiry: boolean): number {
  const released = Math.min(amount ?? auth.held, auth.held);
  auth.held -= released;
  moveCard(auth.card, released);
  if (auth.status === "PENDING" && auth.held === 0)
    auth.status = auth.cleared > 0 ? "SETTLED" : expiry ? "EXPIRED" : "VOIDED";
  return released;
}

async function reverse(world: World, c: Extract<Command, { t: "reverse" }>): Promise<void> {
  const auth = at(world.auths, c.auth);
  if (!auth) return;
  const answer = await network(world, {
    type: "AUTHORIZATION_REVERSAL",
    authorization_id: auth.id,
    ...(c.amount === null ? {} : { amount: c.amount }),
  });
  const released = release(auth, c.amount, false);
  assertAnswer(world, answer, { result: "RELEASED", amount: released }, auth.card);
}

/** A clearing of a share of what the authorization holds (or authorized), maybe beyond it. */
async function clear(world: World, c: Extract<Command, { t: "clear" }>): Promise<void> {
  const auth = at(world.auths, c.auth);
  if (!auth) return;
  const amount = Math.floor(((auth.held || auth.authorized) * c.percent) / 100) + c.extra;
  const answer = await network(world, {
    type: "CLEARING",
    authorization_id: auth.id,
    amount,
    is_final: c.final,
  });
  note(`clearing of a ${auth.status} authorization${amount > auth.held ? ", beyond the hold" : ""}`);
  if (!c.final) note("clearing not final");
  const fromHold = c.final ? auth.held : Math.min(amount, auth.held);
  moveCard(auth.card, fromHold - amount);
  auth.held -= fromHold;
  auth.cleared += amount;
  auth.card.cleared += amount;
  auth.status = auth.held > 0 ? "PENDING" : "SETTLED";
  const percent = limits.tipToleranceMccs.includes(auth.mcc) ? limits.tipTolerancePercent : 0;
  const over = auth.cleared * 100 > auth.authorized * (100 + percent);
  if (over) note("clearing over tolerance");
  assertAnswer(world, answer, { result: "POSTED", amount, over_tolerance: over }, auth.card);
}

async function forcePost(world: World, c: Extract<Command, { t: "force" }>): Promise<void> {
  const card = at(world.cards, c.card) as CardModel;
  const answer = await network(world, {
    type: "CLEARING",
    card_id: card.id,
    amount: c.amount,
    merchant: merchantOf("5411"),
  });
  moveCard(card, -c.amount);
  card.cleared += c.amount;
  newAuth(world, card, { id: answer.authorization_id ?? "", status: "SETTLED", cleared: c.amount });
  assertAnswer(world, answer, { result: "POSTED", amount: c.amount }, card);
}

async function creditReturn(world: World, c: Extract<Command, { t: "return" }>): Promise<void> {
  const auth = c.auth === null ? undefined : at(world.auths, c.auth);
  const card = auth?.card ?? (at(world.cards, c.card) as CardModel);
  const answer = await network(world, {
    type: "RETURN",
    ...(auth ? { authorization_id: auth.id } : { card_id: card.id, merchant: merchantOf("5411") }),
    amount: c.amount,
  });
  moveCard(card, c.amount);
  card.returned += c.amount;
  world.returns.push({ messageId: answer.message_id, card, amount: c.amount, reversed: false });
  assertAnswer(world, answer, { result: "POSTED", amount: c.amount }, card);
  assert.equal(answer.authorization_id, auth?.id ?? null);
}

/** Reverses a return; a return reversed already is refused (409) and moves nothing. */
async function reverseReturn(world: World, c: Extract<Command, { t: "returnReversal" }>): Promise<void> {
  const original = at(world.returns, c.ret);
  if (!original) return;
  const body = { type: "RETURN_REVERSAL", original_message_id: original.messageId };
  note(original.reversed ? "return reversed twice (refused)" : "return reversal");
  if (original.reversed) {
    expectError(await postCardMessage(t, { message_id: messageId(), ...body }), 4801, 409);
    return;
  }
  const answer = await network(world, body);
  original.reversed = true;
  moveCard(original.card, -original.amount);
  original.card.returnsReversed += original.amount;
  assertAnswer(world, answer, { result: "POSTED", amount: original.amount }, original.card);
}

/** An expiry: the sandbox route (with or without an Idempotency-Key), or the worker's pass. */
async function expire(world: World, c: Extract<Command, { t: "expire" }>): Promise<void> {
  const auth = at(world.auths, c.auth);
  if (!auth) return;
  note(`expiry ${c.worker ? "by the worker" : "by the sandbox route"} of a ${auth.status} authorization`);
  if (c.worker) {
    const due = await sql`update card_authorizations set expires_at = now() - interval '1 minute'
      where id = ${auth.id}::uuid and status = 'PENDING'`.execute(t.ctx.db);
    await expireHolds(t.ctx.db, purchaseSettings(t.ctx), 64);
    if (Number(due.numAffectedRows ?? 0n) > 0) release(auth, null, true);
    return;
  }
  const headers: Record<string, string> = c.keyed ? { "idempotency-key": `expire-${messageId()}` } : {};
  const path = `/v1/sandbox/cards/authorizations/${auth.id}/expire`;
  const send = async () => {
    const response = await call(t.app, "POST", path, { token: tenant.token, body: {}, headers });
    const replayed = response.headers["idempotent-replayed"] === "true";
    return { replayed, answer: expectOk(response) as Answer };
  };
  const { answer } = await send();
  if (c.keyed) world.sent.push({ send, answer });
  world.messageIds.add(answer.message_id);
  const released = release(auth, null, true);
  assertAnswer(world, answer, { result: "RELEASED", amount: released }, auth.card);
}

/** Re-sends an earlier message, maybe with another amount: the first answer, and nothing moves. */
async function repeat(world: World, c: Extract<Command, { t: "repeat" }>): Promise<void> {
  const earlier = at(world.sent, c.sent);
  if (!earlier) return;
  note(c.mutate ? "repeat with another amount" : "repeat");
  const before = await moneySnapshot();
  const again = await earlier.send(c.mutate);
  assert.equal(again.replayed, true, `a repeat of ${earlier.answer.message_id} is marked replayed`);
  assert.deepEqual(again.answer, earlier.answer, `a repeat of ${earlier.answer.message_id}`);
  assert.deepEqual(await moneySnapshot(), before, `a repeat of ${earlier.answer.message_id} moved money`);
}

async function inquiry(world: World, c: Extract<Command, { t: "inquiry" }>): Promise<void> {
  const card = at(world.cards, c.card) as CardModel;
  const answer = await network(world, { type: "BALANCE_INQUIRY", card_id: card.id });
  assertAnswer(world, answer, { result: "ANSWERED", amount: 0 }, card);
}

/** Money paid onto the card (POST /v1/cards/payment): it repays what the card owes first. */
async function load(world: World, c: Extract<Command, { t: "load" }>): Promise<void> {
  const card = at(world.cards, c.card) as CardModel;
  if (card.owed > 0) note("a payment onto a card that owes");
  expectOk(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: {
        card_number: card.id,
        amount: c.pesos,
        payment_description: "recarga",
        latitude: 19.4,
        longitude: -99.1,
      },
    }),
  );
  moveCard(card, c.pesos * 100);
  card.funded += c.pesos * 100;
}

async function step(world: World, c: Command): Promise<void> {
  switch (c.t) {
    case "auth":
      return authorize(world, c);
    case "unknownCard":
      return unknownCard(world, c);
    case "advice":
      return advise(world, c);
    case "standIn":
      return standIn(world, c);
    case "reverse":
      return reverse(world, c);
    case "clear":
      return clear(world, c);
    case "force":
      return forcePost(world, c);
    case "return":
      return creditReturn(world, c);
    case "returnReversal":
      return reverseReturn(world, c);
    case "expire":
      return expire(world, c);
    case "repeat":
      return repeat(world, c);
    case "inquiry":
      return inquiry(world, c);
    case "load":
      return load(world, c);
  }
}

/** Every ledger balance and every authorization's amounts: what a repeat must leave as it was. */
async function moneySnapshot() {
  const accounts = await sql<{ id: string; balance: string }>`
    select id::text, balance_cents::text as balance from ledger_accounts order by id`.execute(t.ctx.db);
  const auths = await sql<{ id: string; row: string }>`
    select id::text, concat_ws('/', status, held_cents, cleared_cents, authorized_cents) as row
    from card_authorizations order by id`.execute(t.ctx.db);
  return { accounts: accounts.rows, auths: auths.rows };
}

/**
 * (a) Each card reconciles: its balance less what it owes plus what its pending authorizations
 * hold is what was loaded, less what cleared (force posts too), plus returns, less their reversals;
 * the entries its messages wrote moved CARD_HOLDS and CARD_NETWORK by as much; GET shows the same.
 */
async function verifyCards(world: World): Promise<void> {
  const holds = [...shardsOf(systemAccounts.cardHolds)];
  const network = [...shardsOf(systemAccounts.cardNetwork)];
  for (const card of world.cards) {
    const found = await sql<Record<string, string>>`
      select (select balance_cents from ledger_accounts where id = ${card.id}::uuid)::text as balance,
        coalesce((select -balance_cents from ledger_accounts
          where card_id = ${card.id}::uuid and kind = 'CARD_OWED'), 0)::text as owed,
        (select coalesce(sum(held_cents), 0) from card_authorizations
          where card_id = ${card.id}::uuid and status = 'PENDING')::text as held,
        (select coalesce(sum(cleared_cents), 0) from card_authorizations where card_id = ${card.id}::uuid)::text as cleared,
        (select coalesce(sum(p.amount_cents) filter (where p.account_id = any(${holds}::uuid[])), 0)::text
          from card_network_messages m join postings p on p.entry_id = m.entry_id
          where m.card_id = ${card.id}::uuid) as posted_held,
        (select coalesce(sum(p.amount_cents) filter (where p.account_id = any(${network}::uuid[])), 0)::text
          from card_network_messages m join postings p on p.entry_id = m.entry_id
          where m.card_id = ${card.id}::uuid) as posted_network`.execute(t.ctx.db);
    const row = Object.fromEntries(Object.entries(found.rows[0] ?? {}).map(([k, v]) => [k, Number(v)]));
    const flows = card.funded - card.cleared + card.returned - card.returnsReversed;
    assert.equal((row.balance ?? 0) - (row.owed ?? 0) + (row.held ?? 0), flows, `card ${card.id} reconciles`);
    assert.deepEqual(row, {
      balance: card.balance,
      owed: card.owed,
      held: heldOn(world, card),
      cleared: card.cleared,
      posted_held: heldOn(world, card),
      posted_network: card.cleared - card.returned + card.returnsReversed,
    });
    const view = expectOk(await call(t.app, "GET", `/v1/cards/${card.id}`, { token: tenant.token })) as {
      card: { balance: number; available: number; held: number; owed: number };
    };
    const { balance, available, held, owed } = view.card;
    const pesos = (n: number) => n / 100;
    assert.deepEqual(
      [balance, available, held, owed].map((n) => Math.round(n * 100)),
      [card.balance + heldOn(world, card) - card.owed, spendable(card), heldOn(world, card), card.owed].map(
        (n) => Math.round(pesos(n) * 100),
      ),
    );
  }
}

/**
 * (b) every authorization is the model's, none holds less than nothing and only a PENDING one
 * holds; (c) each message answered is one row; (e) the ledger's invariants hold and CARD_HOLDS is
 * what the pending authorizations hold, across every card.
 */
async function verifyBooks(world: World): Promise<void> {
  const rows = await sql<{ id: string; status: string; held: string; cleared: string; authorized: string }>`
    select id::text, status, held_cents::text as held, cleared_cents::text as cleared,
      authorized_cents::text as authorized from card_authorizations`.execute(t.ctx.db);
  for (const row of rows.rows) {
    assert.ok(Number(row.held) >= 0, `authorization ${row.id} holds ${row.held}`);
    if (row.status !== "PENDING") assert.equal(row.held, "0", `${row.status} authorization ${row.id} holds`);
  }
  const byId = new Map(rows.rows.map((row) => [row.id, row]));
  for (const auth of world.auths) {
    const row = byId.get(auth.id);
    assert.deepEqual(
      row && [row.status, Number(row.held), Number(row.cleared), Number(row.authorized)],
      [auth.status, auth.held, auth.cleared, auth.authorized],
      `authorization ${auth.id}`,
    );
  }
  const ids = [...world.messageIds];
  const stored = await sql<{ n: number }>`
    select count(*)::int as n from card_network_messages where message_id = any(${ids}::text[])`.execute(
    t.ctx.db,
  );
  assert.equal(stored.rows[0]?.n, ids.length, "each message answered is stored once");
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
  const holds = await sql<{ shards: string; pending: string }>`
    select (select coalesce(sum(balance_cents), 0) from ledger_accounts
              where id = any(${[...shardsOf(systemAccounts.cardHolds)]}::uuid[]))::text as shards,
           (select coalesce(sum(held_cents), 0) from card_authorizations where status = 'PENDING')::text as pending`.execute(
    t.ctx.db,
  );
  assert.equal(
    holds.rows[0]?.shards,
    holds.rows[0]?.pending,
    "CARD_HOLDS is what pending authorizations hold",
  );
}

/** (c) every message of the sequence, sent again, answers its first answer and moves nothing. */
async function verifyRepeats(world: World): Promise<void> {
  const before = await moneySnapshot();
  for (const sent of world.sent) {
    const again = await sent.send(false);
    assert.equal(again.replayed, true, `a repeat of ${sent.answer.message_id} is marked replayed`);
    assert.deepEqual(again.answer, sent.answer, `a repeat of ${sent.answer.message_id}`);
  }
  assert.deepEqual(await moneySnapshot(), before, "repeats moved money");
}

async function newWorld(funds: number[]): Promise<World> {
  const cards: CardModel[] = [];
  for (const pesos of funds) {
    const card = await spendableCard(t, tenant, { commission: 0, funds: pesos });
    const loaded = pesos * 100;
    cards.push({
      id: card.id,
      balance: loaded,
      owed: 0,
      funded: loaded,
      cleared: 0,
      returned: 0,
      returnsReversed: 0,
    });
  }
  return { cards, auths: [], sent: [], returns: [], messageIds: new Set() };
}

test("random message sequences keep cards, holds, debts and the books reconciled", async (context) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 400 })), { minLength: 1, maxLength: 2 }),
      fc.array(command, { minLength: 5, maxLength: 25, size: "max" }),
      async (funds, commands) => {
        const world = await newWorld(funds);
        for (const c of commands) {
          await step(world, c);
          if (world.cards.some((card) => card.owed > 0)) note("a card owes (after a step)");
        }
        await verifyCards(world);
        await verifyBooks(world);
        await verifyRepeats(world);
      },
    ),
    { numRuns: runs, ...(seed === undefined ? {} : { seed }) },
  );
  const lines = [...coverage].sort(([a], [b]) => a.localeCompare(b)).map(([label, n]) => `${label}: ${n}`);
  context.diagnostic(`exercised: ${lines.join("; ")}`);
});
