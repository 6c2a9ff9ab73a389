import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AppContext } from "../../context.ts";
import { AppError, type ErrorDef, errors } from "../../errors.ts";
import { ok } from "../../http/envelope.ts";
import { readJsonBody } from "../../http/json-body.ts";
import type { Operation } from "../../http/operation.ts";
import { responses } from "../../http/schemas.ts";
import { replaceUnstorable } from "../../http/validation.ts";
import { limits } from "../../limits.ts";
import { ClearingFileReportData, ndjsonContentType } from "../purchases/clearing-file-schemas.ts";
import { receiveClearingFile } from "../purchases/clearing-files.ts";
import { CardMessageBody, type CardMessageBodyType, MessageAnswerData } from "../purchases/schemas.ts";
import { messageOf } from "../purchases/service.ts";
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

/** Who signs a scope's calls: the secret, the header, and the errors for no secret and a bad signature. */
export interface Signer {
  secret: (ctx: AppContext) => string | undefined;
  header: string;
  notConfigured: ErrorDef;
  invalid: ErrorDef;
}

const speiSigner: Signer = {
  secret: (ctx) => ctx.config.speiWebhookSecret,
  header: speiSignatureHeader,
  notConfigured: errors.speiWebhookNotConfigured,
  invalid: errors.speiSignatureInvalid,
};

/**
 * A rail's callbacks: no bearer token, an HMAC signature over the exact body bytes instead
 * (signature.ts). Registered in their own scope, whose JSON parser checks the signature over those
 * bytes before reading them, so an unsigned call costs one HMAC and no parsing. With no secret
 * configured every call is refused with 503, so the rail retries rather than giving up, and
 * nothing unsigned is ever accepted.
 */
export function signedScope(scope: FastifyInstance, ctx: AppContext, signer: Signer): void {
  scope.decorateRequest("rawBody", undefined);
  scope.removeContentTypeParser("application/json");
  scope.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    try {
      checkSignature(ctx, request, signer);
      done(null, readJsonBody(request, raw));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  scope.addHook("preValidation", async (request) => {
    // A call with no body and no Content-Type never reached the parser.
    if (request.rawBody === undefined) checkSignature(ctx, request, signer);
    // Text is stored as the rail sends it: a NUL or an unpaired surrogate, which PostgreSQL cannot
    // store, is replaced rather than refused (a 400 bounces money; unknown fields included).
    // An NDJSON body stays bytes here: its lines are read (and their text replaced) one by one.
    if (!Buffer.isBuffer(request.body)) request.body = replaceUnstorable(request.body);
  });
}

export async function registerRailRoutes(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  signedScope(scope, ctx, speiSigner);
  for (const operation of [receiveSpeiTransferRoute, receiveSpeiOrderStateRoute]) operation(scope, ctx);
}

/** The card processor signs as the SPEI rail does, under its own secret and header. */
export const cardNetworkSignatureHeader = "x-card-network-signature";

const cardNetworkSigner: Signer = {
  secret: (ctx) => ctx.config.cardNetworkSecret,
  header: cardNetworkSignatureHeader,
  notConfigured: errors.cardNetworkNotConfigured,
  invalid: errors.cardNetworkSignatureInvalid,
};

const receiveCardMessageRoute: Operation = (scope, ctx) => {
  scope.post<{ Body: CardMessageBodyType }>(
    "/v1/rails/cards/messages",
    {
      config: { auth: false },
      bodyLimit: limits.cardMessageBodyBytesMax,
      schema: {
        tags: ["rails"],
        operationId: "receiveCardMessage",
        summary:
          "A card network message (authorization, advice, reversal, clearing, return), signed by the processor",
        description: `Header ${cardNetworkSignatureHeader}: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>. Amounts are integers in the currency's minor units. A repeated message_id answers the first answer again (Idempotent-Replayed: true) and moves nothing.`,
        body: CardMessageBody,
        response: responses(MessageAnswerData),
      },
    },
    async (request, reply) => {
      const message = await messageOf(ctx, request.body);
      const { answer, replayed } = await ctx.cardMessages.process(message);
      if (replayed) reply.header("idempotent-replayed", "true");
      return ok(answer);
    },
  );
};

const receiveClearingFileRoute: Operation = (scope, ctx) => {
  scope.post(
    "/v1/rails/cards/clearing_files",
    {
      config: { auth: false },
      bodyLimit: limits.clearingFileBytesMax,
      // Only NDJSON: a JSON body would otherwise reach the JSON parser and be refused as a body
      // this operation does not take, which says nothing of what it does take.
      onRequest: async (request) => {
        const type = (request.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
        if (type !== ndjsonContentType)
          throw new AppError(errors.unsupportedMediaType, {
            message: `Content-Type must be ${ndjsonContentType}`,
          });
      },
      schema: {
        tags: ["rails"],
        operationId: "receiveClearingFile",
        summary: "A clearing file (CLEARING and RETURN lines), signed by the processor; answers its report",
        description: `Content-Type ${ndjsonContentType}: a first line {"file_id": "..."}, then one CLEARING or RETURN message per line, as the messages route takes each (up to ${limits.clearingFileLinesMax} lines, ${limits.clearingFileBytesMax / 1048576} MiB). Header ${cardNetworkSignatureHeader} over the whole body, as on the messages route. A line that is not valid, names an unknown card or authorization, or is of another type is refused alone and listed in the report. A repeated file_id with the same lines answers the first report again (Idempotent-Replayed: true); with other lines, 4802. An upload retried after a failure posts only the lines not yet posted.`,
        response: responses(ClearingFileReportData),
      },
    },
    async (request, reply) => {
      const raw = Buffer.isBuffer(request.body) ? request.body : undefined;
      const { report, replayed } = await receiveClearingFile(ctx, raw);
      if (replayed) reply.header("idempotent-replayed", "true");
      return ok(report);
    },
  );
};

/**
 * NDJSON in the card network's scope: the signature checked over the bytes, which are handed on
 * unread. clearing-files.ts reads them a line at a time, each line as strictly as a JSON body.
 */
function acceptNdjson(scope: FastifyInstance, ctx: AppContext, signer: Signer): void {
  scope.addContentTypeParser(ndjsonContentType, { parseAs: "buffer" }, (request, body, done) => {
    request.rawBody = body as Buffer;
    try {
      checkSignature(ctx, request, signer);
      done(null, body);
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

/** The card processor's calls, in a scope signed under EMISOR_CARD_NETWORK_SECRET. */
export async function registerCardNetworkRoutes(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  signedScope(scope, ctx, cardNetworkSigner);
  acceptNdjson(scope, ctx, cardNetworkSigner);
  for (const operation of [receiveCardMessageRoute, receiveClearingFileRoute]) operation(scope, ctx);
}

export function checkSignature(ctx: AppContext, request: FastifyRequest, signer: Signer): void {
  const secret = signer.secret(ctx);
  if (!secret) throw new AppError(signer.notConfigured);
  const header = request.headers[signer.header];
  const valid = verifySpeiSignature(
    secret,
    typeof header === "string" ? header : undefined,
    request.rawBody ?? Buffer.alloc(0),
    Math.floor(Date.now() / 1000),
    limits.speiWebhookToleranceSeconds,
  );
  if (!valid) throw new AppError(signer.invalid);
}
