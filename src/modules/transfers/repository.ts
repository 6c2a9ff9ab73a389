import type { Insertable, Selectable, Updateable } from "kysely";
import { sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import { type InstantWindow, instantKeysetConditions } from "../../db/keyset.ts";
import type {
  CollectionAccountsTable,
  SpeiOrderStatus,
  SpeiOrdersTable,
  TransferOperationsTable,
} from "../../db/schema.ts";
import { instantKey } from "../../http/cursor.ts";
import { effectiveClientStatus } from "../clients/repository.ts";
import type { DayCount, Position } from "./pagination.ts";

/** SQL of SPEI: collection accounts, incoming transfers and their day counters, outgoing orders. */

export type CollectionAccountRow = Selectable<CollectionAccountsTable>;

export async function nextCollectionAccountNumber(tx: Queryable): Promise<bigint> {
  const result = await sql<{ n: bigint }>`select nextval('collection_account_number_seq') as n`.execute(tx);
  const n = result.rows[0]?.n;
  if (n === undefined) throw new Error("the collection account sequence answered nothing");
  return BigInt(n);
}

export async function insertCollectionAccount(
  tx: Queryable,
  account: { id: string; clientId: string; clabe: string },
): Promise<void> {
  await tx
    .insertInto("collection_accounts")
    .values({ id: account.id, client_id: account.clientId, clabe: account.clabe })
    .execute();
}

export async function listCollectionAccountsOf(
  db: Queryable,
  clientId: string,
): Promise<CollectionAccountRow[]> {
  return db
    .selectFrom("collection_accounts")
    .select(["id", "client_id", "clabe", "status", "created_at"])
    .where("client_id", "=", clientId)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
}

/** The account that owns a CLABE, with its client's name and status (incoming transfers). */
export async function findCollectionAccountByClabe(db: Queryable, clabe: string) {
  return db
    .selectFrom("collection_accounts as a")
    .innerJoin("clients as c", "c.id", "a.client_id")
    .select([
      "a.id",
      "a.client_id",
      "a.clabe",
      "a.status",
      effectiveClientStatus.as("client_status"),
      "c.name as client_name",
    ])
    .where("a.clabe", "=", clabe)
    .executeTakeFirst();
}

/** The account with this CLABE when its client is the caller or one of its descendants. */
export async function findCollectionAccountInScope(db: Queryable, callerId: string, clabe: string) {
  return db
    .selectFrom("collection_accounts as a")
    .innerJoin("clients as c", "c.id", "a.client_id")
    .select(["a.id", "a.client_id", "a.clabe", "c.name", "c.alias"])
    .where("a.clabe", "=", clabe)
    .where(sql<boolean>`${callerId}::uuid = any(c.lineage)`)
    .executeTakeFirst();
}

// ---- incoming transfers ----

export type NewTransferOperation = Insertable<TransferOperationsTable>;

const operationColumnNames = [
  "id",
  "transfer_id",
  "fecha_operacion",
  "day_seq",
  "institucion_ordenante",
  "institucion_beneficiaria",
  "clave_rastreo",
  "monto_cents",
  "nombre_beneficiario",
  "tipo_cuenta_beneficiario",
  "cuenta_beneficiario",
  "rfc_curp_beneficiario",
  "concepto_pago",
  "referencia_numerica",
  "nombre_ordenante",
  "cuenta_ordenante",
  "rfc_curp_ordenante",
  "cambio_estado_detalle",
  "cambio_estado_causa_devolucion",
  "cambio_estado_estado",
  "email_beneficiario",
  "transfer_commission_cents",
  "commission_charged_cents",
  "iva_charged_cents",
  "ts_liquidacion",
  "created_at",
] as const;

/** A 2.8 record as read: `fecha_operacion` stays the `YYYY-MM-DD` text the database holds. */
export type TransferOperationRow = Omit<
  Pick<Selectable<TransferOperationsTable>, (typeof operationColumnNames)[number]>,
  "fecha_operacion"
> & { fecha_operacion: string };

/** The record's columns of table alias `o` (dates as text: no time-zone shift). */
const operationColumns = sql.raw(
  operationColumnNames
    .map((name) => (name === "fecha_operacion" ? "o.fecha_operacion::text as fecha_operacion" : `o.${name}`))
    .join(", "),
);

/**
 * Counts one more transfer for (account, day) and returns its position in the day. The counter
 * row stays locked until commit, so positions within a day are dense and never repeat.
 */
export async function bumpDayCounter(tx: Tx, accountId: string, fecha: string): Promise<bigint> {
  const result = await sql<{ operations: bigint }>`
    insert into transfer_operation_days (collection_account_id, fecha_operacion, operations)
    values (${accountId}, ${fecha}::date, 1)
    on conflict (collection_account_id, fecha_operacion)
    do update set operations = transfer_operation_days.operations + 1
    returning operations`.execute(tx);
  const operations = result.rows[0]?.operations;
  if (operations === undefined) throw new Error("day counter upsert returned nothing");
  return BigInt(operations);
}

/** Inserts the record; false when an abono with the same key exists already. */
export async function insertTransferOperation(tx: Tx, row: NewTransferOperation): Promise<boolean> {
  const inserted = await tx
    .insertInto("transfer_operations")
    .values(row)
    .onConflict((oc) => oc.constraint("transfer_operations_abono_uq").doNothing())
    .returning("id")
    .executeTakeFirst();
  return inserted !== undefined;
}

/** The stored abono with this key (fecha de operación, sender, clave de rastreo), with its CLABE. */
export async function findAbono(
  db: Queryable,
  key: { fecha: string; institucionOrdenante: string; spellings: string[] },
): Promise<(TransferOperationRow & { clabe: string }) | undefined> {
  const result = await sql<TransferOperationRow & { clabe: string }>`
    select ${operationColumns}, a.clabe
    from transfer_operations o join collection_accounts a on a.id = o.collection_account_id
    where o.fecha_operacion = ${key.fecha}::date and o.institucion_ordenante = ${key.institucionOrdenante}
      and o.clave_rastreo = any(${key.spellings}::text[])
    order by o.clave_rastreo = ${key.spellings[0]} desc
    limit 1`.execute(db);
  return result.rows[0];
}

/** Transfers per day of the range, newest day first (at most the range's days rows). */
export async function dayCounts(
  db: Queryable,
  accountId: string,
  initDate: string,
  endDate: string,
): Promise<DayCount[]> {
  const result = await sql<{ fecha: string; operations: bigint }>`
    select fecha_operacion::text as fecha, operations from transfer_operation_days
    where collection_account_id = ${accountId}
      and fecha_operacion between ${initDate}::date and ${endDate}::date
    order by fecha_operacion desc`.execute(db);
  return result.rows.map((row) => ({ fecha: row.fecha, operations: BigInt(row.operations) }));
}

/**
 * Up to `limit` transfers newest first, starting at `from` (inclusive) or strictly after it
 * (exclusive, for a cursor), not older than `initDate`. One backward range scan of
 * transfer_operations_page_idx: its cost does not depend on how deep `from` is.
 */
export async function operationsFrom(
  db: Queryable,
  accountId: string,
  bounds: { initDate: string; endDate: string },
  from: Position,
  inclusive: boolean,
  limit: number,
): Promise<TransferOperationRow[]> {
  const comparison = inclusive ? sql.raw("<=") : sql.raw("<");
  const result = await sql<TransferOperationRow>`
    select ${operationColumns} from transfer_operations o
    where o.collection_account_id = ${accountId}
      and (o.fecha_operacion, o.day_seq) ${comparison} (${from.fecha}::date, ${from.seq}::bigint)
      and o.fecha_operacion between ${bounds.initDate}::date and ${bounds.endDate}::date
    order by o.fecha_operacion desc, o.day_seq desc
    limit ${limit}`.execute(db);
  return result.rows;
}

// ---- outgoing orders ----

export type NewSpeiOrder = Insertable<SpeiOrdersTable>;
/** A new order as Emisor writes it: made at a known instant. */
export type NewSpeiOrderRow = NewSpeiOrder & { created_at: Date; updated_at: Date };

/** An order as read: its operation date as `YYYY-MM-DD` text, as the rail and the API write it. */
export type SpeiOrderRow = Omit<Selectable<SpeiOrdersTable>, "operation_date"> & { operation_date: string };

export const orderColumns = sql.raw(`o.id, o.client_id, o.payer_account_id, o.card_id, o.tracking_key,
  o.operation_date::text as operation_date, o.amount_cents, o.commission_cents, o.iva_cents,
  o.beneficiary_account, o.beneficiary_card_sealed, o.beneficiary_account_type, o.beneficiary_institution, o.beneficiary_name,
  o.beneficiary_rfc_curp, o.beneficiary_email, o.payment_concept, o.numeric_reference, o.status,
  o.rail_reference, o.state_detail, o.return_cause, o.entry_id, o.reversal_entry_id, o.sent_at,
  o.settled_at, o.returned_at, o.created_at, o.updated_at`);

/** Inserts the order and answers it; undefined when its tracking key is taken that day (pick another). */
export async function insertSpeiOrder(tx: Tx, order: NewSpeiOrder): Promise<SpeiOrderRow | undefined> {
  const insert = tx
    .insertInto("spei_orders")
    .values(order)
    .onConflict((oc) => oc.constraint("spei_orders_tracking_uq").doNothing())
    .returningAll();
  const result = await sql<SpeiOrderRow>`with o as (${insert}) select ${orderColumns} from o`.execute(tx);
  return result.rows[0];
}

export async function findOrderById(db: Queryable, id: string): Promise<SpeiOrderRow | undefined> {
  const result =
    await sql<SpeiOrderRow>`select ${orderColumns} from spei_orders o where o.id = ${id}`.execute(db);
  return result.rows[0];
}

/** The order when its client is the caller or a descendant; locked when `forUpdate`. */
export async function findOrderInScope(
  db: Queryable,
  callerId: string,
  id: string,
  forUpdate = false,
): Promise<SpeiOrderRow | undefined> {
  const lock = forUpdate ? sql.raw("for update of o") : sql.raw("");
  const result = await sql<SpeiOrderRow>`
    select ${orderColumns} from spei_orders o join clients c on c.id = o.client_id
    where o.id = ${id} and ${callerId}::uuid = any(c.lineage) ${lock}`.execute(db);
  return result.rows[0];
}

/** The order a rail callback names, locked for the state change. */
export async function lockOrderByTrackingKey(
  tx: Tx,
  operationDate: string,
  trackingKey: string,
): Promise<SpeiOrderRow | undefined> {
  const result = await sql<SpeiOrderRow>`
    select ${orderColumns} from spei_orders o
    where o.operation_date = ${operationDate}::date and o.tracking_key = ${trackingKey}
    for update`.execute(tx);
  return result.rows[0];
}

/** Moves an order from one of `from` to `to` with the given columns; the row after, or undefined. */
export async function transitionOrder(
  tx: Tx,
  id: string,
  from: SpeiOrderStatus[],
  to: SpeiOrderStatus,
  set: Pick<
    Updateable<SpeiOrdersTable>,
    | "rail_reference"
    | "state_detail"
    | "return_cause"
    | "reversal_entry_id"
    | "sent_at"
    | "settled_at"
    | "returned_at"
  >,
): Promise<boolean> {
  const result = await tx
    .updateTable("spei_orders")
    .set({ ...set, status: to, updated_at: new Date() })
    .where("id", "=", id)
    .where("status", "in", from)
    .returning("id")
    .executeTakeFirst();
  return result !== undefined;
}

export interface OrderListFilter extends InstantWindow {
  /** Orders of clients in this client's subtree (itself and its descendants). */
  scopeClientId: string;
  /** Only this client's own orders. */
  clientId?: string | undefined;
  cardId?: string | undefined;
  statuses?: readonly SpeiOrderStatus[] | undefined;
  limit: number;
}

/** An order and its exact place in the listing: created_at to the microsecond, as UTC text. */
export type ListedOrderRow = SpeiOrderRow & { created_key: string };

/**
 * Orders of the subtree, newest first (created_at, then id), at most `limit`. Each client's
 * orders are read backwards on spei_orders_client_idx (client_id, created_at, id) with the
 * keyset bound and the limit inside, so a page reads at most `limit` orders per client of the
 * subtree, however many are older; the client that pays them all reads `limit` rows.
 */
export async function listOrdersInScope(db: Queryable, filter: OrderListFilter): Promise<ListedOrderRow[]> {
  const conditions = [sql`o.client_id = c.id`, ...instantKeysetConditions("o", filter)];
  if (filter.cardId) conditions.push(sql`o.card_id = ${filter.cardId}`);
  if (filter.statuses && filter.statuses.length > 0)
    conditions.push(sql`o.status in (${sql.join([...filter.statuses])})`);
  const client = filter.clientId ? sql`and c.id = ${filter.clientId}` : sql``;
  const result = await sql<ListedOrderRow>`
    select ${orderColumns},
      ${instantKey("o.created_at")} as created_key
    from clients c
    cross join lateral (
      select * from spei_orders o
      where ${sql.join(conditions, sql` and `)}
      order by o.created_at desc, o.id desc
      limit ${filter.limit}
    ) o
    where ${filter.scopeClientId}::uuid = any(c.lineage) ${client}
    order by o.created_at desc, o.id desc
    limit ${filter.limit}`.execute(db);
  return result.rows;
}
