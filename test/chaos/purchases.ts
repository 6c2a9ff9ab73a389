import { cardNetworkSignatureHeader } from "../../src/modules/rails/routes.ts";
import { signSpeiCallback } from "../../src/modules/transfers/signature.ts";
import { type Behaviour, Decider, type DecisionCall } from "../helpers/decider.ts";
import type { OpRecord } from "./checks.ts";
import type { CarefulClient, Session } from "./client.ts";

/**
 * Card purchase traffic of the bank test: each story is one purchase as the processor would send
 * it (an authorization, partial at times, then reversals, clearings split, final or beyond the
 * hold, an expiry by the sandbox route and a late clearing, returns and their reversals) or a
 * force post. Every message is an operation of its own, retried with its message_id (the
 * expiry with its Idempotency-Key) through crashes until answered, so the checks can prove each
 * took effect once (checkCardPurchases).
 */
export const cardNetworkSecret = "chaos-card-network-secret";

export const cardMessagesPath = "/v1/rails/cards/messages";

/** The processor's signature, made at each attempt: its timestamp must be recent. */
export function signCardMessage(raw: string): Record<string, string> {
  const now = Math.floor(Date.now() / 1000);
  return { [cardNetworkSignatureHeader]: signSpeiCallback(cardNetworkSecret, raw, now) };
}

export interface StoryContext {
  client: CarefulClient;
  tag: string;
  tenant: { name: string; session: Session; cards: string[] };
  record: (op: OpRecord) => void;
  /** When the client stops retrying: never during the load, later once it is over. */
  giveUpAt: () => number;
}

interface MessageAnswer {
  message_id: string;
  result: string;
  authorization_id: string | null;
  amount: number;
}

const shop = { name: "OXXO CHAOS", city: "CDMX", country: "MEX", mcc: "5411" };
const restaurant = { name: "TACOS CHAOS", city: "CDMX", country: "MEX", mcc: "5812" };
const casino = { name: "CASINO CHAOS", city: "CDMX", country: "MEX", mcc: "7995" };

/**
 * The spending controls every tenant of the bank test has on all its cards: some purchases are
 * above the maximum, a few are at a casino, and a busy card reaches its daily count.
 */
export const chaosControls = {
  maxAmountPesos: 220,
  dailyCount: 25,
  rules: [
    { type: "MAX_AMOUNT", amount: 220 },
    { type: "VELOCITY_LIMIT", window: "DAY", count_limit: 25 },
    { type: "MCC", mode: "BLOCK", mcc_groups: ["gambling"] },
  ],
};

/** The decision endpoint's timeout in the bank test: a slow answer overruns it. */
const decisionTimeoutMs = 400;

/**
 * How the bank test's decision endpoints answer: mostly approving at once, at times slowly but in
 * time, declining, approving in part, too slow (WEBHOOK_TIMEOUT) or down (WEBHOOK_ERROR).
 */
export function chaosDecision(call: DecisionCall): Behaviour {
  const roll = Math.random();
  const asked = call.body.authorization as { amount_cents: number; partial_allowed: boolean };
  if (roll < 0.05) return { kind: "silent" };
  if (roll < 0.1) return { kind: "drop" };
  if (roll < 0.18) return { kind: "answer", body: { decision: "DECLINE", reason: "CHAOS_DECLINED" } };
  if (roll < 0.28 && asked.partial_allowed && asked.amount_cents > 1)
    return {
      kind: "answer",
      body: { decision: "APPROVE", amount_cents: Math.floor(asked.amount_cents / 2) },
    };
  if (roll < 0.35) return { kind: "answer", body: { decision: "APPROVE" }, delayMs: 150 };
  return { kind: "answer", body: { decision: "APPROVE", metadata: { chaos: "yes" } } };
}

async function api(base: string, token: string, method: string, path: string, body: unknown) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const envelope = (await response.json()) as { success: boolean; data: Record<string, unknown> };
  if (!envelope.success) throw new Error(`${method} ${path}: ${JSON.stringify(envelope)}`);
  return envelope.data;
}

/**
 * Before the load: the controls on each tenant, and a decision endpoint for the first tenant
 * (stand-in APPROVE) and, where the second is a tenant of its own, for it (stand-in DECLINE); a
 * sub-client tenant inherits its parent's. Returns the endpoints, to close after the run.
 */
export async function setUpPurchaseRules(
  base: string,
  tenants: Array<{ session: Session; clientId: string }>,
  ownEndpoints: number,
): Promise<Decider[]> {
  for (const tenant of tenants)
    for (const rule of chaosControls.rules)
      await api(base, tenant.session.token, "POST", "/v1/spending_controls", {
        scope: "CLIENT",
        target_id: tenant.clientId,
        ...rule,
      });
  const deciders: Decider[] = [];
  for (const [index, tenant] of tenants.slice(0, ownEndpoints).entries()) {
    const decider = await new Decider().start();
    decider.behave = chaosDecision;
    const put = await api(base, tenant.session.token, "PUT", "/v1/clients/authorization_endpoint", {
      url: decider.url,
      timeout_ms: decisionTimeoutMs,
      stand_in: index === 0 ? "APPROVE" : "DECLINE",
    });
    decider.secret = String((put.authorization_endpoint as { secret: string }).secret);
    deciders.push(decider);
  }
  return deciders;
}

let sequence = 0;

