import { Counter, Gauge } from "prom-client";
import type { BatchForm } from "./batcher.ts";

/**
 * The payment batcher's counters, by the form each batch took. They belong to the process (its
 * context), registered in no registry here: the app's /metrics registers them.
 */
export interface PaymentCounters {
  batches: Counter<"form">;
  payments: Counter<"form">;
  sharing: Gauge;
}

export function paymentCounters(): PaymentCounters {
  const labelNames = ["form"] as const;
  return {
    batches: new Counter({
      name: "emisor_payment_batches_total",
      help: "Payment batches by how they were applied: at_once (one statement), under_lock (a transaction deciding each payment), fell_back (sent at once, checks failed, then applied under lock)",
      labelNames,
      registers: [],
    }),
    payments: new Counter({
      name: "emisor_payment_batch_payments_total",
      help: "Payment requests in the batches of emisor_payment_batches_total, by the same form",
      labelNames,
      registers: [],
    }),
    sharing: new Gauge({
      name: "emisor_payment_batcher_sharing",
      help: "1 while this process's payment batches take turns with another writer's on a payer's balance (one batch in flight, gathered), else 0",
      registers: [],
    }),
  };
}

/** What the batcher reports of each batch, counted. */
export function countBatches(
  counters: PaymentCounters,
): (form: BatchForm, size: number, sharing: boolean) => void {
  return (form, size, sharing) => {
    counters.batches.inc({ form });
    counters.payments.inc({ form }, size);
    counters.sharing.set(sharing ? 1 : 0);
  };
}
