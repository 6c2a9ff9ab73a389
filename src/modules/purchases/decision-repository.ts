import { sql } from "kysely";
import type { Db } from "../../db/database.ts";
import { jsonbArray } from "../../db/jsonb-array.ts";
import { emitEvents, outboxRows } from "../events/outbox.ts";
import { eventsWithDeliveries } from "../events/repository.ts";
import { spendable } from "./card-money.ts";
import type { AwaitingDecision, Decided } from "./decisions.ts";
import { moveHold } from "./holds.ts";
import { authorizationEvent } from "./message.ts";
import * as repo from "./repository.ts";
import type { MessageAnswer } from "./service.ts";

/** SQL of the client's decisions: approvals recorded in a batch, the rest one by one. */

/**
 * Approvals as they stand, in ONE statement: each authorization still AWAITING gets its decision
 * and metadata, its message the planned answer, and its creation event. If any was recorded
 * meanwhile (the recovery's stand-in), the statement refuses itself (EM001) and writes nothing.
 */
export async function recordApprovals(
  db: Db,
  approvals: Array<{ awaiting: AwaitingDecision; decided: Extract<Decided, { kind: "APPROVE" }> }>,
): Promise<void> {
  const rows = approvals.map(({ awaiting, decided }) => ({
    id: awaiting.authorization.id,
    messageId: awaiting.messageId,
    decision: decided.decision,
    metadata: JSON.stringify(decided.metadata),
    response: JSON.stringify(awaiting.answer),
  }));
  const events = outboxRows(
    approvals.map(({ awaiting, decided }) =>
      authorizationEvent("card_authorization.created", {
        ...awaiting.authorization,
        decision: decided.decision,
        decision_metadata: decided.metadata,
      }),
    ),
  );
  const ids = rows.map((r) => r.id);
  const messageIds = rows.map((r) => r.messageId);
  await sql`
    with decided as (
      select * from unnest(${ids}::uuid[], ${messageIds}::text[], ${rows.map((r) => r.decision)}::text[],
        ${jsonbArray(rows.map((r) => r.metadata))}, ${jsonbArray(rows.map((r) => r.response))})
        as v(id, message_id, decision, metadata, response)),
    authorizations as (
      update card_authorizations a set decision = d.decision, decision_metadata = d.metadata, updated_at = now()
      from decided d where a.id = any(${ids}::uuid[]) and a.id = d.id and a.decision = 'AWAITING'
      returning a.id),
    messages as (
      update card_network_messages m set response = d.response
      from decided d where m.message_id = any(${messageIds}::text[]) and m.message_id = d.message_id
        and m.response is null
      returning m.message_id),
    ${eventsWithDeliveries(events)}
    select emisor_require((select count(*) from authorizations) = ${rows.length}
        and (select count(*) from messages) = ${rows.length}, 'a decision was recorded meanwhile') as decided,
      (select count(*) from outbox_events) + (select count(*) from outbox_deliveries) as events`.execute(db);
}

/**
 * A decision in a transaction of its own, the card locked: what the client did not approve is
 * released (all of it for a decline), the authorization takes the decision (DECLINED with the
 * client's reason, or the stand-in's), and its message the answer. An authorization decided
 * meanwhile answers what was recorded.
 */
export async function finishDecision(
  db: Db,
  authorizationId: string,
  messageId: string,
  decided: Decided,
): Promise<MessageAnswer> {
  return db.transaction().execute(async (tx) => {
    const first = await repo.findAuthorization(tx, authorizationId);
    if (!first) throw new Error("a decided authorization vanished");
    const card = await repo.lockCard(tx, { id: first.card_id });
    const authorization = await repo.findAuthorization(tx, authorizationId);
    if (!card || !authorization) throw new Error("a decided authorization's card vanished");
    if (authorization.decision !== "AWAITING")
      return (await repo.storedAnswer(tx, messageId)) as MessageAnswer;
    const held = authorization.held_cents;
    const approved = decided.kind === "APPROVE" && decided.amountCents < held ? decided.amountCents : held;
    const target = decided.kind === "APPROVE" ? approved : 0n;
    if (target < held) await moveHold(tx, card, authorization, target, messageId);
    const declined = decided.kind === "DECLINE";
    const updated = await repo.updateAuthorization(tx, authorization, {
      held_cents: target,
      authorized_cents: target,
      status: declined ? "DECLINED" : "PENDING",
      ...(declined ? { decline_reason: decided.reason, authorization_code: null } : {}),
      decision: decided.decision,
      decision_metadata: JSON.stringify(decided.metadata),
    });
    const answer: MessageAnswer = {
      message_id: messageId,
      type: "AUTHORIZATION",
      result: declined ? "DECLINED" : "APPROVED",
      authorization_id: updated.id,
      authorization_code: updated.authorization_code,
      decline_reason: declined ? decided.reason : null,
      amount: Number(target),
      partial: !declined && target < authorization.requested_cents,
      over_tolerance: false,
      balance: {
        available: Number(spendable(card)),
        held: Number(await repo.heldOf(tx, card.id)),
        owed: Number(card.owed_cents),
      },
    };
    await sql`update card_network_messages set response = ${JSON.stringify(answer)}::jsonb,
      amount_cents = ${String(declined ? authorization.requested_cents : target)}::bigint
      where message_id = ${messageId}`.execute(tx);
    await emitEvents(tx, [authorizationEvent("card_authorization.created", updated)]);
    return answer;
  });
}

export interface AbandonedDecision {
  id: string;
  client_id: string;
  held_cents: bigint;
  message_id: string;
}

/**
 * Authorizations still AWAITING well past the longest a decision may take (their process died),
 * oldest first; or, given `messageId`, only that message's authorization.
 */
export async function abandonedDecisions(
  db: Db,
  olderThanMs: number,
  limit: number,
  messageId?: string,
): Promise<AbandonedDecision[]> {
  // The awaiting set is read first and alone (materialized): it holds only the decisions in flight,
  // while a plan driven from card_authorizations read about 10 ms of it at every recovery pass.
  const result = await sql<AbandonedDecision>`
    with w as materialized (select authorization_id from card_decisions_awaiting)
    select a.id, a.client_id, a.held_cents, m.message_id
    from w
    join card_authorizations a on a.id = w.authorization_id
    join card_network_messages m on m.authorization_id = a.id and m.type = 'AUTHORIZATION'
    where a.decision = 'AWAITING' and a.created_at < now() - make_interval(secs => ${olderThanMs / 1000})
      ${messageId === undefined ? sql`` : sql`and m.message_id = ${messageId}`}
    order by a.created_at limit ${limit}`.execute(db);
  return result.rows;
}
