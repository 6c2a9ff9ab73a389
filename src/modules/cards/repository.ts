import { sql } from "kysely";
import type { Db, Queryable } from "../../db/database.ts";
import { instantKeysetConditions } from "../../db/keyset.ts";
import type { CardStatus, CardType } from "../../db/schema.ts";
import { mexicoCityToday } from "../../domain/spei.ts";
import { instantKey } from "../../http/cursor.ts";
import { heldByCard, owedByCard } from "../purchases/repository.ts";
import { addressColumns } from "../shared/address.ts";
import type { CardRef } from "./card-number.ts";

/** SQL of the cards module: one card with what its operations need, always scoped to a caller. */
export interface CardRecord {
  id: string;
  status: CardStatus;
  last_four: string;
  expires_on: string;
  client_id: string;
  cardholder_id: string;
  account_id: string;
  account_reference: string;
  product_id: string;
  product_code: string;
  product_name: string;
  card_type: CardType;
  transfer_commission_cents: bigint;
  assigned_at: Date;
  activated_at: Date | null;
  canceled_at: Date | null;
  status_reason: string | null;
  pin_hash: string | null;
  pin_failed_attempts: number;
  pin_locked: boolean;
}

/**
 * The card named by `ref` when it is assigned to a client in the caller's subtree. `lock` takes
 * the card row FOR UPDATE (status changes, PIN checks) so concurrent changes apply one at a time.
 */
export async function findCardInScope(
  db: Queryable,
  callerId: string,
  ref: CardRef,
  options: { lock?: boolean } = {},
): Promise<CardRecord | undefined> {
  const result = await sql<CardRecord>`
    select ${cardColumns}
    from cards c
    join accounts a on a.id = c.account_id
    join products p on p.id = c.product_id
    join clients cl on cl.id = c.client_id
    where ${cardWhere(ref)} and ${callerId}::uuid = any(cl.lineage)
    ${options.lock ? sql`for update of c` : sql``}`.execute(db);
  return result.rows[0];
}

const cardColumns = sql`c.id, c.status, c.last_four, c.expires_on::text as expires_on, c.client_id,
  c.cardholder_id, c.account_id, a.reference as account_reference, p.id as product_id,
  p.code as product_code, p.name as product_name, p.card_type, p.transfer_commission_cents,
  c.assigned_at, c.activated_at, c.canceled_at, c.status_reason, c.pin_hash, c.pin_failed_attempts,
  c.pin_locked`;

const cardWhere = (ref: CardRef) =>
  "id" in ref ? sql`c.id = ${ref.id}` : sql`c.pan_fingerprint = ${ref.fingerprint}`;

/** A card about to spend, as `findCardInScope` reads it, with its balance and holder. */
export interface SpendingCard extends CardRecord {
  balance_cents: bigint;
  rfc: string | null;
  curp: string | null;
  primary_phone: string | null;
  mobile_phone: string | null;
  observations: string;
}

/** The card named by `ref` in the caller's subtree, with what a spending answers of it. */
export async function findSpendingCard(
  db: Queryable,
  callerId: string,
  ref: CardRef,
): Promise<SpendingCard | undefined> {
  const result = await sql<SpendingCard>`
    select ${cardColumns}, la.balance_cents, h.rfc, h.curp, h.primary_phone, h.mobile_phone, a.observations
    from cards c
    join accounts a on a.id = c.account_id
    join products p on p.id = c.product_id
    join clients cl on cl.id = c.client_id
    join ledger_accounts la on la.id = c.id
    left join cardholders h on h.id = c.cardholder_id
    where ${cardWhere(ref)} and ${callerId}::uuid = any(cl.lineage)`.execute(db);
  return result.rows[0];
}

export async function recordStatusChange(
  db: Queryable,
  change: {
    cardId: string;
    from: string;
    to: string;
    reason: string | null;
    latitude: number | null;
    longitude: number | null;
    apiKeyId: string | null;
  },
): Promise<void> {
  await db
    .insertInto("card_status_history")
    .values({
      card_id: change.cardId,
      from_status: change.from,
      to_status: change.to,
      reason: change.reason,
      latitude: change.latitude,
      longitude: change.longitude,
      api_key_id: change.apiKeyId,
    })
    .execute();
}

