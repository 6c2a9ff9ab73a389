import { Counter, Histogram } from "prom-client";
import { type DecisionCallCounter, decisionCallCounter } from "../decisions/metrics.ts";
import { declineReasons } from "./authorize.ts";

let knownReasons: ReadonlySet<string> | undefined;

/**
 * The reason label of a decided authorization: Emisor's own reasons as they are, none for an
 * approval. A client's decision endpoint may answer any reason of its own (^[A-Z0-9_]{1,32}$),
 * which as labels would make series without bound: those count as CLIENT_DECLINED.
 */
export function decisionReasonLabel(reason: string | null): string {
  if (reason === null) return "none";
  knownReasons ??= new Set<string>(declineReasons);
  return knownReasons.has(reason) ? reason : "CLIENT_DECLINED";
}

/**
 * Card network messages by type and result, authorizations decided by result and reason, authorization batches by form: `at_once` (one
 * statement, decided on what the process knew), `reread` (that statement refused itself: a card
 * had changed or a message id was answered already, so the cards were read and the batch written
 * again), `one_by_one` (that failed too, so each message ran on its own); and the calls to clients'
 * decision endpoints, by outcome and by how long each took. They belong to the process (its
 * context); the app's /metrics registers them.
 */
export interface PurchaseCounters {
  messages: Counter<"type" | "result">;
  decisions: Counter<"result" | "reason">;
  batches: Counter<"form">;
  decisionCalls: DecisionCallCounter;
  decisionSeconds: Histogram;
}

export function purchaseCounters(): PurchaseCounters {
  return {
    messages: new Counter({
      name: "emisor_card_messages_total",
      help: "Card network messages answered, by type and result (APPROVED, DECLINED, POSTED, RELEASED, ANSWERED); repeats not counted",
      labelNames: ["type", "result"] as const,
      registers: [],
    }),
    decisions: new Counter({
      name: "emisor_authorization_decisions_total",
      help: "Authorizations decided, by result (APPROVED, DECLINED) and decline reason (none when approved; a client's own reason counts as CLIENT_DECLINED); repeats not counted",
      labelNames: ["result", "reason"] as const,
      registers: [],
    }),
    batches: new Counter({
      name: "emisor_authorization_batches_total",
      help: "Authorization batches by how they were written: at_once (one statement), reread (written again after reading its cards) or one_by_one (each message on its own)",
      labelNames: ["form"] as const,
      registers: [],
    }),
    decisionCalls: decisionCallCounter(),
    decisionSeconds: new Histogram({
      name: "emisor_authorization_decision_call_seconds",
      help: "How long each call to a client's authorization decision endpoint took, stand-ins included",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3],
      registers: [],
    }),
  };
}
