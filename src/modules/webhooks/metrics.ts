import { Counter } from "prom-client";

/** What one delivery attempt came to. */
export type AttemptOutcome = "delivered" | "retrying" | "failed";

export type WebhookAttemptCounter = Counter<"outcome">;

/**
 * Webhook delivery attempts by outcome: `delivered` (2xx), `retrying` (refused or unreachable, to
 * be tried again after its backoff), `failed` (its last attempt failed: the delivery is FAILED).
 * It belongs to the process (its context) and the app's /metrics registers it; every outcome
 * starts at 0.
 */
export function webhookAttemptCounter(): WebhookAttemptCounter {
  const counter = new Counter({
    name: "emisor_webhook_delivery_attempts_total",
    help: "Webhook delivery attempts by outcome: delivered (2xx), retrying (failed, tried again later), failed (the last attempt failed; the delivery is FAILED)",
    labelNames: ["outcome"] as const,
    registers: [],
  });
  for (const outcome of ["delivered", "retrying", "failed"] as const) counter.inc({ outcome }, 0);
  return counter;
}
