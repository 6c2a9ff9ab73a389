import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { isDatabaseUnavailable, isOutcomeUnknown, isTransientDatabaseError } from "../db/failures.ts";
import { AppError, type ErrorDef, errors, validationError } from "../errors.ts";
import { failure } from "./envelope.ts";
import { validationDetails } from "./validation.ts";

/**
 * The one error handler: every failure leaves as the envelope with a catalog code. Client
 * mistakes keep their own code and status; dependency outages become 503; anything else is a
 * bug, logged in full and answered with a generic 500 that reveals nothing.
 */

const fastifyCodes: Record<string, ErrorDef> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: errors.unsupportedMediaType,
  FST_ERR_CTP_EMPTY_JSON_BODY: errors.bodyRequired,
  FST_ERR_CTP_INVALID_JSON_BODY: errors.malformedJson,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: errors.malformedJson,
};

function send(
  reply: FastifyReply,
  def: ErrorDef,
  message: string,
  details?: AppError["details"],
  total?: number,
) {
  // A 401 names the scheme that would succeed (RFC 9110 11.6.1).
  if (def.status === 401) reply.header("www-authenticate", 'Bearer realm="emisor"');
  return reply.code(def.status).send(failure(def, message, details, total));
}

export function handleError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof AppError) {
    if (error.headers) reply.headers(error.headers);
    return send(reply, error.def, error.message, error.details);
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const { details, total } = validationDetails(
      fastifyError.validation as never,
      fastifyError.validationContext,
    );
    const refused = validationError(details, total);
    return send(reply, refused.def, refused.message, refused.details, total);
  }
  if (fastifyError.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    // Operations that need no token take smaller bodies than the rest: the answer says which limit.
    const limit = request.routeOptions.bodyLimit;
    return send(
      reply,
      errors.bodyTooLarge,
      `The body is larger than this operation's limit of ${limit} bytes`,
    );
  }
  const mapped = fastifyError.code ? fastifyCodes[fastifyError.code] : undefined;
  if (mapped) return send(reply, mapped, mapped.message);
  if (error instanceof SyntaxError || fastifyError.code === "FST_ERR_CTP_INVALID_CONTENT_LENGTH") {
    return send(reply, errors.malformedJson, errors.malformedJson.message);
  }
  // Other 4xx raised by Fastify itself (a malformed URL, a bad header) are the client's.
  const status = fastifyError.statusCode ?? 500;
  if (status === 404) return send(reply, errors.routeNotFound, errors.routeNotFound.message);
  if (status >= 400 && status < 500) return send(reply, errors.validationFailed, error.message);
  // A read changes nothing, whatever its last statement was: retrying it is always safe (503).
  if (isOutcomeUnknown(error) && request.method !== "GET" && request.method !== "HEAD") {
    request.log.warn({ err: error }, "database outcome unknown");
    return send(reply, errors.databaseOutcomeUnknown, errors.databaseOutcomeUnknown.message);
  }
  if (isDatabaseUnavailable(error) || isTransientDatabaseError(error)) {
    request.log.warn({ err: error }, "database unavailable");
    reply.header("retry-after", "1");
    return send(reply, errors.databaseUnavailable, errors.databaseUnavailable.message);
  }
  request.log.error({ err: error }, "unhandled error");
  return send(reply, errors.internalError, errors.internalError.message);
}

/**
 * Errors Fastify's router raises before any route or hook runs (a URL whose percent-encoding does
 * not decode, a path parameter longer than maxParamLength). Without this Fastify answers them with
 * its own non-envelope body (and a 414 the catalog does not have): they are malformed requests.
 */
export function handleFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  // No hook ran (access-log.ts sets it on every other answer).
  reply.header("x-request-id", request.id);
  if (error.code === "FST_ERR_MAX_PARAM_LENGTH") {
    return send(reply, errors.validationFailed, "A path parameter is too long");
  }
  if (error.code === "FST_ERR_BAD_URL") {
    return send(reply, errors.validationFailed, "The URL is not valid (bad percent-encoding)");
  }
  return handleError(error, request, reply);
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (headers over 16 KiB, a byte not
 * allowed in a header, a garbled request line, both Content-Length and Transfer-Encoding, a request
 * that does not arrive within Node's requestTimeout): Fastify's default writes a body of its own;
 * this writes the envelope, then closes the connection as Node does.
 */
export function handleClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const def =
    error.code === "HPE_HEADER_OVERFLOW"
      ? errors.headersTooLarge
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? errors.requestTimeout
        : errors.validationFailed;
  const message = def === errors.validationFailed ? "The HTTP request is malformed" : def.message;
  const body = JSON.stringify(failure(def, message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${def.status} ${STATUS_CODES[def.status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/**
 * Fastify's message for a failed schema, which no answer uses: handleError lists a few of the
 * errors themselves. Fastify's default formatter would join every one of them into one string.
 */
export function schemaErrorMessage(_errors: unknown, part: string): Error {
  return new Error(`The ${part} is invalid`);
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(handleError);
  app.setNotFoundHandler((request, reply) => {
    send(reply, errors.routeNotFound, `No route ${request.method} ${request.url.split("?")[0]}`);
  });
}
