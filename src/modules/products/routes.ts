import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, pageOf, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import {
  CreateProductBody,
  MintStockBody,
  ProductClientParams,
  ProductListQuery,
  ProductParams,
  ProductsData,
} from "./schemas.ts";
import { assignProductToClient, createProduct, getProduct, listProducts, mintStock } from "./service.ts";

const tags = ["products"];
const createProductRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof CreateProductBody> }>(
    "/v1/products",
    {
      config: { idempotent: true },
      schema: {
        tags,
        operationId: "createProduct",
        summary: "Create a card product",
        description: "Country 484 and currency 484 (MXN). The product starts ACTIVE with an empty stock.",
        security: bearerAuth,
        body: CreateProductBody,
        response: responses(ProductsData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await createProduct(ctx, request.caller, request.body, request.idempotency)),
  );
};

const mintProductStockRoute: Operation = (app, ctx) => {
  app.post<{ Params: Static<typeof ProductParams>; Body: Static<typeof MintStockBody> }>(
    "/v1/products/:id/stock",
    {
      config: { idempotent: true },
      schema: {
        tags,
        operationId: "mintProductStock",
        summary: "Mint cards into the product's stock",
        description: `Only the product's creator; 1-${limits.stockMintMax} cards per request, status NOT_ASSIGNED.`,
        security: bearerAuth,
        params: ProductParams,
        body: MintStockBody,
        response: responses(Type.Object({ minted: Type.Integer(), ...ProductsData.properties })),
      },
    },
    async (request, reply) =>
      sendResult(
        reply,
        await mintStock(ctx, request.caller, request.params.id, request.body.quantity, request.idempotency),
      ),
  );
};

const assignProductRoute: Operation = (app, ctx) => {
  app.put<{ Params: Static<typeof ProductClientParams> }>(
    "/v1/products/:id/clients/:client_id",
    {
      schema: {
        tags,
        operationId: "assignProduct",
        summary: "Make a product you created available to one of your sub-clients",
        security: bearerAuth,
        params: ProductClientParams,
        response: responses(Type.Object({ client_id: Type.String(), ...ProductsData.properties })),
      },
    },
    async (request) =>
      ok(await assignProductToClient(ctx, request.caller, request.params.id, request.params.client_id)),
  );
};

const listProductsRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: Static<typeof ProductListQuery> }>(
    "/v1/products",
    {
      schema: {
        tags,
        operationId: "listProducts",
        summary: "List the products you created or that were assigned to you (contract 4.7)",
        security: bearerAuth,
        querystring: ProductListQuery,
        response: responses(ProductsData),
      },
    },
    async (request) => {
      const { page, perPage } = pageOf(request.query, { cursor: false });
      return ok(await listProducts(ctx, request.caller, page, perPage));
    },
  );
};

const getProductRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof ProductParams> }>(
    "/v1/products/:id",
    {
      schema: {
        tags,
        operationId: "getProduct",
        summary: "Get one product (contract 4.7)",
        security: bearerAuth,
        params: ProductParams,
        response: responses(ProductsData),
      },
    },
    async (request) => ok(await getProduct(ctx, request.caller, request.params.id)),
  );
};

export function registerProductRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    createProductRoute,
    mintProductStockRoute,
    assignProductRoute,
    listProductsRoute,
    getProductRoute,
  ])
    operation(app, ctx);
}
