import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { FastifyBaseLogger, FastifyServerOptions } from "fastify";
import type { Bindings, ChildLoggerOptions, Logger } from "pino";
import { maskCardNumbers } from "../domain/luhn.ts";

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
  "*.cvv2",
  "*.pan",
  "*.token",
  "*.private_key",
  "*.secret",
  // A database error carries the row or the values it failed on (a unique violation's detail
  // names the duplicate rfc or email; PGlite adds the statement's parameters).
  "err.detail",
  "err.params",
  "err.parameters",
  // node-postgres attaches the connection to a pool error: its cancel key, its parameters and
  // every prepared statement's text.
  "err.client",
];

let nextRequestId = 0;
/**
 * Made ids start with a random tag of this process: behind a load balancer several processes
 * count from 0, and an id must name one request among all of theirs.
 */
const processTag = randomBytes(4).toString("hex");

/**
 * The request id every log line of a request carries, and its answer's `X-Request-Id`: the
 * caller's `X-Request-Id` when it is 1-128 visible ASCII characters (card numbers in it masked),
 * otherwise one of ours (`req-<process tag>-<count>`). It was copied as sent, 3,000 characters or
 * a card number included.
 */
export function requestIdOf(request: IncomingMessage): string {
  const sent = request.headers["x-request-id"];
  if (typeof sent === "string" && /^[\x21-\x7e]{1,128}$/.test(sent)) return maskCardNumbers(sent);
  nextRequestId = (nextRequestId + 1) & 0x7fffffff;
  return `req-${processTag}-${nextRequestId.toString(36)}`;
}

export function loggerOptions(level: string): NonNullable<FastifyServerOptions["logger"]> {
  return {
    level,
    redact: { paths: redactedPaths, censor: "[redacted]" },
    serializers: {
      req: (req: { method: string; url: string; id: string; ip?: string }) => ({
        id: req.id,
        method: req.method,
        // A card number in a path (`GET /v1/cards/4111...`, refused as not a UUID) must not
        // reach a log line.
        path: maskCardNumbers(req.url.split("?")[0] ?? ""),
      }),
    },
  };
}

type Level = "fatal" | "error" | "warn" | "info" | "debug" | "trace";

/**
 * Request loggers made on first use. Fastify gives every request a child logger bound to its
 * request id, and pino builds a child by serialising those bindings (through the redaction): a
 * tenth of what an authenticated constant route costs the service, while at the default level
 * (warn) almost no request logs anything. This
 * stands in for the child and makes the real one when a line at an enabled level is written, so a
 * request that logs writes the same line, with its `reqId`, as before.
 */
export const requestLoggerFactory: NonNullable<FastifyServerOptions["childLoggerFactory"]> = (
  logger,
  bindings,
  options,
) => {
  const parent = logger as FastifyBaseLogger & Partial<Pick<Logger, "isLevelEnabled">>;
  // Routes with their own log level or serialisers, and loggers that are not pino: the real child.
  if (Object.keys(options).length > 0 || typeof parent.isLevelEnabled !== "function")
    return logger.child(bindings, options);
  return new LazyChildLogger(parent as FastifyBaseLogger & Pick<Logger, "isLevelEnabled">, bindings);
};

class LazyChildLogger {
  readonly #parent: FastifyBaseLogger & Pick<Logger, "isLevelEnabled">;
  readonly #bindings: Bindings;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger & Pick<Logger, "isLevelEnabled">, bindings: Bindings) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  get level(): string {
    return this.#child?.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.#real().level = level;
  }

  #real(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings);
    return this.#child;
  }

  #write(level: Level, args: unknown[]): void {
    if (this.#child === undefined && !this.#parent.isLevelEnabled(level)) return;
    const real = this.#real();
    (real[level] as (...line: unknown[]) => void).apply(real, args);
  }

  fatal(...args: unknown[]): void {
    this.#write("fatal", args);
  }
  error(...args: unknown[]): void {
    this.#write("error", args);
  }
  warn(...args: unknown[]): void {
    this.#write("warn", args);
  }
  info(...args: unknown[]): void {
    this.#write("info", args);
  }
  debug(...args: unknown[]): void {
    this.#write("debug", args);
  }
  trace(...args: unknown[]): void {
    this.#write("trace", args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options);
  }
}
