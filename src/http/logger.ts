import type { FastifyServerOptions } from "fastify";

/**
 * pino options. Requests are logged by path only: query strings can carry personal data (RFC,
 * CURP, email), and headers can carry tokens, so neither reaches a log line. Bodies are never
 * logged; the redaction list is a second line of defence for anything that slips into an object.
 */
export const redactedPaths = [
  "req.headers.authorization",
  "req.headers.cookie",
  "headers.authorization",
  "*.password",
  "*.api_key_password",
  "*.pin",
  "*.card_number",
  "*.cvv",
  "*.pan",
  "*.token",
  "*.private_key",
  "*.secret",
  // A database error carries the row or the values it failed on (a unique violation's detail
  // names the duplicate rfc or email; PGlite adds the statement's parameters).
  "err.detail",
  "err.params",
  "err.parameters",
];

export function loggerOptions(level: string): NonNullable<FastifyServerOptions["logger"]> {
  return {
    level,
    redact: { paths: redactedPaths, censor: "[redacted]" },
    serializers: {
      req: (req: { method: string; url: string; id: string; ip?: string }) => ({
        id: req.id,
        method: req.method,
        path: req.url.split("?")[0],
      }),
    },
  };
}
