import { sql } from "kysely";
import type { Tx } from "../../db/database.ts";
import {
  type AuthorizationRow,
  type CardState,
  type MessageRecord,
  type NewAuthorization,
  owedOf,
} from "./repository.ts";

/**
 * SQL of a clearing file's chunk: what repository.ts does for one message, for many in one
 * statement each (claims, card locks, authorizations, message rows).
 */

/** Claims the messages' ids for the file; answers the ids claimed (the others were claimed before). */
export async function claimMessages(
  tx: Tx,
  messages: Array<{ messageId: string; type: string }>,
  fileId: string,
): Promise<Set<string>> {
  const result = await sql<{ message_id: string }>`
    insert into card_network_messages (message_id, type, file_id)
    select m.id, m.type, ${fileId} from unnest(${messages.map((m) => m.messageId)}::text[],
      ${messages.map((m) => m.type)}::text[]) as m(id, type)
    on conflict (message_id) do nothing returning message_id`.execute(tx);
  return new Set(result.rows.map((row) => row.message_id));
}

/** The file each message was recorded by, and the answer it got. */
export async function storedMessages(
  tx: Tx,
  messageIds: string[],
): Promise<Map<string, { file_id: string | null; response: unknown }>> {
  if (messageIds.length === 0) return new Map();
  const result = await sql<{ message_id: string; file_id: string | null; response: unknown }>`
    select message_id, file_id, response from card_network_messages
    where message_id = any(${messageIds}::text[])`.execute(tx);
  return new Map(result.rows.map((row) => [row.message_id, row]));
}

/**
 * The cards named (by id, by number's fingerprint, or through an authorization), as lockCard reads
 * one, their ledger rows locked in id order, so that two chunks sharing cards cannot deadlock.
 */
export async function lockCards(
  tx: Tx,
  named: { ids: string[]; fingerprints: string[]; authorizationIds: string[] },
): Promise<Array<CardState & { pan_fingerprint: string }>> {
  const result = await sql<Omit<CardState, "owed_account_id" | "owed_cents"> & { pan_fingerprint: string }>`
    with wanted as (
      select unnest(${named.ids}::uuid[]) as id
      union select card_id from card_authorizations where id = any(${named.authorizationIds}::uuid[])
      union select id from cards where pan_fingerprint = any(${named.fingerprints}::text[]))
    select c.id, c.client_id, c.status, c.expires_on::text as expires_on, c.pan_fingerprint,
      exists (select 1 from clients x where x.id = any(cl.lineage) and x.status <> 'ACTIVE') as client_disabled,
      la.balance_cents
    from wanted w
    join cards c on c.id = w.id
    join clients cl on cl.id = c.client_id
    join ledger_accounts la on la.id = c.id
    order by la.id
    for update of la`.execute(tx);
  // What the cards owe, read once they are locked (see lockCard).
  const owed = await owedOf(
    tx,
    result.rows.map((card) => card.id),
  );
  return result.rows.map((card) => ({
    ...card,
    owed_account_id: owed.get(card.id)?.id ?? null,
    owed_cents: owed.get(card.id)?.owed_cents ?? 0n,
  }));
}

export async function authorizationsById(tx: Tx, ids: string[]): Promise<AuthorizationRow[]> {
  if (ids.length === 0) return [];
  const result = await sql<AuthorizationRow>`
    select * from card_authorizations where id = any(${ids}::uuid[])`.execute(tx);
  return result.rows;
}

/** What each card's pending authorizations hold. */
export async function heldByCard(tx: Tx, cardIds: string[]): Promise<Map<string, bigint>> {
  if (cardIds.length === 0) return new Map();
  const result = await sql<{ card_id: string; held: bigint }>`
    select card_id, sum(held_cents)::bigint as held from card_authorizations
    where card_id = any(${cardIds}::uuid[]) and status = 'PENDING' group by card_id`.execute(tx);
  return new Map(result.rows.map((row) => [row.card_id, row.held]));
}

/** Lets go of claims whose lines were refused: as a refused message, they leave nothing. */
export async function releaseClaims(tx: Tx, messageIds: string[]): Promise<void> {
  if (messageIds.length === 0) return;
  await sql`delete from card_network_messages where message_id = any(${messageIds}::text[])`.execute(tx);
}

export async function insertAuthorizations(tx: Tx, rows: NewAuthorization[]): Promise<void> {
  if (rows.length === 0) return;
  await tx
    .insertInto("card_authorizations")
    .values(rows.map((row) => ({ ...row, merchant: JSON.stringify(row.merchant) })))
    .execute();
}

/** Writes the authorizations' holds, clearings and statuses as the chunk left them. */
export async function updateAuthorizations(tx: Tx, rows: AuthorizationRow[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    update card_authorizations a
    set held_cents = v.held, cleared_cents = v.cleared, status = v.status, updated_at = now()
    from unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => String(r.held_cents))}::bigint[],
      ${rows.map((r) => String(r.cleared_cents))}::bigint[], ${rows.map((r) => r.status)}::text[])
      as v(id, held, cleared, status)
    where a.id = v.id`.execute(tx);
}

/**
 * Completes the rows claimMessages wrote, as recordMessage completes one. The records go as one
 * JSON array: as arrays of text, each answer's JSON would be escaped again element by element.
 */
export async function recordMessages(tx: Tx, records: MessageRecord[]): Promise<void> {
  if (records.length === 0) return;
  const rows = records.map((r) => ({
    message_id: r.messageId,
    card_id: r.cardId,
    client_id: r.clientId,
    authorization_id: r.authorizationId,
    amount_cents: r.amountCents === null ? null : String(r.amountCents),
    entry_id: r.entryId,
    file_id: r.fileId,
    merchant: r.merchant ?? null,
    response: r.response,
  }));
  await sql`
    update card_network_messages m
    set card_id = v.card_id, client_id = v.client_id, authorization_id = v.authorization_id,
      amount_cents = v.amount_cents, entry_id = v.entry_id, file_id = v.file_id, merchant = v.merchant,
      response = v.response
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(message_id text, card_id uuid,
      client_id uuid, authorization_id uuid, amount_cents bigint, entry_id uuid, file_id text,
      merchant jsonb, response jsonb)
    where m.message_id = v.message_id`.execute(tx);
}
