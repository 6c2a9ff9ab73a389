import type { Tx } from "../../db/database.ts";
import { openOwedAccount } from "../../ledger/card-owed.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { type EntryInput, type Posting, postEntryOnShards } from "../../ledger/ledger.ts";
import type { CardState } from "./repository.ts";

/**
 * How a purchase moves a card's money. Money in repays what the card owes first; money out that the
 * card cannot cover (a clearing, a force post, an advice: none can be refused) is posted to what it
 * owes. `card` is the locked card's state, kept current here as each entry is written.
 */
export function spendable(card: CardState): bigint {
  const net = card.balance_cents - card.owed_cents;
  return net > 0n ? net : 0n;
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

/** The card's postings for a net change of `delta` centavos: its own account and what it owes. */
async function cardSide(tx: Tx, card: CardState, delta: bigint): Promise<Posting[]> {
  const postings: Posting[] = [];
  if (delta > 0n) {
    const repay = min(delta, card.owed_cents);
    if (repay > 0n && card.owed_account_id)
      postings.push({ accountId: card.owed_account_id, amountCents: repay });
    if (delta - repay > 0n) postings.push({ accountId: card.id, amountCents: delta - repay });
    card.owed_cents -= repay;
    card.balance_cents += delta - repay;
  } else if (delta < 0n) {
    const take = min(card.balance_cents, -delta);
    const short = -delta - take;
    if (take > 0n) postings.push({ accountId: card.id, amountCents: -take });
    if (short > 0n) {
      card.owed_account_id ??= await openOwedAccount(tx, card.id, card.client_id);
      postings.push({ accountId: card.owed_account_id, amountCents: -short });
    }
    card.balance_cents -= take;
    card.owed_cents += short;
  }
  return postings;
}

export interface CardEntry {
  kind: string;
  description: string;
  /**
   * The system accounts' side; it sums to minus the card's net change. Each account is posted to
   * as named: a sharded account's caller names the shard (ledger/accounts.ts postingShardOf).
   */
  system: Posting[];
  metadata: Record<string, unknown>;
}

/**
 * One entry as the ledger takes it: the system postings, and the card's side for the rest (the
 * card's state moves with it). Null when nothing moves. For a caller that writes many at once.
 */
export async function cardEntryInput(
  tx: Tx,
  card: CardState,
  entry: CardEntry,
): Promise<(EntryInput & { id: string }) | null> {
  const system = entry.system.filter((posting) => posting.amountCents !== 0n);
  const delta = -system.reduce((sum, posting) => sum + posting.amountCents, 0n);
  const postings = [...system, ...(await cardSide(tx, card, delta))];
  if (postings.length < 2) return null;
  return {
    id: timeOrderedUuid(),
    kind: entry.kind,
    description: entry.description,
    clientId: card.client_id,
    metadata: entry.metadata,
    postings,
  };
}

/** Writes one entry: the system postings, and the card's side for the rest. Null when nothing moves. */
export async function postCardEntry(tx: Tx, card: CardState, entry: CardEntry): Promise<string | null> {
  const input = await cardEntryInput(tx, card, entry);
  return input ? postEntryOnShards(tx, input) : null;
}