export interface AccountWithCards {
  id: string;
  account_number: bigint;
  creation_date: Date;
  activation_date: Date | null;
  assigned_by: string;
  status: string;
  document_type: string;
  document_number: string;
  cards: Array<{
    id: string;
    last_four: string;
    assignation_date: Date;
    status: string;
    assigned_by: { id: string; alias: string; name: string; description: string };
  }>;
}

/**
 * A cardholder's accounts with their cards (contract 2.4 and 2.5), oldest first, as one JSON
 * column of the statement that reads the cardholder (`cardholderRef` names its id column): a
 * lookup is one round trip. `groupAccounts` turns the column into accounts.
 */
export function accountRowsJson(cardholderRef: string) {
  return sql<AccountCardJson[]>`(
    select coalesce(json_agg(json_build_object(
        'id', a.id, 'account_number', a.account_number::text, 'created_at', a.created_at,
        'activation_date', a.activation_date, 'assigned_by_api_key_id', a.assigned_by_api_key_id,
        'status', a.status, 'document_type', a.document_type, 'document_number', a.document_number,
        'card_id', c.id, 'last_four', c.last_four, 'assigned_at', coalesce(c.assigned_at, c.created_at),
        'card_status', c.status, 'alias', k.alias, 'name', k.name, 'description', k.description)
        order by a.created_at, c.assigned_at), '[]')
    from accounts a
    join cards c on c.account_id = a.id
    join api_keys k on k.id = a.assigned_by_api_key_id
    where a.cardholder_id = ${sql.ref(cardholderRef)})`;
}

/** One account-and-card pair as `accountRowsJson` gives it (timestamps as JSON text). */
export interface AccountCardJson {
  id: string;
  account_number: string;
  created_at: string;
  activation_date: string | null;
  assigned_by_api_key_id: string;
  status: string;
  document_type: string;
  document_number: string;
  card_id: string;
  last_four: string;
  assigned_at: string;
  card_status: string;
  alias: string;
  name: string;
  description: string | null;
}

export function groupAccounts(rows: AccountCardJson[]): AccountWithCards[] {
  const accounts = new Map<string, AccountWithCards>();
  for (const row of rows) {
    let account = accounts.get(row.id);
    if (!account) {
      account = {
        id: row.id,
        account_number: BigInt(row.account_number),
        creation_date: new Date(row.created_at),
        activation_date: row.activation_date === null ? null : new Date(row.activation_date),
        assigned_by: row.assigned_by_api_key_id,
        status: row.status,
        document_type: row.document_type,
        document_number: row.document_number,
        cards: [],
      };
      accounts.set(row.id, account);
    }
    account.cards.push({
      id: row.card_id,
      last_four: row.last_four,
      assignation_date: new Date(row.assigned_at),
      status: row.card_status,
      assigned_by: {
        id: row.assigned_by_api_key_id,
        alias: row.alias,
        name: row.name,
        description: row.description ?? "",
      },
    });
  }
  return [...accounts.values()];
}

export interface MovementRow {
  id: bigint;
  entry_id: string;
  amount_cents: bigint;
  created_at: Date;
  kind: string;
  description: string | null;
}

/**
 * A page of a card's postings, newest first, and how many it has, in one repeatable-read snapshot
 * (so the count and the rows agree). `before` (a cursor's posting id) reads strictly older rows
 * through the (account_id, id) index; without it the page starts `offset` rows in.
 */
