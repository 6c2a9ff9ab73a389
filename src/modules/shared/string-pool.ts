/**
 * One copy of each repeated value a per-process memory keeps. Every row read from the database
 * brings its own copy of each string, so 10,000 cards of one client hold its id 10,000 times;
 * a memory that keeps its entries for minutes holds them through every collection, and the
 * collector's work grows with what is live. The pool itself forgets everything once it holds
 * `capacity` values: a value is then pooled afresh, and nothing else changes.
 */
export class StringPool {
  readonly #strings = new Map<string, string>();
  readonly #lists = new Map<string, readonly string[]>();
  readonly #capacity: number;

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** The pool's copy of `value`. */
  string<T extends string | null>(value: T): T {
    if (value === null) return value;
    const pooled = this.#strings.get(value);
    if (pooled !== undefined) return pooled as T;
    if (this.#strings.size >= this.#capacity) this.#strings.clear();
    this.#strings.set(value, value);
    return value;
  }

  /** The pool's copy of a list of strings, frozen: every holder shares it. */
  list(values: readonly string[]): readonly string[] {
    const key = JSON.stringify(values);
    const pooled = this.#lists.get(key);
    if (pooled !== undefined) return pooled;
    if (this.#lists.size >= this.#capacity) this.#lists.clear();
    const list = Object.freeze(values.map((value) => this.string(value)));
    this.#lists.set(key, list);
    return list;
  }
}
