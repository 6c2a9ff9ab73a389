import { sql } from "kysely";
import type { Db } from "../../db/database.ts";
import { jsonbArray } from "../../db/jsonb-array.ts";
import { type BatchEntry, ledgerBatch } from "../../ledger/batch.ts";
import type { WindowKeys } from "../controls/windows.ts";
import { eventsWithDeliveries, type OutboxEvent } from "../events/repository.ts";
import { type AuthorizationRow, type CardState, heldByCard } from "./repository.ts";
import {
  type Spending,
  type SpendingDelta,
  type SpendingRow,
  spendingAt,
  spendingMoves,
} from "./spending.ts";

/** A card as a batch of authorizations reads it (unlocked), with what its authorizations hold. */
export interface BatchCard extends CardState {
  pan_fingerprint: string;
  held_cents: bigint;
  /** What the card spent in the windows that contain the batch's moment, as velocity limits count. */
  spending: Spending;
}

/** The cards the batch names (by id or by number's fingerprint), read without locks. */
export async function readBatchCards(
  db: Db,
  ids: string[],
  fingerprints: string[],
  now: WindowKeys,
): Promise<BatchCard[]> {
  const result = await sql<Omit<BatchCard, "spending"> & { spending: SpendingRow | null }>`
    select c.id, c.pan_fingerprint, c.client_id, c.cardholder_id, c.product_id, cl.lineage, c.status,
      c.expires_on::text as expires_on,
      exists (select 1 from clients x where x.id = any(cl.lineage) and x.status <> 'ACTIVE') as client_disabled,
      la.balance_cents, o.id as owed_account_id, coalesce(-o.balance_cents, 0)::bigint as owed_cents,
      ${heldByCard(sql.ref("c.id"))} as held_cents, to_jsonb(s) as spending
    from cards c
    join clients cl on cl.id = c.client_id
    join ledger_accounts la on la.id = c.id
    left join ledger_accounts o on o.card_id = c.id and o.kind = 'CARD_OWED'
    left join card_spending s on s.card_id = c.id
    where c.id = any(${ids}::uuid[]) or c.pan_fingerprint = any(${fingerprints}::text[])`.execute(db);
  return result.rows.map((row) => ({ ...row, spending: spendingAt(row.spending, now) }));
}

/** The answers already given to any of these message ids. */
export async function answeredMessages(db: Db, messageIds: string[]): Promise<Map<string, unknown>> {
  const rows = await db
    .selectFrom("card_network_messages")
    .select(["message_id", "response"])
    .where("message_id", "in", messageIds)
    .execute();
  return new Map(rows.map((row) => [row.message_id, row.response]));
}

export interface MessageRow {
  messageId: string;
  cardId: string | null;
  clientId: string | null;
  authorizationId: string | null;
  amountCents: bigint;
  entryId: string | null;
  merchant: unknown;
  response: unknown;
}

/** A card as the batch decided on it, before its holds: the statement must find it so. */
export interface CardAsDecided {
  id: string;
  status: string;
  clientDisabled: boolean;
  balanceCents: bigint;
  heldCents: bigint;
  owedCents: bigint;
}

export type BatchAuthorization = Omit<
  AuthorizationRow,
  "force_post" | "cleared_cents" | "decision" | "decision_metadata"
> & { decision: AuthorizationRow["decision"] };

export interface AuthorizationBatch {
  /** Every card the batch decided on, as it was decided on. */
  cards: CardAsDecided[];
  entries: BatchEntry[];
  holdShard: { account: string; shard: string };
  authorizations: BatchAuthorization[];
  messages: MessageRow[];
  events: OutboxEvent[];
  /** What the approvals add to each card's spending; `expected`: cards whose limits count it. */
  spending: { deltas: SpendingDelta[]; expected: Map<string, Spending>; now: WindowKeys };
  /** The spending controls' generation the batch was decided on. */
  generation: bigint;
}

/**
 * A batch of decided authorizations as ONE statement, its own transaction: every card as it was
 * decided on (status, clients, balance, what it holds and owes: the answers quote them), the holds (the ledger locks the cards' rows in id order, then the shard,
 * and each card must still cover its holds), the authorizations, the messages with their answers
 * (a message id taken meanwhile is a unique violation) and the events. Any check that fails raises
 * EM001 and the statement writes nothing; the caller then runs each message on its own.
 */
