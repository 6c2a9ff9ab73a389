/**
 * Text bounds in characters as the schema validator counts them (ajv counts Unicode code points,
 * not UTF-16 units): "😀" is one character, not two. Hand-written bounds and truncations use
 * these, so a text a schema accepts is not refused by a repeated check, and a cut never splits a
 * character in half (a lone surrogate, which jsonb refuses: a 500).
 */
export const characterCount = (text: string): number => [...text].length;

/** The first `max` characters of `text`, whole. */
export function firstCharacters(text: string, max: number): string {
  // Fast path: max UTF-16 units are at most max characters.
  if (text.length <= max) return text;
  return [...text].slice(0, max).join("");
}
