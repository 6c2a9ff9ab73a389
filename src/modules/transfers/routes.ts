import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { AppError, errors } from "../../errors.ts";
import { ok } from "../../http/envelope.ts";
import { readJsonBody } from "../../http/json-body.ts";
import { bearerAuth, pageOf, responses } from "../../http/schemas.ts";
import { replaceUnstorable } from "../../http/validation.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import { CardTransferBody, CardTransferData, sendCardTransfer } from "./card-transfer.ts";
import { listSpeiOrders } from "./order-listing.ts";
import { forceReturn, getSpeiOrder } from "./outgoing.ts";
import {
  AbonoResultData,
  abonoAmountCents,
  abonoOf,
  ClabeParams,
  CollectionAccountsData,
  IncomingBody,
  type IncomingBodyType,
  OperationsData,
  OperationsQuery,
  type OperationsQueryType,
  OrderParams,
  OrderStateBody,
  type OrderStateBodyType,
  OrderStateData,
  railDate,
  railTimestamp,
  returnCause,
  SandboxIncomingBody,
  type SandboxIncomingBodyType,
  SandboxReturnBody,
  type SandboxReturnBodyType,
  SpeiOrderData,
  TransferListData,
  TransferListQuery,
  type TransferListQueryType,
} from "./schemas.ts";
import {
  listCollectionAccounts,
  listTransferOperations,
  receiveAbono,
  renderAbonoResult,
  simulateIncoming,
} from "./service.ts";
import { speiSignatureHeader, verifySpeiSignature } from "./signature.ts";
import { renderOrder } from "./views.ts";

/**
 * SPEI: collection accounts and their incoming transfers (4.8), transfer-out orders (their
 * listing and the state of 4.10 orders), the rail's signed callbacks, and the sandbox's drivers
 * of the simulator.
 */
