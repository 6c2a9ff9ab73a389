import type { FastifyReply } from "fastify";
import { type TSchema, Type } from "typebox";
import type { ErrorDef, ValidationDetail } from "../errors.ts";

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

export function failure(
  def: ErrorDef,
  message: string,
  details?: ValidationDetail[],
): Envelope<{ details: ValidationDetail[] } | null> {
  return { success: false, code: def.code, message, data: details ? { details } : null };
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
        ),
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
