/**
 * A Map that forgets its oldest entry once it holds `capacity` of them (a Map iterates in
 * insertion order), for per-process memories that must not grow with the number of cards or
 * clients ever seen.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  readonly #capacity: number;

  constructor(capacity: number) {
    super();
    this.#capacity = capacity;
  }

  override set(key: K, value: V): this {
    if (!this.has(key) && this.size >= this.#capacity) {
      const oldest = this.keys().next();
      if (!oldest.done) this.delete(oldest.value);
    }
    return super.set(key, value);
  }
}