const between = (min: number, max: number) => min + Math.floor(Math.random() * (max - min + 1));
/** A share of `cents` between the two fractions, at least one centavo. */
const share = (cents: number, low: number, high: number) =>
  Math.max(1, Math.round(cents * (low + Math.random() * (high - low))));

/** One signed message to the processor's route, retried until answered; the answer when 200. */
async function send(ctx: StoryContext, body: Record<string, unknown>): Promise<MessageAnswer | undefined> {
  sequence += 1;
  const messageId = `CXN${ctx.tag}-${sequence}`;
  const full = { message_id: messageId, ...body };
  const op: OpRecord = {
    kind: "card",
    key: messageId,
    marker: messageId,
    messageId,
    tenant: ctx.tenant.name,
    session: ctx.tenant.session,
    method: "POST",
    path: cardMessagesPath,
    body: full,
    amountCents: BigInt(typeof body.amount === "number" ? body.amount : 0),
    sign: signCardMessage,
  };
  ctx.record(op);
  op.answer = await ctx.client.send("POST", op.path, undefined, full, undefined, ctx.giveUpAt(), op.sign);
  return op.answer?.status === 200 ? (op.answer.body.data as MessageAnswer) : undefined;
}

/** The hold expires now (the sandbox route, its Idempotency-Key naming the message). */
async function expire(ctx: StoryContext, authorizationId: string): Promise<void> {
  sequence += 1;
  const key = `CXE${ctx.tag}-${sequence}`;
  const op: OpRecord = {
    kind: "card",
    key,
    marker: key,
    tenant: ctx.tenant.name,
    session: ctx.tenant.session,
    method: "POST",
    path: `/v1/sandbox/cards/authorizations/${authorizationId}/expire`,
    body: {},
    amountCents: 0n,
  };
  ctx.record(op);
  op.answer = await ctx.client.send("POST", op.path, op.session, op.body, key, ctx.giveUpAt());
}

async function clearing(ctx: StoryContext, id: string, amount: number, final: boolean): Promise<number> {
  const answer = await send(ctx, { type: "CLEARING", authorization_id: id, amount, is_final: final });
  return answer?.result === "POSTED" ? answer.amount : 0;
}

/** What follows an approval of `held` centavos; returns what cleared. */
async function followUp(ctx: StoryContext, id: string, held: number): Promise<number> {
  const roll = Math.random();
  if (roll < 0.15) {
    await send(ctx, { type: "AUTHORIZATION_REVERSAL", authorization_id: id });
    return 0;
  }
  if (roll < 0.3) {
    // A partial reversal (the fuel pump), then a final clearing of what is left, or less.
    const part = Math.min(held - 1, share(held, 0.1, 0.6));
    if (part > 0) await send(ctx, { type: "AUTHORIZATION_REVERSAL", authorization_id: id, amount: part });
    return clearing(ctx, id, share(held - Math.max(part, 0), 0.7, 1), true);
  }
  if (roll < 0.5) {
    // A split shipment: the rest stays held between the clearings; the last may exceed it.
    const first = share(held, 0.2, 0.7);
    const cleared = await clearing(ctx, id, first, false);
    return cleared + (await clearing(ctx, id, share(Math.max(held - first, 1), 0.5, 1.3), true));
  }
  // Beyond the hold: a tip, or more; the card pays what it can and owes the rest.
  if (roll < 0.7) return clearing(ctx, id, share(held, 1.01, 1.6), true);
  if (roll < 0.85) {
    await expire(ctx, id);
    return Math.random() < 0.5 ? clearing(ctx, id, held, true) : 0;
  }
  return clearing(ctx, id, held, true);
}

/** A refund of part of what cleared, reversed now and then. */
async function refund(ctx: StoryContext, id: string, cleared: number): Promise<void> {
  const returned = await send(ctx, { type: "RETURN", authorization_id: id, amount: share(cleared, 0.1, 1) });
  if (returned?.result === "POSTED" && Math.random() < 0.3)
    await send(ctx, { type: "RETURN_REVERSAL", original_message_id: returned.message_id });
}

/** One purchase of a random card of the tenant, from its authorization to its end. */
export async function purchaseStory(ctx: StoryContext): Promise<void> {
  const card = ctx.tenant.cards[Math.floor(Math.random() * ctx.tenant.cards.length)];
  if (!card) return;
  const roll = Math.random();
  const merchant = roll < 0.04 ? casino : roll < 0.34 ? restaurant : shop;
  if (Math.random() < 0.12) {
    // A force post: a clearing no authorization preceded, posted whatever the card holds.
    const cleared = await send(ctx, {
      type: "CLEARING",
      card_id: card,
      amount: between(100, 15_000),
      merchant,
    });
    if (cleared?.result === "POSTED" && Math.random() < 0.3)
      await send(ctx, { type: "RETURN", card_id: card, amount: share(cleared.amount, 0.1, 1), merchant });
    return;
  }
  const approval = await send(ctx, {
    type: "AUTHORIZATION",
    card_id: card,
    amount: between(100, 25_000),
    merchant,
    channel: Math.random() < 0.5 ? "POS_CHIP" : "ECOMMERCE",
    partial_allowed: Math.random() < 0.3,
  });
  if (approval?.result !== "APPROVED" || !approval.authorization_id || approval.amount === 0) return;
  const cleared = await followUp(ctx, approval.authorization_id, approval.amount);
  if (cleared > 0 && Math.random() < 0.3) await refund(ctx, approval.authorization_id, cleared);
}
