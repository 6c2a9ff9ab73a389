// Proves the client's real-time decision on authorizations end to end: Emisor's own checks first
// (the endpoint is never asked what they declined), the hold taken before the call so nothing is
// spent twice meanwhile, approve / decline / partial answers recorded with their metadata, the
// stand-in on a slow, down, garbage, unsigned or wrongly signed endpoint, inheritance by
// sub-clients, a repeat while deciding, and the recovery of a decision whose process stopped.
import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";
import { sql } from "kysely";
import { recoverAbandonedDecisions } from "../src/modules/purchases/decision-recovery.ts";
import { type MessageAnswer, processMessage, purchaseSettings } from "../src/modules/purchases/service.ts";
import { call, createSubClient, createTenant, expectOk, type Tenant } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
import { Decider } from "./helpers/decider.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { assertLedgerBalanced, eventsOf, messageId, postCardMessage } from "./helpers/rails.ts";

let t: TestApp;
let root: Tenant;
let decider: Decider;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-decisions" });
  root = await createTenant(t, { available: 1_000_000 });
  decider = await new Decider().start();
  decider.secret = await register(root, { timeout_ms: 300 });
});
after(async () => {
  await decider.close();
  await t.close();
});
beforeEach(() => {
  decider.calls.length = 0;
  decider.behave = () => ({ kind: "answer", body: { decision: "APPROVE" } });
});

const merchant = { name: "OXXO", city: "CDMX", country: "MEX", mcc: "5411", acceptor_id: "T1" };

async function register(tenant: Tenant, body: Record<string, unknown> = {}): Promise<string> {
  const put = expectOk(
    await call<{ authorization_endpoint: { secret: string | null } }>(
      t.app,
      "PUT",
      "/v1/clients/authorization_endpoint",
      {
        token: tenant.token,
        body: { url: decider.url, ...body },
      },
    ),
  );
  return put.authorization_endpoint.secret ?? decider.secret;
}

async function authorize(cardId: string, cents: number, extra: Record<string, unknown> = {}) {
  return expectOk(
    await postCardMessage(t, {
      type: "AUTHORIZATION",
      card_id: cardId,
      amount: cents,
      merchant,
      channel: "POS_CHIP",
      ...extra,
    }),
  ) as MessageAnswer;
}

async function view(id: string | null) {
  return (
    expectOk(await call(t.app, "GET", `/v1/authorizations/${id}`, { token: root.token })) as {
      authorization: {
        status: string;
        held: number;
        decline_reason: string | null;
        decision: { status: string; metadata: Record<string, string> } | null;
      };
    }
  ).authorization;
}

async function money(cardId: string) {
  return (
    expectOk(await call(t.app, "GET", `/v1/cards/${cardId}`, { token: root.token })) as {
      card: { available: number; held: number };
    }
  ).card;
}

const card = async (funds = 1_000) => (await spendableCard(t, root, { commission: 0, funds })).id;

test("an approval is asked of the client, signed, with its metadata kept; declines first are never asked", async () => {
  const c = await card();
  decider.behave = () => ({ kind: "answer", body: { decision: "APPROVE", metadata: { risk: "low" } } });
  const approved = await authorize(c, 10_000);
  assert.equal(approved.result, "APPROVED");
  assert.equal(decider.calls.length, 1);
  const asked = decider.calls[0];
  assert.equal(asked?.headers["idempotency-key"], approved.authorization_id);
  assert.deepEqual(
    [asked?.body.type, asked?.body.authorization.amount_cents],
    ["card_authorization.request", 10_000],
  );
  const a = await view(approved.authorization_id);
  assert.deepEqual([a.status, a.decision], ["PENDING", { status: "ANSWERED", metadata: { risk: "low" } }]);
  const created = (await eventsOf(t, root.clientId, "card_authorization.created")).filter(
    (e) => e.id === approved.authorization_id,
  );
  assert.equal(created.length, 1);
  assert.equal((await authorize(c, 1_000_000)).decline_reason, "INSUFFICIENT_FUNDS");
  assert.equal(decider.calls.length, 1);
});

test("a decline releases the hold with the client's reason; a partial approval keeps what it approved", async () => {
  const c = await card();
  decider.behave = () => ({ kind: "answer", body: { decision: "DECLINE", reason: "FRAUD_SUSPECTED" } });
  const declined = await authorize(c, 30_000);
  assert.deepEqual(
    [declined.result, declined.decline_reason, declined.authorization_code],
    ["DECLINED", "FRAUD_SUSPECTED", null],
  );
  assert.deepEqual([declined.balance?.available, declined.balance?.held], [100_000, 0]);
  const a = await view(declined.authorization_id);
  assert.deepEqual([a.status, a.held, a.decline_reason], ["DECLINED", 0, "FRAUD_SUSPECTED"]);
  assert.deepEqual(await money(c), { ...(await money(c)), available: 1_000, held: 0 });
  decider.behave = () => ({ kind: "answer", body: { decision: "APPROVE", amount_cents: 12_000 } });
  const partial = await authorize(c, 30_000, { partial_allowed: true });
  assert.deepEqual([partial.result, partial.amount, partial.partial], ["APPROVED", 12_000, true]);
  assert.deepEqual([(await money(c)).available, (await money(c)).held], [880, 120]);
  await assertLedgerBalanced(t);
});

