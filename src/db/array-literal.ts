import { type RawBuilder, sql } from "kysely";

/**
 * Array parameters written as PostgreSQL array literals here rather than by node-postgres, which
 * builds each literal by concatenation and runs two regular-expression replaces over every
 * element. The text is the one node-postgres writes: every element quoted, `\` and `"` escaped,
 * null as NULL. JSON documents go as `jsonbArray` instead: escaping their many quotes is most of
 * what a batch statement's parameters would allocate, and the collector's work grows with it.
 *
 * Only flat arrays of strings, numbers, bigints and booleans are written here; any other element
 * (a nested array, a Buffer, a Date, an object) leaves the array to node-postgres.
 */
export function arrayLiteral(values: readonly unknown[]): string | undefined {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null || value === undefined) parts[i] = "NULL";
    else if (typeof value === "string") parts[i] = quoted(value);
    else if (typeof value === "number" || typeof value === "bigint" || typeof value === "boolean")
      parts[i] = `"${String(value)}"`;
    else return undefined;
  }
  return `{${parts.join(",")}}`;
}

const needsEscape = /["\\]/;

function quoted(text: string): string {
  return needsEscape.test(text) ? `"${text.replace(/["\\]/g, "\\$&")}"` : `"${text}"`;
}

/** The statement's values with each array that `arrayLiteral` writes replaced by its literal. */
export function withArrayLiterals(values: ReadonlyArray<unknown>): unknown[] {
  let out: unknown[] | undefined;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (!Array.isArray(value)) continue;
    const literal = arrayLiteral(value);
    if (literal === undefined) continue;
    out ??= [...values];
    out[i] = literal;
  }
  return out ?? (values as unknown[]);
}

/** Between two documents of `jsonbArray`'s text, and standing for a null one: JSON text holds neither raw. */
const documentSeparator = "\u001f";
const nullDocument = "\u001e";

/**
 * JSON documents (or nulls) as a jsonb[] expression, sent as ONE text that PostgreSQL splits:
 * an array literal would escape every quote of every document, and a document holds many.
 * JSON.stringify writes control characters escaped, so the two separators never occur in its
 * text; a document that holds one anyway (not written by JSON.stringify) goes as an array.
 */
export function jsonbArray(documents: ReadonlyArray<string | null>): RawBuilder<unknown> {
  if (
    documents.some((doc) => doc !== null && (doc.includes(documentSeparator) || doc.includes(nullDocument)))
  )
    return sql`${documents}::jsonb[]`;
  const text = documents.map((doc) => doc ?? nullDocument).join(documentSeparator);
  return sql`string_to_array(${text}::text, E'\\x1f', E'\\x1e')::jsonb[]`;
}
