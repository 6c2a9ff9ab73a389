/**
 * The chart of accounts. Client main balances and card balances are created with their owner;
 * system accounts exist from the first migration, at fixed ids.
 *
 * Sign convention: a posting adds to the account's balance; each entry's postings sum to zero,
 * so all balances together always sum to zero. Money that came from outside (funding, incoming
 * SPEI) shows as a negative balance of its source account; money that left or that Emisor earned
 * shows as a positive balance of SPEI_OUT, COMMISSION_REVENUE, IVA_PAYABLE or AIRTIME_PAYABLE.
 */
export const systemAccounts = {
  /** Source of sandbox and CLI funding (may go negative). */
  sandboxFunding: "00000000-0000-4000-8000-000000000001",
  /** Source of incoming SPEI transfers (may go negative). */
  speiIn: "00000000-0000-4000-8000-000000000002",
  /** Transfers out handed to the SPEI rail. */
  speiOut: "00000000-0000-4000-8000-000000000003",
  commissionRevenue: "00000000-0000-4000-8000-000000000004",
  ivaPayable: "00000000-0000-4000-8000-000000000005",
  airtimePayable: "00000000-0000-4000-8000-000000000006",
  /** Card purchases approved and not yet cleared, released or expired. */
  cardHolds: "00000000-0000-4000-8000-000000000007",
  /** What the issuer owes the card network: clearings less returns (may go negative). */
  cardNetwork: "00000000-0000-4000-8000-000000000008",
} as const;

export type SystemAccount = keyof typeof systemAccounts;

/**
 * System accounts that movements of every client credit at once (each transfer out credits
 * SPEI_OUT, the commission and the IVA) keep their balance in shards: each a ledger account of its
 * own, the account's balance their sum. An entry posts to one shard chosen at random, so
 * concurrent entries rarely wait on the same row; an entry's reversal posts to the shards the
 * entry used. The account's own row is shard 0.
 */
export const systemAccountShards = 16;

const shards: ReadonlyMap<string, readonly string[]> = new Map(
  [
    systemAccounts.speiIn,
    systemAccounts.speiOut,
    systemAccounts.commissionRevenue,
    systemAccounts.ivaPayable,
    systemAccounts.airtimePayable,
    systemAccounts.cardHolds,
    systemAccounts.cardNetwork,
  ].map((id) => {
    const family = id.slice(-3);
    const ids = Array.from({ length: systemAccountShards }, (_, shard) =>
      shard === 0 ? id : `00000000-0000-4000-8${family}-${shard.toString(16).padStart(12, "0")}`,
    );
    return [id, ids];
  }),
);

/** Every shard of `accountId` (shard 0 is the account itself); the account alone if unsharded. */
export function shardsOf(accountId: string): readonly string[] {
  return shards.get(accountId) ?? [accountId];
}

/** The shard an entry posts to: one at random for a sharded account, else the account. */
export function postingShardOf(accountId: string): string {
  const ids = shards.get(accountId);
  return ids?.[Math.floor(Math.random() * ids.length)] ?? accountId;
}

/** System accounts and their shards: the rows locked last, and for the shortest time. */
export const systemAccountIds: ReadonlySet<string> = new Set(Object.values(systemAccounts).flatMap(shardsOf));
