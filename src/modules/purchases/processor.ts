import type { Db } from "../../db/database.ts";
import { AuthorizationBatcher } from "./authorization-batcher.ts";
import type { CardMessage, PurchaseSettings } from "./message.ts";
import { type PurchaseCounters, purchaseCounters } from "./metrics.ts";
import { type Processed, processMessage } from "./service.ts";

/**
 * Where a card network message goes: authorizations, the hot path, through the batcher; every
 * other message through processMessage on its own.
 */
export class CardMessages {
  readonly #db: Db;
  readonly settings: PurchaseSettings;
  readonly counters: PurchaseCounters = purchaseCounters();
  readonly #authorizations: AuthorizationBatcher;

  constructor(db: Db, settings: PurchaseSettings) {
    this.#db = db;
    this.settings = settings;
    this.#authorizations = new AuthorizationBatcher(db, settings, (form) =>
      this.counters.batches.inc({ form }),
    );
  }

  async process(message: CardMessage): Promise<Processed> {
    const processed =
      message.type === "AUTHORIZATION"
        ? await this.#authorizations.submit(message)
        : await processMessage(this.#db, message, this.settings);
    // The batcher decides on what it last saw of a card; a message that moved its money otherwise
    // would make its next batch refuse itself and read the card again.
    if (message.type !== "AUTHORIZATION" && processed.cardId)
      this.#authorizations.forgetCard(processed.cardId);
    if (!processed.replayed)
      this.counters.messages.inc({ type: message.type, result: processed.answer.result });
    return processed;
  }
}
