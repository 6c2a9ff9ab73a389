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

/**
 * Control and invisible characters, as Unicode categories for a regular expression's class:
 * controls (Cc), format characters (Cf: zero-width spaces and joiners, direction marks,
 * bidirectional overrides and isolates, the byte order mark) and the line and paragraph
 * separators. Text with them can read the same as text without, or in another order than stored.
 */
export const invisibleCategories = "\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}";

const invisibleCharacter = new RegExp(`[${invisibleCategories}]`, "u");

export const hasInvisibleCharacter = (text: string): boolean => invisibleCharacter.test(text);
