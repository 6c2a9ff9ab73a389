import type { Insertable, Selectable } from "kysely";
import { sql } from "kysely";
import type { Queryable } from "../../db/database.ts";
import { type InstantWindow, instantKeysetConditions } from "../../db/keyset.ts";
import type { ClientsTable, ClientTransfersTable } from "../../db/schema.ts";
import { instantKey } from "../../http/cursor.ts";

/** SQL of the clients module. A client's main ledger account has the client's own id. */
export type NewClient = Omit<Insertable<ClientsTable>, "root_id" | "lineage"> & { id: string };

/** A client's own columns, with its main balance. */
export type ClientRow = Pick<
  Selectable<ClientsTable>,
  | "id"
  | "parent_id"
  | "root_id"
  | "code"
  | "name"
  | "alias"
  | "email"
  | "rfc"
  | "status"
  | "timezone"
  | "min_balance_cents"
  | "created_at"
  | "updated_at"
> & { balance_cents: bigint };

/**
 * Inserts a client under `parent` (or as a root), deriving root and lineage from the parent.
 * Returns the generated code. Raises the unique violation clients_root_alias_uq when another
 * client of the same root has the alias.
 */
export async function insertClient(
  db: Queryable,
  client: NewClient,
  parent: { id: string; root_id: string; lineage: string[] } | null,
): Promise<string> {
  const row = await db
    .insertInto("clients")
    .values({
      ...client,
      parent_id: parent?.id ?? null,
      root_id: parent?.root_id ?? client.id,
      lineage: parent ? [...parent.lineage, client.id] : [client.id],
    })
    .returning("code")
    .executeTakeFirstOrThrow();
  return row.code;
}

export async function insertApiKey(
  db: Queryable,
  key: {
    id: string;
    clientId: string;
    key: string;
    name: string;
    alias: string;
    description: string | null;
    passwordHash: string;
  },
): Promise<void> {
  await db
    .insertInto("api_keys")
    .values({
      id: key.id,
      client_id: key.clientId,
      key: key.key,
      name: key.name,
      alias: key.alias,
      description: key.description,
      password_hash: key.passwordHash,
    })
    .execute();
}

/** A client with its main balance, when it is `callerId` itself or one of its descendants. */
export async function findClientInScope(
  db: Queryable,
  callerId: string,
  clientId: string,
): Promise<ClientRow | undefined> {
  return db
    .selectFrom("clients as c")
    .innerJoin("ledger_accounts as a", "a.id", "c.id")
    .select([
      "c.id",
      "c.parent_id",
      "c.root_id",
      "c.code",
      "c.name",
      "c.alias",
      "c.email",
      "c.rfc",
      "c.status",
      "c.timezone",
      "c.min_balance_cents",
      "c.created_at",
      "c.updated_at",
      "a.balance_cents",
    ])
    .where("c.id", "=", clientId)
    .where(sql<boolean>`${callerId}::uuid = any(c.lineage)`)
    .executeTakeFirst();
}

export interface FundingSource {
  id: string;
  root_id: string;
  lineage: string[];
  min_balance_cents: bigint;
  balance_cents: bigint;
}

/**
 * A client with its main balance, the balance row locked until the transaction ends, so that
 * the minimum-balance check and the debit that follows it cannot interleave with another debit.
 */
export async function lockFundingSource(db: Queryable, clientId: string): Promise<FundingSource | undefined> {
  return db
    .selectFrom("clients as c")
    .innerJoin("ledger_accounts as a", "a.id", "c.id")
    .select(["c.id", "c.root_id", "c.lineage", "c.min_balance_cents", "a.balance_cents"])
    .where("c.id", "=", clientId)
    .forUpdate("a")
    .executeTakeFirst();
}

export async function countClients(db: Queryable): Promise<number> {
  const row = await db
    .selectFrom("clients")
    .select((eb) => eb.fn.countAll<bigint>().as("n"))
    .executeTakeFirst();
  return Number(row?.n ?? 0n);
}

/** A client as the read endpoints show it, with its main balance. */
export type ClientListRow = Omit<ClientRow, "root_id" | "timezone" | "updated_at">;

/** The direct sub-clients of `parentId`, oldest first. */
export async function listChildren(
  db: Queryable,
  parentId: string,
  page: { limit: number; offset: number },
): Promise<{ total: number; rows: ClientListRow[] }> {
  const rows = await db
    .selectFrom("clients as c")
    .innerJoin("ledger_accounts as a", "a.id", "c.id")
    .select([
      "c.id",
      "c.parent_id",
      "c.code",
      "c.name",
      "c.alias",
      "c.rfc",
      "c.email",
      "c.status",
      "c.min_balance_cents",
      "c.created_at",
      "a.balance_cents",
    ])
    .where("c.parent_id", "=", parentId)
    .orderBy("c.created_at")
    .orderBy("c.id")
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const count = await db
    .selectFrom("clients")
    .select((eb) => eb.fn.countAll<bigint>().as("n"))
    .where("parent_id", "=", parentId)
    .executeTakeFirstOrThrow();
  return { total: Number(count.n), rows };
}

