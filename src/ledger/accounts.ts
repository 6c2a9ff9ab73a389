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
} as const;

export type SystemAccount = keyof typeof systemAccounts;
