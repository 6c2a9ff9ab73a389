import { encryptFor } from "../../src/crypto/rsa.ts";
import { open } from "../../src/crypto/vault.ts";
import { call, expectOk, type Tenant } from "./api.ts";
import type { TestApp } from "./harness.ts";
import { cardholderBody } from "./people.ts";

/** Products, stock, cardholders and cards for tests, through the API wherever it exists. */
export interface ProductView {
  id: string;
  code: string;
  name: string;
  stock_cards: number;
  [field: string]: unknown;
}

export async function createProduct(
  t: TestApp,
  tenant: Tenant,
  overrides: Record<string, unknown> = {},
): Promise<ProductView> {
  const data = expectOk(
    await call<{ products: { detail: ProductView[] } }>(t.app, "POST", "/v1/products", {
      token: tenant.token,
      body: {
        name: "Débito Nómina",
        description: "Tarjeta de nómina",
        card_type: "PHYSICAL",
        bin: "53112233",
        affinity_group: "NOMINA",
        ...overrides,
      },
    }),
  );
  const product = data.products.detail[0];
  if (!product) throw new Error("no product in the response");
  return product;
}

export async function mintStock(
  t: TestApp,
  tenant: Tenant,
  productId: string,
  quantity: number,
): Promise<void> {
  expectOk(
    await call(t.app, "POST", `/v1/products/${productId}/stock`, { token: tenant.token, body: { quantity } }),
  );
}

/** A cardholder of `clientId` (default: the actor itself), registered by `actor` through the API. */
export async function createCardholder(t: TestApp, actor: Tenant, clientId?: string): Promise<string> {
  const data = expectOk(
    await call<{ cardholder: { id: string } }>(t.app, "POST", "/v1/cardholders", {
      token: actor.token,
      body: cardholderBody(clientId && clientId !== actor.clientId ? { client_id: clientId } : {}),
    }),
  );
  return data.cardholder.id;
}

export interface AssignedCard {
  id: string;
  accountId: string;
  cardholderId: string;
  productId: string;
  lastFour: string;
}

export function assignBody(cardholderId: string, productId: string, overrides: Record<string, unknown> = {}) {
  return {
    cardholder_id: cardholderId,
    product_id: productId,
    document_type: "INE",
    document_number: "IDMEX1234567890",
    observations: "",
    shipping_method: "B2B",
    delivery_type: "STANDARD",
    delivery_address: null,
    ...overrides,
  };
}

export async function assignCard(
  t: TestApp,
  tenant: Tenant,
  cardholderId: string,
  productId: string,
): Promise<AssignedCard> {
  const data = expectOk(
    await call<{ card: { id: string; last_four: string }; account: { id: string } }>(
      t.app,
      "PUT",
      "/v1/cards",
      {
        token: tenant.token,
        body: assignBody(cardholderId, productId),
      },
    ),
  );
  return {
    id: data.card.id,
    accountId: data.account.id,
    cardholderId,
    productId,
    lastFour: data.card.last_four,
  };
}

/** A tenant's product with stock, a cardholder and `count` assigned (and optionally active) cards. */
export async function cardsFor(
  t: TestApp,
  tenant: Tenant,
  count: number,
  options: { activate?: boolean; clientId?: string } = {},
): Promise<AssignedCard[]> {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, count);
  const cards: AssignedCard[] = [];
  for (let i = 0; i < count; i++) {
    const cardholderId = await createCardholder(t, tenant, options.clientId);
    const card = await assignCard(t, tenant, cardholderId, product.id);
    if (options.activate) {
      expectOk(
        await call(t.app, "POST", "/v1/cards/activate", {
          token: tenant.token,
          body: { card_number: card.id, latitude: 19.4326, longitude: -99.1332 },
        }),
      );
    }
    cards.push(card);
  }
  return cards;
}

/**
 * An ACTIVE card of `tenant` ready to spend: of a product with `commission` (pesos) on transfers,
 * holding `funds` (paid from the tenant's balance) and PIN 4821.
 */
export async function spendableCard(
  t: TestApp,
  tenant: Tenant,
  options: { commission: number; funds: number },
): Promise<AssignedCard> {
  const product = await createProduct(t, tenant, { transfer_commission: options.commission });
  await mintStock(t, tenant, product.id, 1);
  const card = await assignCard(t, tenant, await createCardholder(t, tenant), product.id);
  const auth = { token: tenant.token };
  const where = { latitude: 19.4326, longitude: -99.1332 };
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", { ...auth, body: { card_number: card.id, ...where } }),
  );
  if (options.funds > 0) {
    expectOk(
      await call(t.app, "POST", "/v1/cards/payment", {
        ...auth,
        body: { card_number: card.id, amount: options.funds, payment_description: "fondeo", ...where },
      }),
    );
  }
  const pin = encryptFor(t.ctx.systemKey.publicKeyPem, "4821");
  expectOk(await call(t.app, "PUT", "/v1/cards/pin", { ...auth, body: { card_number: card.id, pin } }));
  return card;
}

/** The card's number, read back from the vault (tests only: nothing in Emisor returns it). */
export async function panOf(t: TestApp, cardId: string): Promise<string> {
  const row = await t.ctx.db
    .selectFrom("cards")
    .select("pan_sealed")
    .where("id", "=", cardId)
    .executeTakeFirstOrThrow();
  return open(t.ctx.keys.vault, row.pan_sealed, cardId);
}
