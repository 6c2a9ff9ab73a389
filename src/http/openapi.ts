import { isDeepStrictEqual } from "node:util";
import type { FastifyDynamicSwaggerOptions } from "@fastify/swagger";
import { errors } from "../errors.ts";
import { IdempotencyKeyHeader } from "../idempotency/hook.ts";
import { ErrorEnvelopeSchema } from "./envelope.ts";
import type { ResponseHeaders } from "./schemas.ts";

/**
 * The OpenAPI document (/openapi.json), made by @fastify/swagger from the route schemas. What a
 * route's own code sends (login's Authorization, Cache-Control: no-store on an answer holding a
 * secret) its schema states, as a response schema's `headers`, which the serializer ignores. What
 * a hook or the error handler does for many routes is stated here, from the route's config: the
 * Idempotency-Key header and Idempotent-Replayed (idempotency/hook.ts), 429 with Retry-After on
 * rate-limited routes (http/rate-limit.ts), 401 with WWW-Authenticate and 503 with Retry-After
 * (http/error-handler.ts). These additions exist in the document only: the routes Fastify
 * serializes with are not changed.
 */

/** An error response as the document states it: the error envelope, and the headers it carries. */
function errorResponse(description: string, headers: ResponseHeaders) {
  return { ...ErrorEnvelopeSchema, description, headers };
}

/** Every 401: a token, a login or a rail's signature refused (error-handler.ts names the scheme). */
const Unauthorized = errorResponse(
  "The error envelope: the bearer token is missing, invalid, expired or revoked, or its API key is disabled (2001-2004, 2006); a login with a wrong API key or password (2005) or a disabled key (2006); a rail callback with a missing, stale or wrong signature (2501).",
  {
    "WWW-Authenticate": {
      type: "string",
      enum: ['Bearer realm="emisor"'],
      description: "The scheme that would succeed (RFC 9110 11.6.1). Sent with every 401.",
    },
  },
);

/** Every 429 (2007 and 2008 on login, 2009 on a rate-limited route) says when to retry. */
export const TooManyRequests = errorResponse(
  "The error envelope: too many requests (2009 on a rate-limited operation; on login, 2007 for failed logins from one address and 2008 for a locked API key).",
  {
    "Retry-After": {
      type: "integer",
      minimum: 1,
      description: "Seconds to wait before trying again. Sent with every 429.",
    },
  },
);

/** A 503: the database (6001) or a shutdown (6002), with Retry-After, or the rail's secret (6501). */
const ServiceUnavailable = errorResponse(
  "The error envelope: the database is unavailable (6001), the service is shutting down and did not run the request (6002), or the SPEI callback secret is not configured (6501). The request can be retried as it was (with the same Idempotency-Key, where the operation takes one).",
  {
    "Retry-After": {
      type: "integer",
      minimum: 1,
      description: "Seconds to wait before trying again (1). Sent with 6001 and 6002.",
    },
  },
);

/** A 504: the database stopped answering during a COMMIT (6003); the outcome is unknown. */
const OutcomeUnknown = errorResponse(
  "The error envelope: the database stopped answering while the request was being committed (6003), so it may have taken effect. Retry it with the same Idempotency-Key, which answers its outcome; without a key, read the state before sending it again.",
  {},
);

const IdempotentReplayedHeader: ResponseHeaders = {
  "Idempotent-Replayed": {
    type: "string",
    enum: ["true"],
    description:
      "This is the stored answer to an earlier request with the same Idempotency-Key (its success, or its refusal decided on the data), not a new execution. Absent otherwise.",
  },
};

type ResponseMap = Record<string, Record<string, unknown>>;

/** The response map of a /v1 route in the document: its own, plus what the hooks may answer. */
function documentedResponses(own: ResponseMap, config: { idempotent?: boolean; rateLimited?: boolean }) {
  const map: ResponseMap = { ...own, 401: Unauthorized, 503: ServiceUnavailable, 504: OutcomeUnknown };
  if (config.rateLimited) map[429] = TooManyRequests;
  if (config.idempotent) {
    for (const status of ["200", "4xx"]) {
      const schema = map[status];
      if (schema)
        map[status] = { ...schema, headers: { ...(schema.headers as object), ...IdempotentReplayedHeader } };
    }
  }
  return map;
}

interface Operation {
  responses?: Record<string, { content?: Record<string, { schema?: Record<string, unknown> }> }>;
}

/**
 * The error envelope once, in components.schemas, referenced by every error response: inline it
 * repeated itself in five responses of every operation, and a client generated from the document
 * made as many identical error types.
 */
function shareErrorEnvelope<D extends object>(generated: D): D {
  const document = generated as {
    paths?: Record<string, Record<string, Operation> | undefined>;
    components?: { schemas?: Record<string, unknown> };
  };
  const { description: _, ...envelope } = JSON.parse(JSON.stringify(ErrorEnvelopeSchema));
  const ref = { $ref: "#/components/schemas/ErrorEnvelope" };
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations ?? {})) {
      for (const response of Object.values(operation.responses ?? {})) {
        const media = response.content?.["application/json"];
        const { description: _, ...schema } = media?.schema ?? {};
        if (media && isDeepStrictEqual(schema, envelope)) {
          response.content = { "application/json": { ...media, schema: ref } };
        }
      }
    }
  }
  document.components = {
    ...document.components,
    schemas: {
      ...document.components?.schemas,
      ErrorEnvelope: JSON.parse(JSON.stringify(ErrorEnvelopeSchema)),
    },
  };
  return generated;
}

export const openApiOptions: FastifyDynamicSwaggerOptions = {
  openapi: {
    openapi: "3.1.0",
    info: {
      title: "Emisor",
      version: "1.0.0",
      description: `Card-issuing and payments back-end for Mexico. Every /v1 response is the envelope {success, code, message, data}; failures carry a code of the error catalog (${Object.keys(errors).length} codes, listed in docs/reference/errors.md).`,
    },
    servers: [{ url: "/" }],
    components: {
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          description:
            "The token POST /v1/auth/login answers, in its Authorization header and in data.token.",
        },
      },
    },
  },
  transform: ({ schema, url, route }) => {
    if (!schema || schema.hide || !url.startsWith("/v1/")) return { schema, url };
    const config = route.config ?? {};
    return {
      schema: {
        ...schema,
        // The Idempotency-Key header is read by a hook, not by the route's schema: stated here so
        // that clients generated from the document send it.
        ...(config.idempotent ? { headers: IdempotencyKeyHeader } : {}),
        response: documentedResponses((schema.response ?? {}) as ResponseMap, config),
      },
      url,
    };
  },
  transformObject: (document) =>
    "openapiObject" in document ? shareErrorEnvelope(document.openapiObject) : document.swaggerObject,
};
