import type { Db } from "../../db/database.ts";
import type { PinDeps } from "../cards/pin.ts";
import { AuthorizationBatcher } from "./authorization-batcher.ts";
import type { CardMessage, PurchaseSettings } from "./message.ts";
import { type PurchaseCounters, purchaseCounters } from "./metrics.ts";
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

  constructor(deps: PinDeps, settings: PurchaseSettings) {
    const db = deps.db;
    this.#db = db;
    this.#verification = deps;
    this.settings = settings;
    this.#authorizations = new AuthorizationBatcher(db, settings, (form) =>
      this.counters.batches.inc({ form }),
    );
  }

  async process(message: CardMessage): Promise<Processed> {
    const processed =
      message.type === "AUTHORIZATION"
        ? await this.#authorize(message)
        : await processMessage(this.#db, message, this.settings);
    // The batcher decides on what it last saw of a card; a message that moved its money otherwise
    // would make its next batch refuse itself and read the card again.
    if (message.type !== "AUTHORIZATION" && processed.cardId)
      this.#authorizations.forgetCard(processed.cardId);
    if (!processed.replayed)
      this.counters.messages.inc({ type: message.type, result: processed.answer.result });
    return processed;
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
