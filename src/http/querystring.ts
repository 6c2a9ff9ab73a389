/**
 * The query string parser. Fastify's default (fast-querystring) keeps a part it cannot decode as
 * written: `?email=%FF` was looked up as the three characters "%FF", and `%C3%28` the same, so a
 * caller who sent bytes that are not UTF-8 got an empty answer instead of being told. Here every
 * key and value is decoded strictly (`decodeURIComponent`: UTF-8, no lone surrogates); a part that
 * is not is marked on the result (`malformedQueryPart`), and the auth hook refuses the request
 * with 1000 (the router cannot answer an error itself).
 */
const malformed = Symbol("malformed query part");

type Query = Record<string, string | string[]> & { [malformed]?: string };

function decode(part: string): string {
  const spaced = part.includes("+") ? part.replaceAll("+", " ") : part;
  return spaced.includes("%") ? decodeURIComponent(spaced) : spaced;
}

/** `a=1&a=2&b` → { a: ["1", "2"], b: "" }, as fast-querystring answers for well-formed input. */
export function parseQuery(input: string): Query {
  const result: Query = Object.create(null);
  if (input.length === 0) return result;
  for (const pair of input.split("&")) {
    if (pair.length === 0) continue;
    const equals = pair.indexOf("=");
    const rawKey = equals === -1 ? pair : pair.slice(0, equals);
    let key: string;
    let value: string;
    try {
      key = decode(rawKey);
      value = equals === -1 ? "" : decode(pair.slice(equals + 1));
    } catch {
      result[malformed] ??= rawKey.slice(0, 64);
      continue;
    }
    if (key.length === 0 && equals === -1) continue;
    const current = result[key];
    if (current === undefined) result[key] = value;
    else if (Array.isArray(current)) current.push(value);
    else result[key] = [current, value];
  }
  return result;
}

/** The query part that was not valid percent-encoded UTF-8, if any (raw, at most 64 characters). */
export function malformedQueryPart(query: unknown): string | undefined {
  return typeof query === "object" && query !== null ? (query as Query)[malformed] : undefined;
}