export async function writeAuthorizationsAtOnce(db: Db, batch: AuthorizationBatch): Promise<void> {
  const ledger = ledgerBatch(batch.entries, new Map([[batch.holdShard.account, batch.holdShard.shard]]));
  const a = batch.authorizations;
  const m = batch.messages;
  const cards = batch.cards;
  const spending = spendingMoves(batch.spending.deltas, batch.spending.now, batch.spending.expected);
  await sql`
    with cards_as_decided as (
      select c.id
      from unnest(${cards.map((c) => c.id)}::uuid[], ${cards.map((c) => c.status)}::text[],
        ${cards.map((c) => c.clientDisabled)}::boolean[], ${cards.map((c) => String(c.balanceCents))}::bigint[],
        ${cards.map((c) => String(c.heldCents))}::bigint[], ${cards.map((c) => String(c.owedCents))}::bigint[])
        as v(id, status, client_disabled, balance_cents, held_cents, owed_cents)
      cross join lateral (select c.id, c.status, c.client_id from cards c where c.id = v.id) c
      cross join lateral (select cl.lineage from clients cl where cl.id = c.client_id) cl
      cross join lateral (select la.balance_cents from ledger_accounts la where la.id = c.id) la
      left join ledger_accounts o on o.card_id = c.id and o.kind = 'CARD_OWED'
      where c.status = v.status and la.balance_cents = v.balance_cents
        and coalesce(-o.balance_cents, 0) = v.owed_cents and ${heldByCard(sql.ref("c.id"))} = v.held_cents
        and exists (select 1 from clients x where x.id = any(cl.lineage) and x.status <> 'ACTIVE') = v.client_disabled),
    ${ledger.ctes},
    authorizations as (
      insert into card_authorizations (id, card_id, client_id, status, currency, merchant_amount,
        requested_cents, authorized_cents, held_cents, authorization_code, decline_reason, channel,
        partial_allowed, merchant, mcc, hold_account_id, expires_at, created_at, updated_at, decision)
      select * from unnest(${a.map((x) => x.id)}::uuid[], ${a.map((x) => x.card_id)}::uuid[],
        ${a.map((x) => x.client_id)}::uuid[], ${a.map((x) => x.status)}::text[], ${a.map((x) => x.currency)}::text[],
        ${a.map((x) => String(x.merchant_amount))}::bigint[], ${a.map((x) => String(x.requested_cents))}::bigint[],
        ${a.map((x) => String(x.authorized_cents))}::bigint[], ${a.map((x) => String(x.held_cents))}::bigint[],
        ${a.map((x) => x.authorization_code)}::text[], ${a.map((x) => x.decline_reason)}::text[],
        ${a.map((x) => x.channel)}::text[], ${a.map((x) => x.partial_allowed)}::boolean[],
        ${jsonbArray(a.map((x) => JSON.stringify(x.merchant)))}, ${a.map((x) => x.mcc)}::text[],
        ${a.map((x) => x.hold_account_id)}::uuid[], ${a.map((x) => x.expires_at?.toISOString() ?? null)}::timestamptz[],
        ${a.map((x) => x.created_at.toISOString())}::timestamptz[], ${a.map((x) => x.updated_at.toISOString())}::timestamptz[],
        ${a.map((x) => x.decision)}::text[])
      returning id),
    messages as (
      insert into card_network_messages (message_id, type, card_id, client_id, authorization_id, amount_cents,
        entry_id, merchant, response)
      select v.message_id, 'AUTHORIZATION', v.card_id, v.client_id, v.authorization_id, v.amount_cents,
        v.entry_id, v.merchant, v.response
      from unnest(${m.map((x) => x.messageId)}::text[], ${m.map((x) => x.cardId)}::uuid[],
        ${m.map((x) => x.clientId)}::uuid[], ${m.map((x) => x.authorizationId)}::uuid[],
        ${m.map((x) => String(x.amountCents))}::bigint[], ${m.map((x) => x.entryId)}::uuid[],
        ${jsonbArray(m.map((x) => JSON.stringify(x.merchant ?? null)))}, ${jsonbArray(m.map((x) => (x.response === null ? null : JSON.stringify(x.response))))})
        as v(message_id, card_id, client_id, authorization_id, amount_cents, entry_id, merchant, response)
      returning seq),
    ${spending.ctes},
    ${eventsWithDeliveries(batch.events)}
    select
      emisor_require((select count(*) from cards_as_decided) = ${cards.length}
        and (select generation from spending_control_generation) = ${String(batch.generation)}::bigint,
        'a card or a spending control changed') as cards,
      ${ledger.steps},
      ${spending.step},
      (select count(*) from authorizations) + (select count(*) from messages) as rows,
      (select count(*) from outbox_events) + (select count(*) from outbox_deliveries) as events`.execute(db);
}
