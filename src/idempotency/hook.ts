import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { Db } from "../db/database.ts";
import { AppError, errors } from "../errors.ts";
import { limits } from "../limits.ts";
import { canonicalJson, requestHash } from "./fingerprint.ts";
import type { IdempotentResult } from "./reply.ts";
import { findStoredResponse } from "./store.ts";

const keyPattern = new RegExp(`^[\\x21-\\x7e]{1,${limits.idempotencyKeyLengthMax}}$`);

/** The header as the OpenAPI document states it (the hook below is what reads it). */
export const IdempotencyKeyHeader = Type.Object({
  "idempotency-key": Type.Optional(
    Type.String({
      pattern: keyPattern.source,
      description:
        "Makes the request safe to retry: the same key with the same body answers what the first attempt answered (Idempotent-Replayed: true) and moves money once; with another body, 4001. Kept 48 hours per API key.",
    }),
  ),
});

/**
 * Routes marked `config: { idempotent: true }` accept an `Idempotency-Key` header. This hook
 * validates it, fingerprints the request, and answers a repeated key at once from the store
 * (the service still guards the race inside its transaction: see run.ts), except on
 * routes with `cipheredFields`: there it leaves a draft the service completes once it has
 * deciphered them (IdempotencyDraft), and the service asks the store itself.
 */
export function registerIdempotency(app: FastifyInstance, db: Db, hashKey: Buffer): void {
  const checkKey = async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers["idempotency-key"];
    if (header === undefined) return;
    if (typeof header !== "string" || !keyPattern.test(header))
      throw new AppError(errors.invalidIdempotencyKey);
    // The operation as the router read it (its route and decoded parameters), not the URL as
    // written: `/v1/sandbox/funding/` and `/v1/sandbox/fundin%67` are the same request.
    const path = `${request.routeOptions.url}${canonicalJson(request.params ?? {})}`;
    const { apiKeyId } = request.caller;
    const body = request.body;
    const urlPath = request.url.split("?")[0] ?? "";
    const wholeBodyAtUrl = () => requestHash(hashKey, request.method, urlPath, body);
    const ciphered = request.routeOptions.config.cipheredFields;
    if (ciphered) {
      // The service deciphers these fields and completes the fingerprint with what they name.
      const rest = { ...(request.body as Record<string, unknown>) };
      for (const field of ciphered) delete rest[field];
      const partial = requestHash(hashKey, request.method, path, rest);
      request.idempotencyDraft = {
        complete: (named) => ({
          apiKeyId,
          key: header,
          requestHash: requestHash(hashKey, "deciphered", partial, named),
          legacyRequestHashes: () => [
            wholeBodyAtUrl(),
            requestHash(hashKey, "deciphered", requestHash(hashKey, request.method, urlPath, rest), named),
          ],
        }),
      };
      return;
    }
    request.idempotency = {
      apiKeyId,
      key: header,
      requestHash: requestHash(hashKey, request.method, path, request.body),
      legacyRequestHashes: () => [wholeBodyAtUrl()],
    };
    const stored = await findStoredResponse(db, request.idempotency);
    if (stored) return sendResult(reply, stored);
  };
  // On the idempotent routes only, ahead of their own: an application-wide hook would cost every
  // other request a promise and a turn of the microtask queue for nothing.
  app.addHook("onRoute", (route) => {
    if (!route.config?.idempotent) return;
    const own = route.preHandler === undefined ? [] : [route.preHandler].flat();
    route.preHandler = [checkKey, ...own];
  });
}

/** Sends a service result, marking replays with `Idempotent-Replayed: true`. */
export function sendResult(reply: FastifyReply, result: IdempotentResult): FastifyReply {
  if (result.replayed) reply.header("idempotent-replayed", "true");
  return reply.code(result.status).send(result.body);
}
