import { type RawBuilder, type Selectable, sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import { instantKeysetConditions } from "../../db/keyset.ts";
import type { CardAuthorizationsTable, CardStatus } from "../../db/schema.ts";
import { instantKey } from "../../http/cursor.ts";
import type { CardRef } from "../cards/card-number.ts";
import { windowKeysAt } from "../controls/windows.ts";
import { moveSpending, spendingDeltas } from "./spending.ts";

/** SQL of card purchases: the processor's messages, the authorizations and the cards they move. */
export type AuthorizationRow = Selectable<CardAuthorizationsTable>;

/**
 * Records that a message is being processed, or finds that it was: the primary key makes a second
 * transaction with the same id wait for the first and then find its row. False when it exists.
 */
export async function claimMessage(tx: Tx, messageId: string, type: string): Promise<boolean> {
  const result = await sql`
    insert into card_network_messages (message_id, type) values (${messageId}, ${type})
    on conflict (message_id) do nothing returning seq`.execute(tx);
  return result.rows.length === 1;
}

export async function storedAnswer(db: Queryable, messageId: string): Promise<unknown> {
  const row = await db
    .selectFrom("card_network_messages")
    .select("response")
    .where("message_id", "=", messageId)
    .executeTakeFirst();
  return row?.response;
}

export interface MessageRecord {
  messageId: string;
  cardId: string | null;
  clientId: string | null;
  authorizationId: string | null;
  amountCents: bigint | null;
  entryId: string | null;
  reversesMessageId: string | null;
  fileId: string | null;
  merchant: unknown;
  /** Null while the card's client decides: the answer is recorded then. */
  response: unknown;
}

/** Completes the row claimMessage wrote with what the message did and the answer it got. */
export async function recordMessage(tx: Tx, record: MessageRecord): Promise<void> {
  await tx
    .updateTable("card_network_messages")
    .set({
      card_id: record.cardId,
      client_id: record.clientId,
      authorization_id: record.authorizationId,
      amount_cents: record.amountCents,
      entry_id: record.entryId,
      reverses_message_id: record.reversesMessageId,
      file_id: record.fileId,
      merchant: record.merchant === undefined ? null : JSON.stringify(record.merchant),
      response: record.response === null ? null : JSON.stringify(record.response),
    })
    .where("message_id", "=", record.messageId)
    .execute();
}

/** A card as a purchase decides on it, its row locked: status, expiry, money and debt. */
export interface CardState {
  id: string;
  client_id: string;
  cardholder_id: string | null;
  product_id: string;
  /** The card's client's lineage, the root first: the clients whose controls reach the card. */
  lineage: readonly string[];
  status: CardStatus;
  expires_on: string;
  client_disabled: boolean;
  balance_cents: bigint;
  owed_account_id: string | null;
  /** What the card owes, as a positive number (its owed account's balance negated). */
  owed_cents: bigint;
}

/**
 * The assigned card `ref` names, its ledger row locked: every movement of a card's money locks
 * that row first, so the messages of one card apply one at a time and see each other's effect.
 */
export async function lockCard(tx: Tx, ref: CardRef): Promise<CardState | undefined> {
  const where = "id" in ref ? sql`c.id = ${ref.id}::uuid` : sql`c.pan_fingerprint = ${ref.fingerprint}`;
  const result = await sql<Omit<CardState, "owed_account_id" | "owed_cents">>`
    select c.id, c.client_id, c.cardholder_id, c.product_id, cl.lineage, c.status, c.expires_on::text as expires_on,
      exists (select 1 from clients x where x.id = any(cl.lineage) and x.status <> 'ACTIVE') as client_disabled,
      la.balance_cents
    from cards c
    join clients cl on cl.id = c.client_id
    join ledger_accounts la on la.id = c.id
    where ${where}
    for update of la`.execute(tx);
  const card = result.rows[0];
  if (!card) return undefined;
  // Read after the lock, in a statement of its own: one that waited for the lock sees the locked
  // row as it is now but every other row as it was when it started, and what the card owes
  // changes only under that lock.
  const owed = (await owedOf(tx, [card.id])).get(card.id);
  return { ...card, owed_account_id: owed?.id ?? null, owed_cents: owed?.owed_cents ?? 0n };
}

/** Each card's owed account and what it owes (a positive number), for the cards that have one. */
export async function owedOf(
  tx: Tx,
  cardIds: string[],
): Promise<Map<string, { id: string; owed_cents: bigint }>> {
  const result = await sql<{ card_id: string; id: string; owed_cents: bigint }>`
    select card_id, id, (-balance_cents)::bigint as owed_cents from ledger_accounts
    where card_id = any(${cardIds}::uuid[]) and kind = 'CARD_OWED'`.execute(tx);
  return new Map(result.rows.map((row) => [row.card_id, row]));
}

export async function findAuthorization(db: Queryable, id: string): Promise<AuthorizationRow | undefined> {
  return db.selectFrom("card_authorizations").selectAll().where("id", "=", id).executeTakeFirst();
}

export type NewAuthorization = Omit<
  AuthorizationRow,
  "created_at" | "updated_at" | "decision" | "decision_metadata"
> &
  Partial<Pick<AuthorizationRow, "decision">>;

/** A new authorization, and what it spends on its card (velocity limits count it). */
export async function insertAuthorization(tx: Tx, row: NewAuthorization): Promise<AuthorizationRow> {
  const inserted = await tx
    .insertInto("card_authorizations")
    .values({ ...row, merchant: JSON.stringify(row.merchant) })
    .returningAll()
    .executeTakeFirstOrThrow();
  const now = windowKeysAt(Date.now());
  await moveSpending(tx, spendingDeltas([{ after: inserted }], now), now);
  return inserted;
}

export type AuthorizationChange = Partial<
  Pick<
    AuthorizationRow,
    | "status"
    | "authorized_cents"
    | "held_cents"
    | "cleared_cents"
    | "expires_at"
    | "hold_account_id"
    | "authorization_code"
    | "decline_reason"
    | "decision"
  >
> & { decision_metadata?: string };

/**
 * A change of an authorization (`before` as locked), and of what it spends on its card. A declined
 * authorization that an advice or a clearing (neither can be refused) moves on to another status
 * loses its decline reason: the table holds a reason on DECLINED rows only, and
 * the declined answer stays in the message history.
 */
export async function updateAuthorization(
  tx: Tx,
  before: AuthorizationRow,
  change: AuthorizationChange,
): Promise<AuthorizationRow> {
  const reason = change.status && change.status !== "DECLINED" ? { decline_reason: null } : {};
  const updated = await tx
    .updateTable("card_authorizations")
    .set({ ...change, ...reason, updated_at: sql`now()` })
    .where("id", "=", before.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const now = windowKeysAt(Date.now());
  await moveSpending(tx, spendingDeltas([{ before, after: updated }], now), now);
  return updated;
}

/** What the card (a column or a value) has held by its pending authorizations: a scalar subquery. */
export function heldByCard(cardId: RawBuilder<unknown>): RawBuilder<bigint> {
  return sql<bigint>`(select coalesce(sum(h.held_cents), 0) from card_authorizations h
    where h.card_id = ${cardId} and h.status = 'PENDING')::bigint`;
}

/** What the card (a column or a value) owes, 0 if it never did: a scalar subquery. */
export function owedByCard(cardId: RawBuilder<unknown>): RawBuilder<bigint> {
  return sql<bigint>`coalesce((select -o.balance_cents from ledger_accounts o
    where o.card_id = ${cardId} and o.kind = 'CARD_OWED'), 0)::bigint`;
}

/** What the card's pending authorizations hold. */
export async function heldOf(db: Queryable, cardId: string): Promise<bigint> {
  const result = await sql<{ held: bigint }>`select ${heldByCard(sql`${cardId}::uuid`)} as held`.execute(db);
  return result.rows[0]?.held ?? 0n;
}

export async function findMessage(db: Queryable, messageId: string) {
  return db
    .selectFrom("card_network_messages")
    .select(["message_id", "type", "card_id", "client_id", "amount_cents", "authorization_id", "merchant"])
    .where("message_id", "=", messageId)
    .executeTakeFirst();
}

/** The messages that touched an authorization, in the order they were processed. */
export async function messagesOf(db: Queryable, authorizationId: string) {
  return db
    .selectFrom("card_network_messages")
    .select(["message_id", "type", "amount_cents", "response", "created_at"])
    .where("authorization_id", "=", authorizationId)
    .orderBy("seq")
    .execute();
}

/** An authorization when its card's client is in the caller's subtree. */
export async function findAuthorizationInScope(db: Queryable, callerId: string, id: string) {
  const result = await sql<AuthorizationRow>`
    select a.* from card_authorizations a join clients cl on cl.id = a.client_id
    where a.id = ${id}::uuid and ${callerId}::uuid = any(cl.lineage)`.execute(db);
  return result.rows[0];
}

/** A card's authorizations, newest first, strictly below the keyset position `before`. */
export async function listCardAuthorizations(
  db: Queryable,
  cardId: string,
  page: { limit: number; before?: { at: string; id: string } | undefined },
): Promise<Array<AuthorizationRow & { created_at_text: string }>> {
  const conditions = [
    sql`a.card_id = ${cardId}::uuid`,
    ...instantKeysetConditions("a", { before: page.before }),
  ];
  const result = await sql<AuthorizationRow & { created_at_text: string }>`
    select a.*, ${instantKey("a.created_at")} as created_at_text from card_authorizations a
    where ${sql.join(conditions, sql` and `)}
    order by a.created_at desc, a.id desc limit ${page.limit}`.execute(db);
  return result.rows;
}

/** Pending authorizations whose hold is past its expiry: the expiry worker's next pass. */
export async function expiredHolds(
  db: Queryable,
  limit: number,
): Promise<Array<{ id: string; expires_at: Date }>> {
  const result = await sql<{ id: string; expires_at: Date }>`
    select id, expires_at from card_authorizations
    where status = 'PENDING' and expires_at <= now() order by expires_at limit ${limit}`.execute(db);
  return result.rows;
}

export async function returnReversed(db: Queryable, returnMessageId: string): Promise<boolean> {
  const row = await db
    .selectFrom("card_network_messages")
    .select("message_id")
    .where("reverses_message_id", "=", returnMessageId)
    .executeTakeFirst();
  return row !== undefined;
}
