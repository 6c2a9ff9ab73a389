import type { Insertable, Selectable } from "kysely";
import { type Expression, type SqlBool, sql } from "kysely";
import type { Queryable } from "../../db/database.ts";
import type { ProductsTable } from "../../db/schema.ts";
import { mexicoCityToday } from "../../domain/spei.ts";

export type ProductRow = Selectable<ProductsTable> & { stock_cards: bigint };

/** Visible to a client: products it created, or that were assigned to it. */
function visibleTo(callerId: string): Expression<SqlBool> {
  return sql<SqlBool>`(p.owner_client_id = ${callerId}
    or exists (select 1 from product_clients pc where pc.product_id = p.id and pc.client_id = ${callerId}))`;
}

function selectProducts(db: Queryable) {
  return db
    .selectFrom("products as p")
    .selectAll("p")
    .select(
      // Expired cards in stock cannot be assigned: they are not stock.
      sql<bigint>`(select count(*) from cards c where c.product_id = p.id and c.status = 'NOT_ASSIGNED'
        and c.expires_on >= ${mexicoCityToday()}::date)`.as("stock_cards"),
    );
}

export async function insertProduct(db: Queryable, product: Insertable<ProductsTable>): Promise<void> {
  await db.insertInto("products").values(product).execute();
}

export async function findVisibleProduct(
  db: Queryable,
  callerId: string,
  id: string,
): Promise<ProductRow | undefined> {
  return selectProducts(db).where("p.id", "=", id).where(visibleTo(callerId)).executeTakeFirst();
}

export async function listVisibleProducts(
  db: Queryable,
  callerId: string,
  page: { limit: number; offset: number },
): Promise<{ total: number; rows: ProductRow[] }> {
  const rows = await selectProducts(db)
    .where(visibleTo(callerId))
    .orderBy("p.created_at")
    .orderBy("p.id")
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const count = await db
    .selectFrom("products as p")
    .select((eb) => eb.fn.countAll<bigint>().as("n"))
    .where(visibleTo(callerId))
    .executeTakeFirstOrThrow();
  return { total: Number(count.n), rows };
}

/** Assigns a product to a client; assigning it again changes nothing. */
export async function assignProduct(db: Queryable, productId: string, clientId: string, byClientId: string) {
  await db
    .insertInto("product_clients")
    .values({ product_id: productId, client_id: clientId, assigned_by_client_id: byClientId })
    .onConflict((oc) => oc.columns(["product_id", "client_id"]).doNothing())
    .execute();
}

/**
 * Whether a cardholder of `clientId` may be registered without RFC or CURP: when an ACTIVE
 * product created by or assigned to that client or one of its ancestors allows it.
 */
export async function blankIdentityAllowance(
  db: Queryable,
  clientId: string,
): Promise<{ rfc: boolean; curp: boolean }> {
  const row = await sql<{ rfc: boolean | null; curp: boolean | null }>`
    select bool_or(p.allow_blank_rfc) as rfc, bool_or(p.allow_blank_curp) as curp
    from clients c
    join products p on p.status = 'ACTIVE' and (
      p.owner_client_id = any(c.lineage)
      or exists (select 1 from product_clients pc where pc.product_id = p.id and pc.client_id = any(c.lineage)))
    where c.id = ${clientId}`.execute(db);
  return { rfc: row.rows[0]?.rfc ?? false, curp: row.rows[0]?.curp ?? false };
}
