import type { Db } from "../../db/database.ts";
import type { PinDeps } from "../cards/pin.ts";
import { AuthorizationBatcher } from "./authorization-batcher.ts";
import { answerWhenDecided } from "./decision-recovery.ts";
import { AuthorizationDecisions } from "./decisions.ts";
import { EndpointCache } from "./endpoint-cache.ts";
import type { CardMessage, PurchaseSettings } from "./message.ts";
import { decisionReasonLabel, type PurchaseCounters, purchaseCounters } from "./metrics.ts";
import { storedAnswer } from "./repository.ts";
import { type MessageAnswer, type Processed, processMessage } from "./service.ts";
import { verifyAuthorization } from "./verification.ts";

/**
 * Where a card network message goes: authorizations, the hot path, through the batcher; every
 * other message through processMessage on its own.
 */
export class CardMessages {
  readonly #db: Db;
  readonly #verification: PinDeps;
  readonly settings: PurchaseSettings;
  readonly counters: PurchaseCounters = purchaseCounters();
  readonly #authorizations: AuthorizationBatcher;
  readonly #decisions: AuthorizationDecisions;
  /** Decisions this process is waiting for, by message id: a repeat waits for the same one. */
  readonly #deciding = new Map<string, Promise<Processed>>();

  constructor(deps: PinDeps & { sandbox: boolean }, settings: Omit<PurchaseSettings, "endpoints">) {
    const db = deps.db;
    this.#db = db;
    this.#verification = deps;
    this.settings = { ...settings, endpoints: new EndpointCache(db, deps.keys.vault) };
    this.#decisions = new AuthorizationDecisions(db, {
      sandbox: deps.sandbox,
      calls: this.counters.decisionCalls,
      observeSeconds: (seconds) => this.counters.decisionSeconds.observe(seconds),
    });
    this.#authorizations = new AuthorizationBatcher(db, this.settings, (form) =>
      this.counters.batches.inc({ form }),
    );
  }

  async process(message: CardMessage): Promise<Processed> {
    const processed = await this.#settle(
      message,
      message.type === "AUTHORIZATION"
        ? await this.#authorize(message)
        : await processMessage(this.#db, message, this.settings),
    );
    // The batcher decides on what it last saw of a card; a message that moved its money otherwise
    // would make its next batch refuse itself and read the card again.
    if (message.type !== "AUTHORIZATION" && processed.cardId)
      this.#authorizations.forgetCard(processed.cardId);
    if (!processed.replayed) {
      const { result, decline_reason } = processed.answer;
      this.counters.messages.inc({ type: message.type, result });
      if (message.type === "AUTHORIZATION")
        this.counters.decisions.inc({ result, reason: decisionReasonLabel(decline_reason) });
    }
    return processed;
  }

  /**
   * The answer once the card's client decided: asked now (an approval awaiting it), or waited for
   * (a repeat of a message still being decided, here or in another process).
   */
  async #settle(message: CardMessage, processed: Processed): Promise<Processed> {
    if (processed.undecided) {
      const first = this.#deciding.get(message.messageId);
      if (first) return { ...(await first), replayed: true };
      return { answer: await answerWhenDecided(this.#db, message.messageId), replayed: true };
    }
    const awaiting = processed.awaiting;
    if (!awaiting) return processed;
    const deciding = this.#decisions.decide(awaiting);
    this.#deciding.set(message.messageId, deciding);
    try {
      const decided = await deciding;
      // A decline or a smaller approval gave money back to the card.
      if (decided.answer.amount !== awaiting.answer.amount)
        this.#authorizations.forgetCard(awaiting.authorization.card_id);
      this.#authorizations.rememberAnswer(decided.answer);
      return { ...decided, cardId: awaiting.authorization.card_id };
    } finally {
      this.#deciding.delete(message.messageId);
    }
  }

  /**
   * An authorization that carries a CVV2 or a PIN has them checked first, outside any
   * transaction (a wrong PIN counts towards the card's lock), unless its id was answered already:
   * a repeat answers the first answer and counts nothing again.
   */
  async #authorize(message: CardMessage): Promise<Processed> {
    if (message.cvv2 === undefined && message.pin === undefined) return this.#authorizations.submit(message);
    const stored = await storedAnswer(this.#db, message.messageId);
    if (stored !== undefined && stored !== null) return { answer: stored as MessageAnswer, replayed: true };
    const verification = await verifyAuthorization(this.#verification, message);
    return this.#authorizations.submit({ ...message, verification });
  }
}
