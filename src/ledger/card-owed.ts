import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import type { Queryable, Tx } from "../db/database.ts";
import { postEntry } from "./ledger.ts";

/**
 * What a card owes. A clearing, a force post or an advice cannot be refused, so when the card's
 * balance cannot cover one the rest is posted to the card's CARD_OWED account, which is negative
 * by what the card owes. The card's own account keeps its non-negative CHECK, each entry still
 * balances, and the debt is one ledger balance per card that any report can read.
 */
export async function openOwedAccount(tx: Tx, cardId: string, clientId: string): Promise<string> {
  const inserted = await sql<{ id: string }>`
    insert into ledger_accounts (id, kind, client_id, card_id, allow_negative)
    values (${randomUUID()}::uuid, 'CARD_OWED', ${clientId}::uuid, ${cardId}::uuid, true)
    on conflict (card_id) where kind = 'CARD_OWED' do nothing
    returning id`.execute(tx);
  const row = inserted.rows[0];
  if (row) return row.id;
  const found = await sql<{ id: string }>`
    select id from ledger_accounts where kind = 'CARD_OWED' and card_id = ${cardId}::uuid`.execute(tx);
  const id = found.rows[0]?.id;
  if (!id) throw new Error(`card ${cardId} has no owed account`);
  return id;
}

/** Cards among `cardIds` that owe money and hold some now: the ones `repayOwed` would move. */
export async function cardsToRepay(db: Queryable, cardIds: readonly string[]): Promise<string[]> {
  if (cardIds.length === 0) return [];
  const rows = await sql<{ card_id: string }>`
    select o.card_id from ledger_accounts o join ledger_accounts c on c.id = o.card_id
    where o.kind = 'CARD_OWED' and o.card_id = any(${cardIds}::uuid[]) and o.balance_cents < 0
      and c.balance_cents > 0`.execute(db);
  return rows.rows.map((row) => row.card_id);
}

/**
 * Cards that owe money and hold some now, whatever brought it (a returned transfer out, an incoming
 * payment while its repayment failed): at most `limit`, for the repayment worker's pass.
 */
export async function owingCardsWithMoney(db: Queryable, limit: number): Promise<string[]> {
  const rows = await sql<{ card_id: string }>`
    select o.card_id from ledger_accounts o join ledger_accounts c on c.id = o.card_id
    where o.kind = 'CARD_OWED' and o.balance_cents < 0 and c.balance_cents > 0
    limit ${limit}`.execute(db);
  return rows.rows.map((row) => row.card_id);
}

/**
 * Repays what the card owes from what it holds, as far as it goes, in one entry. The card's row is
 * locked first, as every movement of a card's money locks it, so repayments and purchases of one
 * card apply one at a time. Returns the centavos repaid.
 */
export async function repayOwed(tx: Tx, cardId: string): Promise<bigint> {
  const card = await sql<{ balance_cents: bigint; client_id: string }>`
    select balance_cents, client_id from ledger_accounts where id = ${cardId}::uuid for update`.execute(tx);
  const owed = await sql<{ id: string; balance_cents: bigint }>`
    select id, balance_cents from ledger_accounts
    where kind = 'CARD_OWED' and card_id = ${cardId}::uuid for update`.execute(tx);
  const balance = card.rows[0]?.balance_cents ?? 0n;
  const debt = owed.rows[0] ? -owed.rows[0].balance_cents : 0n;
  const amount = balance < debt ? balance : debt;
  if (amount <= 0n || !owed.rows[0]) return 0n;
  await postEntry(tx, {
    kind: "CARD_DEBT_REPAYMENT",
    description: "Repayment of what the card owed",
    clientId: card.rows[0]?.client_id ?? null,
    postings: [
      { accountId: cardId, amountCents: -amount },
      { accountId: owed.rows[0].id, amountCents: amount },
    ],
  });
  return amount;
}