export async function listMovements(
  db: Db,
  cardId: string,
  page: { limit: number; offset: number; before?: bigint | undefined },
): Promise<{ total: number; rows: MovementRow[] }> {
  return db
    .transaction()
    .setIsolationLevel("repeatable read")
    .execute(async (tx) => {
      let query = tx
        .selectFrom("postings as p")
        .innerJoin("journal_entries as e", "e.id", "p.entry_id")
        .select(["p.id", "p.entry_id", "p.amount_cents", "p.created_at", "e.kind", "e.description"])
        .where("p.account_id", "=", cardId)
        .orderBy("p.id", "desc")
        .limit(page.limit);
      query = page.before === undefined ? query.offset(page.offset) : query.where("p.id", "<", page.before);
      const rows = await query.execute();
      const count = await tx
        .selectFrom("postings")
        .select((eb) => eb.fn.countAll<bigint>().as("n"))
        .where("account_id", "=", cardId)
        .executeTakeFirstOrThrow();
      return { total: Number(count.n), rows };
    });
}

export interface CardholderForAssignment {
  id: string;
  client_id: string;
  first_name: string;
  second_name: string | null;
  surname: string;
  second_surname: string | null;
  rfc: string | null;
  curp: string | null;
  address: Record<string, string | null>;
}

/** A cardholder of the caller's subtree, with its address (B2B delivery). */
export async function findCardholderInScope(
  db: Queryable,
  callerId: string,
  cardholderId: string,
): Promise<CardholderForAssignment | undefined> {
  const row = await db
    .selectFrom("cardholders as h")
    .innerJoin("clients as cl", "cl.id", "h.client_id")
    .select([
      "h.id",
      "h.client_id",
      "h.first_name",
      "h.second_name",
      "h.surname",
      "h.second_surname",
      "h.rfc",
      "h.curp",
      "h.street",
      "h.ext_street_number",
      "h.int_street_number",
      "h.suburb",
      "h.township",
      "h.city",
      "h.state",
      "h.postal_code",
    ])
    .where("h.id", "=", cardholderId)
    .where(sql<boolean>`${callerId}::uuid = any(cl.lineage)`)
    .executeTakeFirst();
  if (!row) return undefined;
  const {
    street,
    ext_street_number,
    int_street_number,
    suburb,
    township,
    city,
    state,
    postal_code,
    ...rest
  } = row;
  return {
    ...rest,
    address: { street, ext_street_number, int_street_number, suburb, township, city, state, postal_code },
  };
}

/** A client's address (B2C delivery), or undefined when it has none on file. */
export async function findClientAddress(
  db: Queryable,
  clientId: string,
): Promise<Record<string, string | null> | undefined> {
  const row = await db
    .selectFrom("clients")
    .select(addressColumns)
    .where("id", "=", clientId)
    .executeTakeFirst();
  if (!row?.street || !row.postal_code || !row.state) return undefined;
  return row;
}

/**
 * Takes the oldest unassigned card of a product. Concurrent callers skip each other's card; when
 * every card left is held by another transaction, it waits for them instead of answering empty:
 * a holder may roll back (a duplicate of an idempotent request does, once it finds its key
 * taken), and "no stock" is a final answer. Waiting, PostgreSQL checks each card again once its
 * holder is done and moves on to the next when it was taken.
 */
export async function takeStockCard(
  db: Queryable,
  productId: string,
): Promise<{ id: string; last_four: string } | undefined> {
  const take = (skipLocked: boolean) =>
    sql<{ id: string; last_four: string }>`
    select id, last_four from cards
    where product_id = ${productId} and status = 'NOT_ASSIGNED' and expires_on >= ${mexicoCityToday()}::date
    order by created_at
    limit 1
    for update ${skipLocked ? sql`skip locked` : sql``}`.execute(db);
  return (await take(true)).rows[0] ?? (await take(false)).rows[0];
}

/** One card of a listing: the fields of a card summary, with its product, account and balance. */
export type CardListRow = Pick<
  CardRecord,
  | "id"
  | "status"
  | "card_type"
  | "last_four"
  | "expires_on"
  | "client_id"
  | "cardholder_id"
  | "account_id"
  | "account_reference"
  | "product_id"
  | "product_code"
  | "product_name"
  | "assigned_at"
  | "activated_at"
> & {
  balance_cents: bigint;
  held_cents: bigint;
  owed_cents: bigint;
  /** assigned_at to the microsecond (UTC, ISO 8601): a cursor's exact position. */
  assigned_at_text: string;
};

