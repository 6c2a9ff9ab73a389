import { sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import { instantKeysetConditions } from "../../db/keyset.ts";
import { instantKey } from "../../http/cursor.ts";
import type { SpendingRow } from "../purchases/spending.ts";
import { type Control, type ControlScope, type ControlType, ruleOf, storedRule } from "./rules.ts";

/** SQL of spending controls, their generation, and the cards they reach. */
export interface ControlRow {
  id: string;
  owner_client_id: string;
  scope: ControlScope;
  target_id: string;
  type: ControlType;
  rule: Record<string, unknown>;
  description: string | null;
  created_at: Date;
  updated_at: Date;
}

export function controlOf(row: ControlRow): Control {
  return {
    id: row.id,
    ownerClientId: row.owner_client_id,
    scope: row.scope,
    targetId: row.target_id,
    rule: ruleOf(row.type, row.rule),
  };
}

/** Every change of a control bumps the generation, in its own transaction (migration 0027). */
export async function bumpGeneration(tx: Tx): Promise<void> {
  await sql`update spending_control_generation set generation = generation + 1`.execute(tx);
}

/** Serialises the changes of one target's controls (the bound on how many it may have). */
export async function lockTarget(tx: Tx, targetId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`spending_controls:${targetId}`}, 0))`.execute(
    tx,
  );
}

export async function countOnTarget(tx: Tx, targetId: string): Promise<number> {
  const result = await sql<{ n: number }>`
    select count(*)::integer as n from spending_controls where target_id = ${targetId}::uuid`.execute(tx);
  return result.rows[0]?.n ?? 0;
}

export async function insertControl(
  tx: Tx,
  row: Omit<ControlRow, "created_at" | "updated_at" | "rule"> & { control: Control },
): Promise<ControlRow> {
  const result = await sql<ControlRow>`
    insert into spending_controls (id, owner_client_id, scope, target_id, type, rule, description)
    values (${row.id}::uuid, ${row.owner_client_id}::uuid, ${row.scope}, ${row.target_id}::uuid, ${row.type},
      ${JSON.stringify(storedRule(row.control.rule))}::jsonb, ${row.description})
    returning *`.execute(tx);
  const inserted = result.rows[0];
  if (!inserted) throw new Error("a spending control was not inserted");
  return inserted;
}

export async function updateControl(
  tx: Tx,
  id: string,
  change: { control: Control; description: string | null },
): Promise<ControlRow | undefined> {
  const result = await sql<ControlRow>`
    update spending_controls set rule = ${JSON.stringify(storedRule(change.control.rule))}::jsonb,
      description = ${change.description}, updated_at = now()
    where id = ${id}::uuid returning *`.execute(tx);
  return result.rows[0];
}

export async function deleteControl(tx: Tx, id: string): Promise<boolean> {
  const result = await sql`delete from spending_controls where id = ${id}::uuid returning id`.execute(tx);
  return result.rows.length === 1;
}

/** A control the caller may read and change: set by the caller or one of its sub-clients. */
export async function findControlInScope(
  db: Queryable,
  callerId: string,
  id: string,
  forUpdate = false,
): Promise<ControlRow | undefined> {
  const result = await sql<ControlRow>`
    select s.* from spending_controls s join clients o on o.id = s.owner_client_id
    where s.id = ${id}::uuid and ${callerId}::uuid = any(o.lineage)
    ${forUpdate ? sql`for update of s` : sql``}`.execute(db);
  return result.rows[0];
}

/** The controls the caller or its sub-clients set, newest first, below the keyset `before`. */
export async function listControlsInScope(
  db: Queryable,
  callerId: string,
  filter: { scope?: string | undefined; targetId?: string | undefined },
  page: { limit: number; before?: { at: string; id: string } | undefined },
): Promise<Array<ControlRow & { created_at_text: string }>> {
  const conditions = [
    sql`${callerId}::uuid = any(o.lineage)`,
    ...(filter.scope ? [sql`s.scope = ${filter.scope}`] : []),
    ...(filter.targetId ? [sql`s.target_id = ${filter.targetId}::uuid`] : []),
    ...instantKeysetConditions("s", { before: page.before }),
  ];
  const result = await sql<ControlRow & { created_at_text: string }>`
    select s.*, ${instantKey("s.created_at")} as created_at_text
    from spending_controls s join clients o on o.id = s.owner_client_id
    where ${sql.join(conditions, sql` and `)}
    order by s.created_at desc, s.id desc limit ${page.limit}`.execute(db);
  return result.rows;
}

/**
 * The controls set on any of `targetIds`, with the generation they were read at (one statement,
 * so the controls are those of that generation).
 */
export async function controlsOnTargets(
  db: Queryable,
  targetIds: string[],
): Promise<{ generation: bigint; rows: ControlRow[] }> {
  const result = await sql<{ generation: string; controls: ControlRow[] | null }>`
    select g.generation::text as generation,
      (select json_agg(s) from spending_controls s where s.target_id = any(${targetIds}::uuid[])) as controls
    from spending_control_generation g`.execute(db);
  const row = result.rows[0];
  return { generation: BigInt(row?.generation ?? "0"), rows: (row?.controls ?? []).map(parsedRow) };
}

/** A row from json_agg: its timestamps come back as text. */
function parsedRow(row: ControlRow): ControlRow {
  return { ...row, created_at: new Date(row.created_at), updated_at: new Date(row.updated_at) };
}

/** What a card is to its controls: its own id, its cardholder, its product, its clients. */
export interface CardTargets {
  id: string;
  cardholder_id: string | null;
  product_id: string;
  /** The card's client's lineage, the root first. */
  lineage: readonly string[];
}

export function targetsOf(card: CardTargets): string[] {
  return [card.id, card.product_id, ...(card.cardholder_id ? [card.cardholder_id] : []), ...card.lineage];
}

/**
 * The controls among `rows` that apply to `card`: set on the card, its cardholder, its product or
 * one of its clients, by one of its clients (so a product's control reaches only its owner's tree).
 */
export function controlsOfCard(card: CardTargets, controls: readonly Control[]): Control[] {
  const lineage = new Set(card.lineage);
  const reaches: Record<ControlScope, (targetId: string) => boolean> = {
    CARD: (targetId) => targetId === card.id,
    CARDHOLDER: (targetId) => targetId === card.cardholder_id,
    PRODUCT: (targetId) => targetId === card.product_id,
    CLIENT: (targetId) => lineage.has(targetId),
  };
  return controls.filter(
    (control) => lineage.has(control.ownerClientId) && reaches[control.scope](control.targetId),
  );
}

/** A card of the caller's subtree as its controls see it, with what it spent. */
export async function cardTargetsInScope(
  db: Queryable,
  callerId: string,
  cardId: string,
): Promise<(CardTargets & { spending: SpendingRow | null }) | undefined> {
  const result = await sql<CardTargets & { spending: SpendingRow | null }>`
    select c.id, c.cardholder_id, c.product_id, cl.lineage, to_jsonb(s) as spending
    from cards c join clients cl on cl.id = c.client_id
    left join card_spending s on s.card_id = c.id
    where c.id = ${cardId}::uuid and ${callerId}::uuid = any(cl.lineage)`.execute(db);
  return result.rows[0];
}
