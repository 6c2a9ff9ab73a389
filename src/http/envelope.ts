import type { FastifyReply } from "fastify";
import { type TSchema, Type } from "typebox";
import type { ErrorDef, ValidationDetail } from "../errors.ts";
import { limits } from "../limits.ts";

/** Every /v1 response, success or failure (contract 2.1). */
export interface Envelope<T = unknown> {
  success: boolean;
  code: number;
  message: string;
  data: T;
}

export function ok<T>(data: T, message = "OK"): Envelope<T> {
  return { success: true, code: 0, message, data };
}

/**
 * A failure. A validation failure lists at most `limits.validationDetailsMax` of its failed rules,
 * and `total` says how many there were: a body of thousands of unknown fields answers a few
 * lines, not one for each (the rest are found by fixing these and sending again).
 */
export function failure(
  def: ErrorDef,
  message: string,
  details?: ValidationDetail[],
  total = details?.length ?? 0,
): Envelope<{ details: ValidationDetail[]; total: number } | null> {
  if (details === undefined) return { success: false, code: def.code, message, data: null };
  const listed = details.slice(0, limits.validationDetailsMax);
  return {
    success: false,
    code: def.code,
    message,
    data: { details: listed, total: Math.max(total, details.length) },
  };
}

/** `headers` (name to schema) is for the OpenAPI document only (see ResponseHeaders). */
export function EnvelopeSchema<T extends TSchema>(data: T, description?: string, headers?: object) {
  return Type.Object(
    {
      success: Type.Boolean(),
      code: Type.Integer({ description: "0 on success" }),
      message: Type.String(),
      data,
    },
    { ...(description ? { description } : {}), ...(headers ? { headers } : {}) },
  );
}

export const ErrorEnvelopeSchema = Type.Object(
  {
    success: Type.Boolean(),
    code: Type.Integer({ description: "A code of the error catalog" }),
    message: Type.String(),
    data: Type.Union([
      Type.Null(),
      Type.Object({
        details: Type.Array(
          Type.Object({ field: Type.String(), rule: Type.String(), message: Type.String() }),
          {
            maxItems: limits.validationDetailsMax,
            description: `The failed rules, the first ${limits.validationDetailsMax} of them`,
          },
        ),
        total: Type.Integer({ description: "How many rules failed, listed or not" }),
      }),
    ]),
  },
  { description: "Failure: success false, a catalog code, a message; details for validation errors" },
);

/**
 * Marks a response that carries a secret (a bearer token, a webhook signing secret, card data) as
 * not to be kept by any cache (RFC 6749 5.1 asks it of token responses).
 */
export function noStore(reply: FastifyReply): FastifyReply {
  return reply.header("cache-control", "no-store");
}