export interface CardListFilter {
  statuses?: readonly CardStatus[] | undefined;
  cardholderId?: string | undefined;
  productId?: string | undefined;
  clientId?: string | undefined;
  /** Only cards strictly after this position in the order (assigned_at, id) descending. */
  before?: { at: string; id: string } | undefined;
  limit: number;
}

/**
 * The assigned cards of the caller's subtree (stock has no client and is never listed), newest
 * assignment first, the id breaking ties, through cards_client_assigned_idx (migration 0017).
 */
export async function listCardsInScope(
  db: Queryable,
  callerId: string,
  filter: CardListFilter,
): Promise<CardListRow[]> {
  const clients = [sql`${callerId}::uuid = any(cl.lineage)`];
  if (filter.clientId) clients.push(sql`cl.id = ${filter.clientId}`);
  const cards = [
    sql`c.client_id = cl.id`,
    ...instantKeysetConditions("c", { before: filter.before }, "assigned_at"),
  ];
  if (filter.statuses) cards.push(sql`c.status in (${sql.join(filter.statuses)})`);
  if (filter.cardholderId) cards.push(sql`c.cardholder_id = ${filter.cardholderId}`);
  if (filter.productId) cards.push(sql`c.product_id = ${filter.productId}`);
  // Each client of the subtree gives its newest `limit` cards (one ordered index range each), and
  // the page is the newest `limit` of those: the cost follows the subtree's clients and the page
  // size, not how many cards the subtree (or the whole database) holds.
  const result = await sql<CardListRow>`
    select c.id, c.status, p.card_type, c.last_four, c.expires_on::text as expires_on, c.client_id,
      c.cardholder_id, c.account_id, a.reference as account_reference, p.id as product_id,
      p.code as product_code, p.name as product_name, la.balance_cents, c.assigned_at,
      ${instantKey("c.assigned_at")} as assigned_at_text,
      ${heldByCard(sql.ref("c.id"))} as held_cents, ${owedByCard(sql.ref("c.id"))} as owed_cents,
      c.activated_at
    from (
      select c.* from clients cl
      cross join lateral (
        select c.* from cards c
        where ${sql.join(cards, sql` and `)}
        order by c.assigned_at desc, c.id desc
        limit ${filter.limit}
      ) c
      where ${sql.join(clients, sql` and `)}
      order by c.assigned_at desc, c.id desc
      limit ${filter.limit}
    ) c
    join accounts a on a.id = c.account_id
    join products p on p.id = c.product_id
    join ledger_accounts la on la.id = c.id
    order by c.assigned_at desc, c.id desc`.execute(db);
  return result.rows;
}

/**
 * A product the caller's subtree knows: one a client of the subtree created or has available, or
 * one a card of the subtree is of (an ancestor's product assigned to the subtree's cardholder).
 * Anything else is not found to this caller.
 */
export async function productSeenBySubtree(db: Queryable, callerId: string, productId: string) {
  const result = await sql<{ id: string }>`
    select p.id from products p
    where p.id = ${productId} and (
      exists (select 1 from clients cl where cl.id = p.owner_client_id and ${callerId}::uuid = any(cl.lineage))
      or exists (select 1 from product_clients pc join clients cl on cl.id = pc.client_id
        where pc.product_id = p.id and ${callerId}::uuid = any(cl.lineage))
      or exists (select 1 from cards c join clients cl on cl.id = c.client_id
        where c.product_id = p.id and ${callerId}::uuid = any(cl.lineage)))`.execute(db);
  return result.rows.length > 0;
}

/** A card's money in one read: its balance, what its pending authorizations hold, what it owes. */
export async function cardMoney(db: Queryable, cardId: string) {
  const result = await sql<{ balance_cents: bigint; held_cents: bigint; owed_cents: bigint }>`
    select la.balance_cents, ${heldByCard(sql.ref("la.id"))} as held_cents,
      ${owedByCard(sql.ref("la.id"))} as owed_cents
    from ledger_accounts la where la.id = ${cardId}::uuid`.execute(db);
  const row = result.rows[0];
  if (!row) throw new Error(`card ${cardId} has no ledger account`);
  return row;
}
