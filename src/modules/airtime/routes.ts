import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { invalidField } from "../../errors.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { completeDraft } from "../../idempotency/store.ts";
import { limits } from "../../limits.ts";
import { characterCount } from "../../text.ts";
import { cardRefName, parseCardNumber } from "../cards/card-number.ts";
import { lockActiveCard, resolveActiveCard } from "../cards/service.ts";
import { ProductsData, TopupBody, type TopupBodyType, TopupData, TopupParams } from "./schemas.ts";
import { type AirtimeDeps, getTopup, listAirtimeProducts, topupAirtime } from "./service.ts";

const listAirtimeProductsRoute: Operation = (app, ctx) => {
  app.get(
    "/v1/airtime/products",
    {
      schema: {
        tags: ["airtime"],
        operationId: "listAirtimeProducts",
        summary: "Airtime products (carrier and amount), for product_id",
        security: bearerAuth,
        response: responses(ProductsData),
      },
    },
    async () => ok(await listAirtimeProducts(ctx.db)),
  );
};

const createAirtimeTopupRoute: Operation = (app, ctx) => {
  app.post<{ Body: TopupBodyType }>(
    "/v1/airtime/topup",
    {
      config: { idempotent: true, cipheredFields: ["id"], rateLimited: true },
      schema: {
        tags: ["airtime"],
        operationId: "createAirtimeTopup",
        summary: "Top up airtime (contract 4.9)",
        description:
          "Without id your main balance pays. The debit commits before the provider is called; a provider failure reverses it. status PENDING means the provider has not answered yet: Emisor keeps asking, see GET /v1/airtime/topups/{id}.",
        security: bearerAuth,
        body: TopupBody,
        response: responses(TopupData),
      },
    },
    async (request, reply) => {
      const b = request.body;
      if (b.additional_data !== undefined && b.additional_date !== undefined) {
        throw invalidField(
          "additional_date",
          "exclusive",
          "send additional_data or additional_date, not both",
        );
      }
      const externalId = b.external_id === undefined ? undefined : decimalText(b.external_id);
      if (externalId !== undefined && characterCount(externalId) > limits.airtimeExternalIdLengthMax) {
        throw invalidField(
          "external_id",
          "maxLength",
          `must be at most ${limits.airtimeExternalIdLengthMax} characters`,
        );
      }
      const cardRef = b.id === undefined ? undefined : await parseCardNumber(ctx, b.id, "id");
      const { scope, stored } = await completeDraft(ctx.db, request.idempotencyDraft, {
        id: cardRef && cardRefName(cardRef),
      });
      if (stored) return sendResult(reply, stored);
      const result = await topupAirtime(
        airtimeDeps(app, ctx),
        request.caller,
        {
          cardRef,
          productId: b.product_id,
          phoneNumber: b.phone_number,
          email: b.email,
          externalId,
          additionalData: b.additional_data ?? b.additional_date,
        },
        scope,
      );
      return sendResult(reply, result);
    },
  );
};

const getAirtimeTopupRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof TopupParams> }>(
    "/v1/airtime/topups/:id",
    {
      schema: {
        tags: ["airtime"],
        operationId: "getAirtimeTopup",
        summary: "A top-up's state",
        security: bearerAuth,
        params: TopupParams,
        response: responses(TopupData),
      },
    },
    async (request) => ok(await getTopup(ctx.db, request.caller, request.params.id)),
  );
};

/** What a top-up needs from the process: the database, the provider and the paying card. */
function airtimeDeps(app: FastifyInstance, ctx: AppContext): AirtimeDeps {
  return {
    db: ctx.db,
    provider: ctx.rails.airtime,
    findPayingCard: (caller, cardRef) => resolveActiveCard(ctx, caller, cardRef),
    lockPayingCard: lockActiveCard,
    warn: (message, detail) => app.log.warn(detail, message),
  };
}

/** Airtime (4.9): the product catalog, top-ups and their state. */
export function registerAirtimeRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [listAirtimeProductsRoute, createAirtimeTopupRoute, getAirtimeTopupRoute])
    operation(app, ctx);
}

/**
 * A JSON number as decimal text, never in exponent form: 1e21 is "1000000000000000000000" (String
 * gives "1e+21"), 2.5e25 is "25000000000000000000000000", 1.5e-7 is "0.00000015". The body reader
 * has already refused any number a double does not hold exactly, so the double's shortest form is
 * the number the client wrote; its decimal point is moved as text, not through the double.
 */
export function decimalText(value: string | number): string {
  if (typeof value === "string") return value;
  const text = String(value);
  const match = /^(-?)([0-9]+)(?:\.([0-9]+))?e([+-][0-9]+)$/.exec(text);
  if (!match) return text;
  const [, sign = "", whole = "", fraction = "", exponent = "0"] = match;
  const digits = whole + fraction;
  const point = whole.length + Number(exponent);
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}`;
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}