export function registerTransferRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    "/v1/transfer/clabe/collection",
    {
      schema: {
        tags: ["transfers"],
        operationId: "listCollectionAccounts",
        summary: "Your collection accounts (CLABE)",
        security: bearerAuth,
        response: responses(CollectionAccountsData),
      },
    },
    async (request) => ok(await listCollectionAccounts(ctx.db, request.caller)),
  );

  app.get<{ Params: Static<typeof ClabeParams>; Querystring: OperationsQueryType }>(
    "/v1/transfer/clabe/collection/:clabe/operations",
    {
      schema: {
        tags: ["transfers"],
        operationId: "listIncomingTransfers",
        summary: "Incoming transfers of a collection account (contract 4.8), newest first",
        description:
          "Paged by page/per_page or by cursor (next_cursor of the previous page). The CLABE must be yours or a sub-client's.",
        security: bearerAuth,
        params: ClabeParams,
        querystring: OperationsQuery,
        response: responses(OperationsData),
      },
    },
    async (request) => {
      const q = request.query;
      const data = await listTransferOperations(ctx.db, request.caller, request.params.clabe, {
        initDate: q.init_date,
        endDate: q.end_date,
        ...pageOf(q, { cursor: true }),
        cursor: q.cursor,
      });
      return ok(data);
    },
  );

  app.post<{ Body: Static<typeof CardTransferBody> }>(
    "/v1/transfer/cards",
    {
      config: { idempotent: true, cipheredFields: ["card_number", "pin"], rateLimited: true },
      schema: {
        tags: ["transfers"],
        operationId: "createTransfer",
        summary: "Send a SPEI transfer out, paid by a card (contract 4.10)",
        description:
          "card_number names the paying card (UUID or its 16-digit number ciphered under the system key); it must be ACTIVE and its PIN must match. The card pays amount + the product's FLAT commission + 16% IVA on it. Success message: Operación SPEI® Out exitosa.",
        security: bearerAuth,
        body: CardTransferBody,
        response: responses(CardTransferData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await sendCardTransfer(ctx, request.caller, request.body, request.idempotencyDraft)),
  );

  app.get<{ Querystring: TransferListQueryType }>(
    "/v1/transfer/cards",
    {
      schema: {
        tags: ["transfers"],
        operationId: "listTransfers",
        summary: "Your transfers out and your sub-clients', newest first",
        description:
          "Filter by status (states separated by commas), client_id, card_id (the paying card) and creation time; page with cursor = the previous next_cursor, with the same filters and per_page.",
        security: bearerAuth,
        querystring: TransferListQuery,
        response: responses(TransferListData),
      },
    },
    async (request) => {
      const { per_page, ...filters } = request.query;
      return ok(
        await listSpeiOrders(ctx.db, request.caller, {
          ...filters,
          perPage: per_page ?? limits.pageSizeDefault,
        }),
      );
    },
  );

  app.get<{ Params: Static<typeof OrderParams> }>(
    "/v1/transfer/cards/:id",
    {
      schema: {
        tags: ["transfers"],
        operationId: "getTransfer",
        summary: "The state of a transfer out",
        security: bearerAuth,
        params: OrderParams,
        response: responses(SpeiOrderData),
      },
    },
    async (request) => ok(await getSpeiOrder(ctx.db, request.caller, request.params.id)),
  );

  app.register(async (scope) => registerRailCallbacks(scope, ctx));
  if (ctx.config.sandbox) registerSandboxSpeiRoutes(app, ctx);
}

/**
 * The rail's callbacks: no bearer token, an HMAC signature over the exact body bytes instead
 * (signature.ts). Registered in their own scope, whose JSON parser checks the signature over those
 * bytes before reading them, so an unsigned call costs one HMAC and no parsing. With no secret
 * configured every call is refused with 503 (6501), so the rail retries rather than giving up, and
 * nothing unsigned is ever accepted.
 */
async function registerRailCallbacks(scope: FastifyInstance, ctx: AppContext): Promise<void> {
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

/** Sandbox only: simulate an incoming transfer, force a return. */
function registerSandboxSpeiRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post<{ Body: SandboxIncomingBodyType }>(
    "/v1/sandbox/spei/incoming",
    {
      config: { idempotent: true, rateLimited: true },
      schema: {
        tags: ["sandbox"],
        operationId: "simulateIncomingTransfer",
        summary: "Simulate an incoming SPEI transfer to one of your CLABEs (sandbox only)",
        security: bearerAuth,
        body: SandboxIncomingBody,
        response: responses(AbonoResultData),
      },
    },
    async (request, reply) => {
      const b = request.body;
      const result = await simulateIncoming(
        ctx.db,
        request.caller,
        {
          clabe: b.clabe,
          amountCents: abonoAmountCents(b.amount, "amount"),
          trackingKey: b.tracking_key?.toUpperCase(),
          operationDate: b.operation_date,
          payerName: b.payer_name,
          payerAccount: b.payer_account,
          payerInstitution: b.payer_institution,
          payerRfcCurp: b.payer_rfc_curp,
          paymentConcept: b.payment_concept,
          numericReference: b.numeric_reference,
        },
        request.idempotency,
      );
      return sendResult(reply, result);
    },
  );

  app.post<{ Params: Static<typeof OrderParams>; Body: SandboxReturnBodyType }>(
    "/v1/sandbox/spei/orders/:id/return",
    {
      config: { idempotent: true, rateLimited: true },
      schema: {
        tags: ["sandbox"],
        operationId: "simulateTransferReturn",
        summary: "Force the return (DEVUELTA) of a transfer out (sandbox only)",
        description: "The payer gets amount, commission and IVA back. Body {} or {cause: '03'}.",
        security: bearerAuth,
        params: OrderParams,
        body: SandboxReturnBody,
        response: responses(SpeiOrderData),
      },
    },
    async (request, reply) => {
      const cause = request.body.cause ?? "01";
      const result = await forceReturn(
        ctx.db,
        ctx.rails.spei,
        request.caller,
        request.params.id,
        cause,
        request.idempotency,
      );
      return sendResult(reply, result);
    },
  );
}
