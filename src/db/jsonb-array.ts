import { type RawBuilder, sql } from "kysely";

/** Between two documents of `jsonbArray`'s text, and standing for a null one: JSON text holds neither raw. */
const documentSeparator = "\u001f";
const nullDocument = "\u001e";

/**
 * JSON documents (or nulls) as a jsonb[] expression (json[] with `type` "json"), sent as ONE text
 * that PostgreSQL splits: an array literal would escape every quote of every document, and a
 * document holds many. JSON.stringify writes control characters escaped, so the two separators
 * never occur in its text; a document that holds one anyway (not written by JSON.stringify) goes
 * as an array.
 */
export function jsonbArray(
  documents: ReadonlyArray<string | null>,
  type: "jsonb" | "json" = "jsonb",
): RawBuilder<unknown> {
  const arrayType = sql.raw(`${type}[]`);
  if (
    documents.some((doc) => doc !== null && (doc.includes(documentSeparator) || doc.includes(nullDocument)))
  )
    return sql`${documents}::${arrayType}`;
  const text = documents.map((doc) => doc ?? nullDocument).join(documentSeparator);
  return sql`string_to_array(${text}::text, E'\\x1f', E'\\x1e')::${arrayType}`;
}
