import type { Cents } from "../../ledger/money.ts";

/**
 * An airtime (tiempo aire) provider as Emisor sees it. The simulator is the default adapter; a
 * real aggregator plugs in behind the same interface.
 */
export interface AirtimeTopupRequest {
  /** Emisor's top-up id: the provider deduplicates by it, so re-sending after a crash is safe. */
  id: string;
  sku: string;
  carrier: string;
  phoneNumber: string;
  amountCents: Cents;
}

export type AirtimeResult =
  | { status: "COMPLETED"; reference: string }
  /** The provider refused or failed the top-up; nothing was delivered. */
  | { status: "FAILED"; reason: string; retryable: boolean };

/** The provider could not be reached or did not answer: the outcome is unknown, ask again later. */
export class AirtimeProviderUnavailableError extends Error {
  constructor(message = "airtime provider unavailable") {
    super(message);
    this.name = "AirtimeProviderUnavailableError";
  }
}

export interface AirtimeProvider {
  topup(request: AirtimeTopupRequest): Promise<AirtimeResult>;
  close(): Promise<void>;
}
