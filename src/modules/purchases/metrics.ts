import { Counter } from "prom-client";

/**
 * Card network messages by type and result, and authorization batches by form: `at_once` (one
 * statement, decided on what the process knew), `reread` (that statement refused itself: a card
 * had changed or a message id was answered already, so the cards were read and the batch written
 * again), `one_by_one` (that failed too, so each message ran on its own). They belong to the process (its context); the app's /metrics registers them.
 */
export interface PurchaseCounters {
  messages: Counter<"type" | "result">;
  batches: Counter<"form">;
}

export function purchaseCounters(): PurchaseCounters {
  return {
    messages: new Counter({
      name: "emisor_card_messages_total",
      help: "Card network messages answered, by type and result (APPROVED, DECLINED, POSTED, RELEASED, ANSWERED); repeats not counted",
      labelNames: ["type", "result"] as const,
      registers: [],
    }),
    batches: new Counter({
      name: "emisor_authorization_batches_total",
      help: "Authorization batches by how they were written: at_once (one statement), reread (written again after reading its cards) or one_by_one (each message on its own)",
      labelNames: ["form"] as const,
      registers: [],
    }),
  };
}