/**
 * The status of the client aliased `c` as the rest of Emisor sees it: DISABLED when it or any
 * client above it is (disabling a client stops its whole subtree), ACTIVE otherwise.
 */
export const effectiveClientStatus = sql<"ACTIVE" | "DISABLED">`case when exists (
    select 1 from clients x where x.id = any(c.lineage) and x.status <> 'ACTIVE'
  ) then 'DISABLED' else 'ACTIVE' end`;

/** A client's effective status (`effectiveClientStatus`); undefined when there is no such client. */
export async function effectiveStatusOf(
  db: Queryable,
  clientId: string,
): Promise<"ACTIVE" | "DISABLED" | undefined> {
  const row = await db
    .selectFrom("clients as c")
    .select(effectiveClientStatus.as("status"))
    .where("c.id", "=", clientId)
    .executeTakeFirst();
  return row?.status;
}

/** One side of a transfer between clients: its main balance, floor and effective status. */
export interface TransferParty {
  id: string;
  min_balance_cents: bigint;
  balance_cents: bigint;
  status: "ACTIVE" | "DISABLED";
  /** The client and its ancestors (root first). */
  lineage: string[];
}

/**
 * The clients of `ids` that are `callerId` or below it, with their main balances, the balance rows
 * locked until the transaction ends in id order: the order postEntry updates them in, so two
 * transfers between the same two clients in opposite directions wait for each other instead of
 * deadlocking, and the minimum-balance check cannot interleave with another debit.
 */
export async function lockTransferParties(
  db: Queryable,
  callerId: string,
  ids: readonly string[],
): Promise<TransferParty[]> {
  return db
    .selectFrom("clients as c")
    .innerJoin("ledger_accounts as a", "a.id", "c.id")
    .select([
      "c.id",
      "c.lineage",
      "c.min_balance_cents",
      "a.balance_cents",
      effectiveClientStatus.as("status"),
    ])
    .where("c.id", "in", ids)
    .where(sql<boolean>`${callerId}::uuid = any(c.lineage)`)
    .orderBy("c.id")
    .forUpdate("a")
    .execute();
}

export type ClientTransferRow = Selectable<ClientTransfersTable>;

export async function insertClientTransfer(
  db: Queryable,
  transfer: Omit<ClientTransferRow, "created_at">,
): Promise<ClientTransferRow> {
  return db.insertInto("client_transfers").values(transfer).returningAll().executeTakeFirstOrThrow();
}

/** A listed transfer: the ids of clients outside the scope blanked, and its exact place in the listing. */
export type ListedClientTransferRow = Omit<
  ClientTransferRow,
  "from_client_id" | "to_client_id" | "created_by_client_id"
> & {
  from_client_id: string | null;
  to_client_id: string | null;
  created_by_client_id: string | null;
  created_key: string;
};

export interface ClientTransferFilter extends InstantWindow {
  /** Transfers that paid from or into a client of this client's subtree. */
  scopeClientId: string;
  /** Only the transfers this client paid or received. */
  clientId?: string | undefined;
  limit: number;
}

/**
 * Transfers that touched a main balance of the subtree, newest first (created_at, then id), at most
 * `limit`. Each client's transfers are read backwards twice, as payer and as receiver, on the two
 * indexes of migration 0019 with the keyset bound and the limit inside, so a page reads at most
 * `limit` rows per client and side; `union` keeps once a transfer between two clients of the
 * subtree. A side outside the subtree (the parent that took the money back, a sibling) is null:
 * a client sees that its balance moved, never a client it may not see.
 */
export async function listTransfersInScope(
  db: Queryable,
  filter: ClientTransferFilter,
): Promise<ListedClientTransferRow[]> {
  const conditions = instantKeysetConditions("t", filter);
  const client = filter.clientId ? sql`and c.id = ${filter.clientId}` : sql``;
  const side = (column: "from_client_id" | "to_client_id") => sql`
    select t.* from clients c
    cross join lateral (
      select * from client_transfers t
      where ${sql.join([sql`t.${sql.ref(column)} = c.id`, ...conditions], sql` and `)}
      order by t.created_at desc, t.id desc
      limit ${filter.limit}
    ) t
    where ${filter.scopeClientId}::uuid = any(c.lineage) ${client}`;
  const visible = (column: string) =>
    sql`case when exists (
      select 1 from clients x where x.id = t.${sql.ref(column)} and ${filter.scopeClientId}::uuid = any(x.lineage)
    ) then t.${sql.ref(column)} end`;
  const result = await sql<ListedClientTransferRow>`
    select t.id, ${visible("from_client_id")} as from_client_id, ${visible("to_client_id")} as to_client_id,
      ${visible("created_by_client_id")} as created_by_client_id,
      t.amount_cents, t.description, t.created_at, ${instantKey("t.created_at")} as created_key
    from (${side("from_client_id")} union ${side("to_client_id")}) t
    order by t.created_at desc, t.id desc
    limit ${filter.limit}`.execute(db);
  return result.rows;
}
