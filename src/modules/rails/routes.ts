import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AppContext } from "../../context.ts";
import { AppError, errors } from "../../errors.ts";
import { ok } from "../../http/envelope.ts";
import { readJsonBody } from "../../http/json-body.ts";
import type { Operation } from "../../http/operation.ts";
import { responses } from "../../http/schemas.ts";
import { replaceUnstorable } from "../../http/validation.ts";
import { limits } from "../../limits.ts";
import {
  AbonoResultData,
  abonoOf,
  IncomingBody,
  type IncomingBodyType,
  OrderStateBody,
  type OrderStateBodyType,
  OrderStateData,
  railDate,
  railTimestamp,
  returnCause,
} from "../transfers/schemas.ts";
import { receiveAbono, renderAbonoResult } from "../transfers/service.ts";
import { speiSignatureHeader, verifySpeiSignature } from "../transfers/signature.ts";
import { renderOrder } from "../transfers/views.ts";

const receiveSpeiTransferRoute: Operation = (scope, ctx) => {
  scope.post<{ Body: IncomingBodyType }>(
    "/v1/rails/spei/incoming",
    {
      config: { auth: false },
      bodyLimit: limits.railCallbackBodyBytesMax,
      schema: {
        tags: ["rails"],
        operationId: "receiveSpeiTransfer",
        summary: "Incoming SPEI transfer (abono), signed by the rail",
        description: `STP-style abono. Header ${speiSignatureHeader}: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>. Answers mensaje confirmar (credited, or already credited) or devolver with a Banxico cause.`,
        body: IncomingBody,
        response: responses(AbonoResultData),
      },
    },
    async (request) => ok(renderAbonoResult(await receiveAbono(ctx.db, abonoOf(request.body)))),
  );
};

const receiveSpeiOrderStateRoute: Operation = (scope, ctx) => {
  scope.post<{ Body: OrderStateBodyType }>(
    "/v1/rails/spei/order-state",
    {
      config: { auth: false },
      bodyLimit: limits.railCallbackBodyBytesMax,
      schema: {
        tags: ["rails"],
        operationId: "receiveSpeiOrderState",
        summary: "State change of a transfer out (LIQUIDACION, DEVOLUCION, CANCELACION), signed by the rail",
        body: OrderStateBody,
        response: responses(OrderStateData),
      },
    },
    async (request) => {
      const body = request.body;
      const outcome = await ctx.speiStateChanges.apply({
        // Emisor's keys are upper case; a rail that changes the case still names the same order.
        trackingKey: body.ClaveRastreo.toUpperCase(),
        operationDate: railDate(body.FechaOperacion, "FechaOperacion"),
        estado: body.Estado,
        detalle: body.Detalle ?? "",
        causaDevolucion: returnCause(body.CausaDevolucion),
        tsLiquidacion:
          body.Estado === "LIQUIDACION" ? railTimestamp(body.TsLiquidacion, "TsLiquidacion") : undefined,
      });
      if (!outcome) throw new AppError(errors.speiOrderNotFound);
      return ok({ applied: outcome.applied, transfer: renderOrder(outcome.order) });
    },
  );
};

/**
 * The rail's callbacks: no bearer token, an HMAC signature over the exact body bytes instead
 * (signature.ts). Registered in their own scope, whose JSON parser checks the signature over those
 * bytes before reading them, so an unsigned call costs one HMAC and no parsing. With no secret
 * configured every call is refused with 503 (6501), so the rail retries rather than giving up, and
 * nothing unsigned is ever accepted.
 */
export async function registerRailRoutes(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  scope.decorateRequest("rawBody", undefined);
  scope.removeContentTypeParser("application/json");
  scope.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    try {
      checkSignature(ctx, request);
      done(null, readJsonBody(request, raw));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  scope.addHook("preValidation", async (request) => {
    // A call with no body and no Content-Type never reached the parser.
    if (request.rawBody === undefined) checkSignature(ctx, request);
    // Text is stored as the rail sends it: a NUL or an unpaired surrogate, which PostgreSQL cannot
    // store, is replaced rather than refused (a 400 bounces money; unknown fields included).
    request.body = replaceUnstorable(request.body);
  });
  for (const operation of [receiveSpeiTransferRoute, receiveSpeiOrderStateRoute]) operation(scope, ctx);
}

function checkSignature(ctx: AppContext, request: FastifyRequest): void {
  const secret = ctx.config.speiWebhookSecret;
  if (!secret) throw new AppError(errors.speiWebhookNotConfigured);
  const header = request.headers[speiSignatureHeader];
  const valid = verifySpeiSignature(
    secret,
    typeof header === "string" ? header : undefined,
    request.rawBody ?? Buffer.alloc(0),
    Math.floor(Date.now() / 1000),
    limits.speiWebhookToleranceSeconds,
  );
  if (!valid) throw new AppError(errors.speiSignatureInvalid);
}
