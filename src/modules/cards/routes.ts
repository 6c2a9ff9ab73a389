import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { noStore, ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, NoStoreHeader, OrNull, pageOf, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import { setPin } from "./pin.ts";
import {
  ActivateBody,
  AssignCardBody,
  AssignCardData,
  CardDetail,
  CardListData,
  CardParams,
  CardSummary,
  ChangeStatusBody,
  ListCardsQuery,
  MovementsData,
  MovementsQuery,
  SensitiveCardData,
  SetPinBody,
  UnloadBody,
  UnloadData,
} from "./schemas.ts";
import {
  activateCard,
  assignCard,
  cardMovements,
  changeCardStatus,
  getCard,
  listCards,
  revealCard,
} from "./service.ts";
import { unloadCard } from "./unload.ts";

const tags = ["cards"];
const assignCardRoute: Operation = (app, ctx) => {
  app.put<{ Body: Static<typeof AssignCardBody> }>(
    "/v1/cards",
    {
      config: { idempotent: true },
      schema: {
        tags,
        operationId: "assignCard",
        summary: "Assign a card from a product's stock to a cardholder (contract 4.5)",
        description:
          "Delivery address: B2B the cardholder's, B2C the client's, CUSTOM delivery_address (required then; ignored otherwise). Physical cards start NEED_ACTIVATION; virtual cards start ACTIVE and are not shipped.",
        security: bearerAuth,
        body: AssignCardBody,
        response: responses(AssignCardData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await assignCard(ctx, request.caller, request.body, request.idempotency)),
  );
};

const activateCardRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof ActivateBody> }>(
    "/v1/cards/activate",
    {
      schema: {
        tags,
        operationId: "activateCard",
        summary: "Activate a card: NEED_ACTIVATION -> ACTIVE, once",
        security: bearerAuth,
        body: ActivateBody,
        response: responses(
          Type.Object({ card: Type.Object({ ...CardSummary.properties, activation_date: Type.String() }) }),
        ),
      },
    },
    async (request) => {
      const { card_number, latitude, longitude } = request.body;
      return ok(await activateCard(ctx, request.caller, card_number, { latitude, longitude }));
    },
  );
};

const updateCardStatusRoute: Operation = (app, ctx) => {
  app.put<{ Body: Static<typeof ChangeStatusBody> }>(
    "/v1/cards/status",
    {
      schema: {
        tags,
        operationId: "updateCardStatus",
        summary: "Block, unblock or cancel a card",
        description:
          "ACTIVE <-> TEMPORARY_INACTIVE; ACTIVE, TEMPORARY_INACTIVE or NEED_ACTIVATION -> CANCELED (terminal). Anything else is 422 with its own code.",
        security: bearerAuth,
        body: ChangeStatusBody,
        response: responses(
          Type.Object({
            card: CardSummary,
            previous_status: Type.String(),
            reason: OrNull(Type.String()),
            cancellation_timestamp: OrNull(Type.String()),
          }),
        ),
      },
    },
    async (request) => ok(await changeCardStatus(ctx, request.caller, request.body)),
  );
};

const setCardPinRoute: Operation = (app, ctx) => {
  app.put<{ Body: Static<typeof SetPinBody> }>(
    "/v1/cards/pin",
    {
      schema: {
        tags,
        operationId: "setCardPin",
        summary: "Set an ACTIVE card's PIN (ciphered; stored only as a salted, peppered hash)",
        security: bearerAuth,
        body: SetPinBody,
        response: responses(Type.Object({ card: CardSummary, pin_set: Type.Boolean() })),
      },
    },
    async (request) => ok(await setPin(ctx, request.caller, request.body.card_number, request.body.pin)),
  );
};

const unloadCardRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof UnloadBody> }>(
    "/v1/cards/unload",
    {
      // The card number may be ciphered: the service completes the key's fingerprint with the card
      // it names (IdempotencyDraft), as a payment does.
      config: { idempotent: true, cipheredFields: ["card_number"], rateLimited: true },
      schema: {
        tags,
        operationId: "unloadCard",
        summary: "Move money from a card back to its client's main balance",
        description:
          "The card's client (you or a sub-client) gets the money in its main balance, whoever calls. Any status: NEED_ACTIVATION, ACTIVE, TEMPORARY_INACTIVE, CANCELED, and expired cards. Without amount, the card's whole balance. More than the balance: 5403; a balance of 0.00: 5404. A refusal moves nothing (under an Idempotency-Key it is stored as the key's answer).",
        security: bearerAuth,
        body: UnloadBody,
        response: responses(UnloadData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await unloadCard(ctx, request.caller, request.body, request.idempotencyDraft)),
  );
};

const listCardsRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: Static<typeof ListCardsQuery> }>(
    "/v1/cards",
    {
      schema: {
        tags,
        operationId: "listCards",
        summary: "Your cards and your sub-clients', newest assignment first",
        description:
          "Assigned cards only (stock belongs to its product). Filter by status (comma-separated), cardholder_id, product_id and client_id; page with cursor = the previous page's next_cursor, with the same filters and per_page. Never the card number nor the CVV.",
        security: bearerAuth,
        querystring: ListCardsQuery,
        response: responses(CardListData),
      },
    },
    async (request) => {
      const { per_page, ...filters } = request.query;
      return ok(
        await listCards(ctx, request.caller, { ...filters, perPage: per_page ?? limits.pageSizeDefault }),
      );
    },
  );
};

const getCardRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof CardParams> }>(
    "/v1/cards/:id",
    {
      schema: {
        tags,
        operationId: "getCard",
        summary: "A card: status, masked number, balance",
        security: bearerAuth,
        params: CardParams,
        response: responses(CardDetail),
      },
    },
    async (request) => ok(await getCard(ctx, request.caller, request.params.id)),
  );
};

const getCardSensitiveDataRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof CardParams> }>(
    "/v1/cards/:id/sensitive_data",
    {
      schema: {
        tags,
        operationId: "getCardSensitiveData",
        summary: "A card's number, expiry and CVV, ciphered under your public key",
        description:
          'sensitive_data is RSA-OAEP-SHA256 (Base64) under the public key registered for the calling API key (POST /v1/clients/api_key/public_key; 5101 without one) of the JSON text {"card_number":"16 digits","expiration":"MM/YY","cvv":"3 digits"}. The CVV is computed, never stored. Not for a canceled card (5304). Answered with Cache-Control: no-store.',
        security: bearerAuth,
        params: CardParams,
        response: responses(SensitiveCardData, { headers: NoStoreHeader }),
      },
    },
    async (request, reply) => {
      noStore(reply);
      return ok(await revealCard(ctx, request.caller, request.params.id));
    },
  );
};

const listCardMovementsRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof CardParams>; Querystring: Static<typeof MovementsQuery> }>(
    "/v1/cards/:id/movements",
    {
      schema: {
        tags,
        operationId: "listCardMovements",
        summary: "A card's ledger movements, newest first",
        security: bearerAuth,
        params: CardParams,
        querystring: MovementsQuery,
        response: responses(MovementsData),
      },
    },
    async (request) =>
      ok(
        await cardMovements(ctx, request.caller, request.params.id, {
          ...pageOf(request.query, { cursor: true }),
          cursor: request.query.cursor,
        }),
      ),
  );
};

export function registerCardRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    assignCardRoute,
    activateCardRoute,
    updateCardStatusRoute,
    setCardPinRoute,
    unloadCardRoute,
    listCardsRoute,
    getCardRoute,
    getCardSensitiveDataRoute,
    listCardMovementsRoute,
  ])
    operation(app, ctx);
}
