import type { FastifyBaseLogger, FastifyInstance } from "fastify";

/**
 * The access log: one `info` line per answered request, written by the root logger with the
 * request id inside the line, so a request costs one object and no child logger. It names the
 * operation by its route template (`/v1/cards/:id`), never the URL as sent: a path may carry a
 * card number and a query string personal data (RFC, CURP, email). Neither bodies nor headers
 * (the token) are read. `code` is the envelope's code, `null` for an answer that is not an
 * envelope (the API reference, metrics).
 *
 * Registered only when `info` is enabled at start: at `warn` (the bench's level) the hook is not
 * there at all. At `info` it costs one object and one pino write per request.
 */
export function registerAccessLog(app: FastifyInstance): void {
  const log = app.log as FastifyBaseLogger & { isLevelEnabled?(level: string): boolean };
  if (typeof log.isLevelEnabled !== "function" || !log.isLevelEnabled("info")) return;
  app.addHook("onResponse", (request, reply, done) => {
    const caller = request.caller as typeof request.caller | null;
    log.info(
      {
        reqId: request.id,
        method: request.method,
        route: request.routeOptions.url ?? "unmatched",
        status: reply.statusCode,
        code: request.envelopeCode ?? null,
        ms: Math.round(reply.elapsedTime * 100) / 100,
        client: caller?.clientId ?? null,
        apiKey: caller?.apiKeyId ?? null,
      },
      "request",
    );
    done();
  });
}

/**
 * Notes the envelope code of every answer on its request, for the access log and the answers
 * counter, from the object before it is serialised (reading it back from the JSON would cost a
 * parse). Answers that are not objects (the API reference's files) keep `undefined`.
 */
export function registerEnvelopeCode(app: FastifyInstance): void {
  app.decorateRequest("envelopeCode", undefined);
  app.addHook("preSerialization", (request, _reply, payload, done) => {
    const code = (payload as { code?: unknown } | null)?.code;
    if (typeof code === "number") request.envelopeCode = code;
    done(null, payload);
  });
}

/**
 * Every answer carries `X-Request-Id`: the caller's own when it sent a usable one (see
 * logger.ts requestIdOf), else the one Emisor made, so a caller can quote it and an operator find
 * the access line. First of all hooks, so an answer that another hook refuses carries it too.
 */
export function registerRequestIdHeader(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    done();
  });
}
