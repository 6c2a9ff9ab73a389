import type { Cents } from "../../ledger/money.ts";

/**
 * The SPEI rail as Emisor sees it (architecture §8). The simulator is the default adapter; an
 * STP-style participant plugs in behind the same interface later. Incoming transfers (abonos) do
 * not come through this port: the rail calls Emisor's signed webhook, POST /v1/rails/spei/incoming.
 */

/** An outgoing order as handed to the rail. */
export interface SpeiOrderMessage {
  /** Clave de rastreo: at most 30 alphanumerics, unique per operation day. */
  trackingKey: string;
  /** YYYY-MM-DD. */
  operationDate: string;
  amountCents: Cents;
  beneficiaryAccount: string;
  /** SPEI account-type code: 40 CLABE, 3 debit card, 10 mobile phone. */
  beneficiaryAccountType: string;
  /** Banxico code of the receiving participant. */
  beneficiaryInstitution: string;
  beneficiaryName: string;
  beneficiaryRfcCurp: string;
  paymentConcept: string;
  numericReference: string;
}

/**
 * The rail's answer to an order. Submitting the same (operationDate, trackingKey) again answers
 * like the first time: the rail deduplicates by tracking key, which is what makes re-sending
 * after a crash safe.
 */
export type SubmitResult =
  | { accepted: true; railReference: string }
  /**
   * Refused outright (never entered SPEI): the order is cancelled and the payer refunded. A refusal
   * of an order the rail accepted before (a re-send) cancels nothing: the order stays ENVIADA.
   */
  | { accepted: false; detail: string };

/** The rail could not be reached or did not answer: retry later (the outcome is unknown). */
export class RailUnavailableError extends Error {
  constructor(message = "rail unavailable") {
    super(message);
    this.name = "RailUnavailableError";
  }
}

/** STP-style state-change callback values (domain-mx §6). */
export type SpeiEstado = "LIQUIDACION" | "DEVOLUCION" | "CANCELACION";

/** A later change of an order's state, delivered asynchronously by the rail. */
export interface SpeiStateChange {
  trackingKey: string;
  operationDate: string;
  estado: SpeiEstado;
  /** Free text from the rail (Detalle). */
  detalle: string;
  /** Banxico return cause (two digits) when estado is DEVOLUCION. */
  causaDevolucion?: string | undefined;
  /** When the order settled (LIQUIDACION). */
  tsLiquidacion?: Date | undefined;
}

export type SpeiStateChangeHandler = (change: SpeiStateChange) => Promise<void>;

export interface SpeiRail {
  submitOrder(order: SpeiOrderMessage): Promise<SubmitResult>;
  /** Registers who applies state changes (one handler per process). */
  onStateChange(handler: SpeiStateChangeHandler): void;
  /** Stops timers and pending deliveries (graceful shutdown). */
  close(): Promise<void>;
}
