import { limits } from "../../limits.ts";
import type { CardRef } from "../cards/card-number.ts";
import { isExpired } from "../cards/expiry.ts";
import type { SpendingCard } from "../cards/repository.ts";
import { BoundedMap } from "../shared/bounded-map.ts";

/**
 * What this process last read of the cards it sends transfers from, so that a transfer from a
 * card seen before reads nothing: its batch checks under lock what the transfer relies on (the
 * card still ACTIVE, the PIN's verification value, no wrong PIN counted, the commission, the
 * balance). What is kept never changes once the card is assigned (owner, account, holder,
 * product), but for the status, the PIN state and the balance, which are only a guess here.
 * Entries are keyed by the caller, so one exists only after a lookup in that caller's scope
 * succeeded. A card whose transfer had to run on its own (refused, or its batch failed for it) is
 * read again until one of its transfers succeeds on its own.
 */
export class KnownCards {
  readonly #cards: BoundedMap<string, SpendingCard>;
  readonly #doubtful: BoundedMap<string, true>;

  constructor(capacity = limits.transferCardMemory) {
    this.#cards = new BoundedMap(capacity);
    this.#doubtful = new BoundedMap(capacity);
  }

  /** The card as last read, when a transfer from it may go straight to a batch. */
  find(callerId: string, ref: CardRef): SpendingCard | undefined {
    const card = this.#cards.get(keyOf(callerId, ref));
    if (card?.status !== "ACTIVE" || isExpired(card.expires_on) || this.#doubtful.has(card.id))
      return undefined;
    return card;
  }

  remember(callerId: string, ref: CardRef, card: SpendingCard): void {
    this.#cards.set(keyOf(callerId, ref), card);
  }

  /** A transfer of the card ran on its own: refused (`ok` false) or made. */
  ranAlone(cardId: string, ok: boolean): void {
    if (ok) this.#doubtful.delete(cardId);
    else this.#doubtful.set(cardId, true);
  }
}

const keyOf = (callerId: string, ref: CardRef) => `${callerId}|${"id" in ref ? ref.id : ref.fingerprint}`;
