import { type Insertable, type Selectable, sql } from "kysely";
import type { Queryable } from "../../db/database.ts";
import type { CardholdersTable } from "../../db/schema.ts";
import { type AccountCardJson, accountRowsJson } from "../cards/repository.ts";
import { addressColumns } from "../shared/address.ts";

/** SQL of the cardholders module. */
export type NewCardholder = Insertable<CardholdersTable>;

/** A cardholder row, birthdate as YYYY-MM-DD text and incomes as bigint centavos. */
export type CardholderRow = Omit<Selectable<CardholdersTable>, "birthdate" | "created_at" | "updated_at"> & {
  birthdate: string;
};

// A date column read as a Date would shift with the process time zone; text does not.
const columns = [
  "id",
  "client_id",
  "first_name",
  "second_name",
  "third_name",
  "surname",
  "second_surname",
  "work_area",
  "rfc",
  "curp",
  "email",
  "primary_phone",
  "mobile_phone",
  ...addressColumns,
  "country",
  sql<string>`to_char(birthdate, 'YYYY-MM-DD')`.as("birthdate"),
  "gender",
  "marital_status",
  "has_kids",
  "gross_monthly_income_cents",
  "net_monthly_income_cents",
  "observations",
  "external_id",
] as const;

/**
 * Inserts a cardholder. Uniqueness of rfc, curp, email (ignoring case) and mobile_phone is the
 * database's: a duplicate raises a unique violation naming cardholders_<field>_uq.
 */
export async function insertCardholder(db: Queryable, cardholder: NewCardholder): Promise<CardholderRow> {
  return db.insertInto("cardholders").values(cardholder).returning(columns).executeTakeFirstOrThrow();
}

export interface CardholderFilter {
  id?: string | undefined;
  rfc?: string | undefined;
  curp?: string | undefined;
  email?: string | undefined;
  primary_phone?: string | undefined;
  mobile_phone?: string | undefined;
}

export type FoundCardholderRow = CardholderRow & { account_rows: AccountCardJson[] };

/**
 * Cardholders of `callerId` or its descendants matching every given filter, oldest first, at
 * most `limit` (the caller asks for two to tell one match from several).
 */
export async function findCardholders(
  db: Queryable,
  callerId: string,
  filter: CardholderFilter,
  limit: number,
): Promise<FoundCardholderRow[]> {
  let query = db
    .selectFrom("cardholders as h")
    .select(columns)
    .select(accountRowsJson("h.id").as("account_rows"))
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom("clients as c")
          .select(sql`1`.as("one"))
          .whereRef("c.id", "=", "h.client_id")
          .where(sql<boolean>`${callerId}::uuid = any(c.lineage)`),
      ),
    );
  if (filter.id !== undefined) query = query.where("h.id", "=", filter.id);
  if (filter.rfc !== undefined) query = query.where("h.rfc", "=", filter.rfc);
  if (filter.curp !== undefined) query = query.where("h.curp", "=", filter.curp);
  // lower() on both sides: the same function as the unique index, so the index serves the lookup.
  if (filter.email !== undefined) query = query.where(sql<boolean>`lower(h.email) = lower(${filter.email})`);
  if (filter.primary_phone !== undefined) query = query.where("h.primary_phone", "=", filter.primary_phone);
  if (filter.mobile_phone !== undefined) query = query.where("h.mobile_phone", "=", filter.mobile_phone);
  return query.orderBy("h.created_at").orderBy("h.id").limit(limit).execute();
}

/**
 * Many lookups by id in one statement, each with its own caller's scope (the cardholder's client
 * is the caller or a descendant of it). Answers, in the order asked, each lookup's cardholder or
 * undefined.
 */
export async function findCardholdersByIds(
  db: Queryable,
  lookups: ReadonlyArray<{ callerId: string; id: string }>,
): Promise<Array<FoundCardholderRow | undefined>> {
  const asked = sql<{ id: string; caller: string; ord: string }>`(select
      unnest(${lookups.map((l) => l.id)}::uuid[]) as id,
      unnest(${lookups.map((l) => l.callerId)}::uuid[]) as caller,
      generate_series(1, ${lookups.length}::int) as ord)`.as("v");
  const rows = await db
    .selectFrom(asked)
    .innerJoin("cardholders as h", "h.id", "v.id")
    .select(
      columns.map((column) => (typeof column === "string" ? sql.ref(`h.${column}`).as(column) : column)),
    )
    .select(accountRowsJson("h.id").as("account_rows"))
    .select("v.ord")
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom("clients as c")
          .select(sql`1`.as("one"))
          .whereRef("c.id", "=", "h.client_id")
          .where(sql<boolean>`v.caller = any(c.lineage)`),
      ),
    )
    .execute();
  const found: Array<FoundCardholderRow | undefined> = lookups.map(() => undefined);
  for (const { ord, ...row } of rows as unknown as Array<FoundCardholderRow & { ord: number }>)
    found[Number(ord) - 1] = row;
  return found;
}
