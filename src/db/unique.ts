/**
 * The name of the unique index or constraint a statement violated (SQLSTATE 23505), or undefined
 * for any other error. Services map it to their own 409 code; both engines report the name.
 */
export function violatedUniqueConstraint(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, constraint } = error as { code?: unknown; constraint?: unknown };
  return code === "23505" && typeof constraint === "string" ? constraint : undefined;
}
