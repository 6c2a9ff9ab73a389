/**
 * Text bounds in characters as the schema validator counts them (ajv counts Unicode code points,
 * not UTF-16 units): "😀" is one character, not two. Hand-written bounds use it, so a text a
 * schema accepts is not refused by a repeated check.
 */
export const characterCount = (text: string): number => [...text].length;
