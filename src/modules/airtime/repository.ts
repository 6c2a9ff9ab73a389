import type { Insertable, Selectable } from "kysely";
import { sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import type { AirtimeProductsTable, AirtimeTopupStatus, AirtimeTopupsTable } from "../../db/schema.ts";

/** SQL of airtime: the global product catalog and the top-ups. */

const productColumns = ["id", "sku", "carrier", "name", "description", "amount_cents", "status"] as const;

export type AirtimeProductRow = Pick<Selectable<AirtimeProductsTable>, (typeof productColumns)[number]>;

export async function listProducts(db: Queryable): Promise<AirtimeProductRow[]> {
  return db
    .selectFrom("airtime_products")
    .select(productColumns)
    .where("status", "=", "ACTIVE")
    .orderBy("carrier")
    .orderBy("amount_cents")
    .execute();
}

/** A product by its UUID or by its SKU (TELCEL_100, any case). */
export async function findProduct(db: Queryable, idOrSku: string): Promise<AirtimeProductRow | undefined> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrSku);
  return db
    .selectFrom("airtime_products")
    .select(productColumns)
    .where((eb) => (isUuid ? eb("id", "=", idOrSku.toLowerCase()) : eb("sku", "=", idOrSku.toUpperCase())))
    .executeTakeFirst();
}

export type NewTopup = Insertable<AirtimeTopupsTable>;

export type TopupRow = Selectable<AirtimeTopupsTable>;

export async function insertTopup(tx: Tx, row: NewTopup): Promise<void> {
  await tx.insertInto("airtime_topups").values(row).execute();
}

export async function findTopup(db: Queryable, id: string, forUpdate = false): Promise<TopupRow | undefined> {
  const lock = forUpdate ? sql.raw("for update") : sql.raw("");
  const result = await sql<TopupRow>`select * from airtime_topups where id = ${id} ${lock}`.execute(db);
  return result.rows[0];
}

export async function findTopupInScope(
  db: Queryable,
  callerId: string,
  id: string,
): Promise<TopupRow | undefined> {
  const result = await sql<TopupRow>`
    select t.* from airtime_topups t join clients c on c.id = t.client_id
    where t.id = ${id} and ${callerId}::uuid = any(c.lineage)`.execute(db);
  return result.rows[0];
}

/** Moves a PENDING top-up to its final state; false when it was not PENDING any more. */
export async function finishTopup(
  tx: Tx,
  id: string,
  to: Exclude<AirtimeTopupStatus, "PENDING">,
  set: { provider_reference?: string; failure_reason?: string; reversal_entry_id?: string },
): Promise<boolean> {
  const now = new Date();
  const result = await tx
    .updateTable("airtime_topups")
    .set({ ...set, status: to, updated_at: now, ...(to === "COMPLETED" ? { completed_at: now } : {}) })
    .where("id", "=", id)
    .where("status", "=", "PENDING")
    .returning("id")
    .executeTakeFirst();
  return result !== undefined;
}
