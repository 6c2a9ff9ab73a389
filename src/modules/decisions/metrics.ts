import { Counter } from "prom-client";

/** What a call to a client's decision endpoint came to: its answer, or why Emisor stood in. */
export type DecisionOutcome = "approved" | "declined" | "timeout" | "error";

export const decisionOutcomes: readonly DecisionOutcome[] = ["approved", "declined", "timeout", "error"];

export type DecisionCallCounter = Counter<"outcome">;

/**
 * Calls to clients' authorization decision endpoints by outcome. It belongs to the process (its
 * context), as the purchase counters do, and the app's /metrics registers it. Every outcome
 * starts at 0, so a rate of timeouts reads 0 rather than nothing before the first one.
 */
export function decisionCallCounter(): DecisionCallCounter {
  const counter = new Counter({
    name: "emisor_authorization_decision_calls_total",
    help: "Calls to clients' authorization decision endpoints by outcome: approved, declined, timeout (stood in, WEBHOOK_TIMEOUT) or error (stood in, WEBHOOK_ERROR)",
    labelNames: ["outcome"] as const,
    registers: [],
  });
  for (const outcome of decisionOutcomes) counter.inc({ outcome }, 0);
  return counter;
}
