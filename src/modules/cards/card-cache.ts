import type { Queryable } from "../../db/database.ts";
import { limits } from "../../limits.ts";
import { BoundedMap } from "../shared/bounded-map.ts";
import { StringPool } from "../shared/string-pool.ts";
import type { CardRef } from "./card-number.ts";
import { type CardRecord, findCardInScope } from "./repository.ts";

/**
 * What the payment path reads about a card (owner, account, reference, last four, type, expiry) never
 * changes once the card is assigned, and the card's status is re-read under lock when the money
 * moves. So a resolved card is cached per process, keyed by the caller (tenancy is part of the key:
 * an entry exists only after a scoped lookup succeeded for that caller). `status` in a cached
 * record may be stale and must not be trusted.
 */
export type CachedCard = Pick<
  CardRecord,
  | "id"
  | "status"
  | "last_four"
  | "expires_on"
  | "client_id"
  | "account_id"
  | "account_reference"
  | "card_type"
>;

export class CardCache {
  readonly #entries: BoundedMap<string, CachedCard>;
  /** The cards' clients, statuses, expiries and types, one copy of each. */
  readonly #pool: StringPool;

  constructor(capacity = limits.cardCacheEntries) {
    this.#entries = new BoundedMap(capacity);
    this.#pool = new StringPool(capacity);
  }

  async find(db: Queryable, callerId: string, ref: CardRef): Promise<CachedCard | undefined> {
    const key = `${callerId}|${"id" in ref ? ref.id : ref.fingerprint}`;
    const cached = this.#entries.get(key);
    if (cached) return cached;
    const card = await findCardInScope(db, callerId, ref);
    if (!card) return undefined;
    // Only what a payment reads: about half the memory of the whole record.
    const immutable: CachedCard = {
      id: card.id,
      status: this.#pool.string(card.status),
      last_four: card.last_four,
      expires_on: this.#pool.string(card.expires_on),
      client_id: this.#pool.string(card.client_id),
      account_id: card.account_id,
      account_reference: card.account_reference,
      card_type: this.#pool.string(card.card_type),
    };
    this.#entries.set(key, immutable);
    return immutable;
  }
}