test("slow, down, garbage, unsigned and wrongly signed endpoints stand in, with their reason", async () => {
  const c = await card();
  const cases: Array<[ReturnType<Decider["behave"]>, string]> = [
    [{ kind: "silent" }, "WEBHOOK_TIMEOUT"],
    [{ kind: "answer", body: { decision: "APPROVE" }, delayMs: 600 }, "WEBHOOK_TIMEOUT"],
    [{ kind: "answer", body: "not json" }, "WEBHOOK_ERROR"],
    [{ kind: "answer", body: { decision: "MAYBE" } }, "WEBHOOK_ERROR"],
    [{ kind: "answer", body: { decision: "APPROVE" }, sign: "none" }, "WEBHOOK_ERROR"],
    [{ kind: "answer", body: { decision: "APPROVE" }, sign: "wrong" }, "WEBHOOK_ERROR"],
  ];
  for (const [behaviour, reason] of cases) {
    decider.behave = () => behaviour;
    const answer = await authorize(c, 100);
    assert.deepEqual([answer.result, answer.decline_reason], ["DECLINED", reason], JSON.stringify(behaviour));
    const a = await view(answer.authorization_id);
    assert.equal(a.decision?.status, "STOOD_IN");
    assert.equal(a.decision?.metadata.stand_in_reason, reason);
  }
  // Down: nothing listens where the endpoint points.
  const sub = await createSubClient(t, root, 10_000);
  expectOk(
    await call(t.app, "PUT", "/v1/clients/authorization_endpoint", {
      token: sub.token,
      body: { url: "http://127.0.0.1:9/decide", timeout_ms: 300, stand_in: "APPROVE" },
    }),
  );
  const theirs = (await spendableCard(t, sub, { commission: 0, funds: 100 })).id;
  const stoodIn = await authorize(theirs, 100);
  assert.equal(stoodIn.result, "APPROVED");
  const a = (
    expectOk(
      await call(t.app, "GET", `/v1/authorizations/${stoodIn.authorization_id}`, { token: sub.token }),
    ) as {
      authorization: { decision: { status: string; metadata: Record<string, string> } };
    }
  ).authorization;
  assert.deepEqual([a.decision.status, a.decision.metadata.stand_in_reason], ["STOOD_IN", "WEBHOOK_ERROR"]);
});

test("a sub-client inherits its ancestor's endpoint until it registers its own", async () => {
  const sub = await createSubClient(t, root, 10_000);
  const theirs = (await spendableCard(t, sub, { commission: 0, funds: 100 })).id;
  await authorize(theirs, 100);
  assert.equal(decider.calls.length, 1);
  assert.equal(decider.calls[0]?.body.authorization.client_id, sub.clientId);
});

test("the hold is taken before the client decides: two purchases at once never spend the money twice", async () => {
  const c = await card(100);
  decider.behave = () => ({ kind: "answer", body: { decision: "APPROVE" }, delayMs: 100 });
  const answers = await Promise.all([authorize(c, 8_000), authorize(c, 8_000), authorize(c, 8_000)]);
  assert.equal(answers.filter((a) => a.result === "APPROVED").length, 1);
  assert.equal(answers.filter((a) => a.decline_reason === "INSUFFICIENT_FUNDS").length, 2);
  assert.equal(decider.calls.length, 1);
});

test("a repeat while the client decides waits for the same answer, and the client is asked once", async () => {
  const c = await card();
  decider.behave = () => ({ kind: "answer", body: { decision: "APPROVE" }, delayMs: 150 });
  const id = messageId();
  const body = {
    type: "AUTHORIZATION",
    card_id: c,
    amount: 500,
    merchant,
    channel: "POS_CHIP",
    message_id: id,
  };
  const [first, repeat] = await Promise.all([postCardMessage(t, body), postCardMessage(t, body)]);
  assert.deepEqual(expectOk(repeat), expectOk(first));
  assert.equal(decider.calls.length, 1);
});

test("a decision its process never recorded gets the stand-in from the recovery pass", async () => {
  const c = await card();
  const id = messageId();
  // The hold taken and the client about to be asked, as a process that then stopped left it.
  const processed = await processMessage(
    t.ctx.db,
    {
      messageId: id,
      type: "AUTHORIZATION",
      card: { id: c },
      amountCents: 700n,
      currency: "484",
      merchantAmount: 700n,
      merchant,
      channel: "POS_CHIP",
      partialAllowed: false,
      isFinal: true,
    },
    purchaseSettings(t.ctx),
  );
  assert.ok(processed.awaiting);
  assert.equal(await recoverAbandonedDecisions(t.ctx.db, 10), 0);
  await sql`update card_authorizations set created_at = now() - interval '1 minute' where id = ${processed.awaiting.authorization.id}::uuid`.execute(
    t.ctx.db,
  );
  assert.equal(await recoverAbandonedDecisions(t.ctx.db, 10), 1);
  const repeat = await postCardMessage(t, {
    type: "AUTHORIZATION",
    card_id: c,
    amount: 700,
    merchant,
    channel: "POS_CHIP",
    message_id: id,
  });
  const answer = expectOk(repeat) as MessageAnswer;
  assert.deepEqual([answer.result, answer.decline_reason], ["DECLINED", "WEBHOOK_TIMEOUT"]);
  assert.equal((await money(c)).held, 0);
  assert.equal(decider.calls.length, 0);
  await assertLedgerBalanced(t);
});
