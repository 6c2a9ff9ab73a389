import { BatchQueue, type Queued } from "../../db/batch-queue.ts";
import type { Db } from "../../db/database.ts";
import { batchWroteNothing } from "../../db/failures.ts";
import { limits } from "../../limits.ts";
import { type DecisionResult, requestDecision } from "../decisions/call.ts";
import type { DecisionCallCounter } from "../decisions/metrics.ts";
import type { EffectiveEndpoint } from "../decisions/service.ts";
import type * as batchRepo from "./batch-repository.ts";
import * as finish from "./decision-repository.ts";
import type { CardMessage } from "./message.ts";
import type { AuthorizationRow } from "./repository.ts";
import type { MessageAnswer, Processed } from "./service.ts";

/**
 * The client's real-time decision on an authorization Emisor approved: the hold is taken (and its
 * message row written with no answer yet), then the client's endpoint is called, outside any
 * transaction and holding no connection, and its answer (or its stand-in) is recorded: an
 * approval as it stands (batched, one statement), a smaller approval or a decline in a
 * transaction of its own that releases what the client did not approve. The network is answered
 * once that is recorded. A process that dies meanwhile leaves the authorization AWAITING: the
 * recovery pass applies the stand-in once its decision can no longer arrive.
 */
export interface AwaitingDecision {
  authorization: AuthorizationRow;
  messageId: string;
  cardholderId: string | null;
  endpoint: EffectiveEndpoint;
  /** The approval as planned, to answer if the client approves it as it stands. */
  answer: MessageAnswer;
}

export function awaitingOf(
  message: CardMessage,
  card: batchRepo.BatchCard,
  authorization: AuthorizationRow,
  answer: MessageAnswer,
  endpoint: EffectiveEndpoint,
): AwaitingDecision {
  return { authorization, messageId: message.messageId, cardholderId: card.cardholder_id, endpoint, answer };
}

/** What the client decided, as recorded: its own answer, or its stand-in's. */
export type Decided =
  | {
      kind: "APPROVE";
      amountCents: bigint;
      decision: "ANSWERED" | "STOOD_IN";
      metadata: Record<string, string>;
    }
  | { kind: "DECLINE"; reason: string; decision: "ANSWERED" | "STOOD_IN"; metadata: Record<string, string> };

/** A call's result as the authorization records it; a stand-in applies the endpoint's setting. */
export function decidedOf(awaiting: AwaitingDecision, result: DecisionResult): Decided {
  const approved = awaiting.authorization.held_cents;
  if (result.kind === "APPROVE")
    return {
      kind: "APPROVE",
      amountCents: result.amountCents ?? approved,
      decision: "ANSWERED",
      metadata: { ...result.metadata },
    };
  if (result.kind === "DECLINE")
    return { kind: "DECLINE", reason: result.reason, decision: "ANSWERED", metadata: { ...result.metadata } };
  return standInOf(awaiting.endpoint.standIn, approved, result.reason, result.detail);
}

export function standInOf(
  standIn: "APPROVE" | "DECLINE",
  approved: bigint,
  reason: "WEBHOOK_TIMEOUT" | "WEBHOOK_ERROR",
  detail: string,
): Decided {
  const metadata = { stand_in_reason: reason, detail };
  return standIn === "APPROVE"
    ? { kind: "APPROVE", amountCents: approved, decision: "STOOD_IN", metadata }
    : { kind: "DECLINE", reason, decision: "STOOD_IN", metadata };
}

interface Approval {
  awaiting: AwaitingDecision;
  decided: Extract<Decided, { kind: "APPROVE" }>;
}

export class AuthorizationDecisions {
  readonly #db: Db;
  readonly #options: { sandbox: boolean; calls?: DecisionCallCounter; observeSeconds?: (s: number) => void };
  readonly #approvals: BatchQueue<Approval, MessageAnswer>;

  constructor(
    db: Db,
    options: { sandbox: boolean; calls?: DecisionCallCounter; observeSeconds?: (s: number) => void },
  ) {
    this.#db = db;
    this.#options = options;
    this.#approvals = new BatchQueue(limits.authorizationBatchMax, (batch) => this.#recordApprovals(batch));
  }

  /** Asks the client, then records what it decided; the answer the network gets. */
  async decide(awaiting: AwaitingDecision): Promise<Processed> {
    const a = awaiting.authorization;
    const result = await requestDecision(
      awaiting.endpoint,
      {
        authorizationId: a.id,
        cardId: a.card_id,
        clientId: a.client_id,
        cardholderId: awaiting.cardholderId,
        amountCents: a.held_cents,
        currency: a.currency,
        merchantAmount: a.merchant_amount,
        merchant: a.merchant as never,
        channel: a.channel,
        partialAllowed: a.partial_allowed,
        createdAt: a.created_at,
      },
      this.#options,
    );
    return { answer: await this.record(awaiting, decidedOf(awaiting, result)), replayed: false };
  }

  /** Records a decision: an approval as it stands in a batch, anything else in a transaction. */
  async record(awaiting: AwaitingDecision, decided: Decided): Promise<MessageAnswer> {
    if (decided.kind === "APPROVE" && decided.amountCents === awaiting.authorization.held_cents)
      return this.#approvals.submit({ awaiting, decided });
    return finish.finishDecision(this.#db, awaiting.authorization.id, awaiting.messageId, decided);
  }

  async #recordApprovals(batch: Queued<Approval, MessageAnswer>[]): Promise<void> {
    try {
      await finish.recordApprovals(
        this.#db,
        batch.map((queued) => queued.item),
      );
      for (const queued of batch) queued.resolve(queued.item.awaiting.answer);
    } catch (error) {
      if (!batchWroteNothing(error)) throw error;
      // One was recorded meanwhile (the recovery's stand-in): each on its own finds out which.
      for (const queued of batch) {
        const { awaiting, decided } = queued.item;
        queued.resolve(
          await finish.finishDecision(this.#db, awaiting.authorization.id, awaiting.messageId, decided),
        );
      }
    }
  }
}
