import type { Queryable } from "../../db/database.ts";
import { limits } from "../../limits.ts";
import { BoundedMap } from "../shared/bounded-map.ts";
import type { CardRef } from "./card-number.ts";
import { type CardRecord, findCardInScope } from "./repository.ts";

/**
 * What the payment path reads about a card (owner, account, reference, last four, type) never
 * changes once the card is assigned, and the card's status is re-read under lock when the money
 * moves. So a resolved card is cached per process, keyed by the caller (tenancy is part of the key:
 * an entry exists only after a scoped lookup succeeded for that caller). `status` in a cached
 * record may be stale and must not be trusted.
 */
export type CachedCard = Omit<CardRecord, "status" | "pin_hash" | "pin_failed_attempts" | "pin_locked"> & {
  status: CardRecord["status"];
};

export class CardCache {
  readonly #entries: BoundedMap<string, CachedCard>;

  constructor(capacity = limits.cardCacheEntries) {
    this.#entries = new BoundedMap(capacity);
  }

  async find(db: Queryable, callerId: string, ref: CardRef): Promise<CachedCard | undefined> {
    const key = `${callerId}|${"id" in ref ? ref.id : ref.fingerprint}`;
    const cached = this.#entries.get(key);
    if (cached) return cached;
    const card = await findCardInScope(db, callerId, ref);
    if (!card) return undefined;
    const { pin_hash: _hash, pin_failed_attempts: _attempts, pin_locked: _locked, ...immutable } = card;
    this.#entries.set(key, immutable);
    return immutable;
  }
}
