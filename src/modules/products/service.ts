import { randomUUID } from "node:crypto";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { fingerprint, seal } from "../../crypto/vault.ts";
import type { Tx } from "../../db/database.ts";
import { randomPan } from "../../domain/luhn.ts";
import { mexicoCityToday } from "../../domain/spei.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { currencyDescription, parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { findClientInScope } from "../clients/repository.ts";
import * as repo from "./repository.ts";
import type { CreateProductBody, Product } from "./schemas.ts";

type ProductView = Static<typeof Product>;

/** Contract 2.6 for a product row. */
export function presentProduct(row: repo.ProductRow): ProductView {
  return {
    id: row.id,
    code: row.code,
    name: row.name,
    description: row.description,
    country: { code: row.country_code, description: "México" },
    coin: { code: row.currency_code, description: currencyDescription },
    type: { key: row.card_type, value: row.card_type === "PHYSICAL" ? "Física" : "Virtual" },
    status: { key: row.status, value: row.status === "ACTIVE" ? "Activo" : "Inactivo" },
    affinity_group: row.affinity_group,
    stock_cards: Number(row.stock_cards),
    allow_blank_curp: row.allow_blank_curp,
    allow_blank_rfc: row.allow_blank_rfc,
    bin: row.bin,
    transfer_commission: toPesos(row.transfer_commission_cents),
    card_validity_months: row.card_validity_months,
  };
}

async function visibleOrThrow(
  db: AppContext["db"] | Tx,
  caller: Caller,
  id: string,
): Promise<repo.ProductRow> {
  const product = await repo.findVisibleProduct(db, caller.clientId, id);
  if (!product) throw new AppError(errors.productNotFound);
  return product;
}

export async function createProduct(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof CreateProductBody>,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const commission = parsePesos(body.transfer_commission ?? 0, "transfer_commission", {
    maxCents: limits.amountCentsMax,
    allowZero: true,
  });
  return runIdempotent(ctx.db, idempotency, async (tx) => {
    const id = randomUUID();
    await repo.insertProduct(tx, {
      id,
      owner_client_id: caller.clientId,
      name: body.name,
      description: body.description,
      card_type: body.card_type,
      bin: body.bin,
      affinity_group: body.affinity_group,
      allow_blank_curp: body.allow_blank_curp ?? false,
      allow_blank_rfc: body.allow_blank_rfc ?? false,
      transfer_commission_cents: commission,
      card_validity_months: body.card_validity_months ?? 36,
    });
    const product = await visibleOrThrow(tx, caller, id);
    return { products: { total: 1, detail: [presentProduct(product)] } };
  });
}

export async function getProduct(ctx: AppContext, caller: Caller, id: string) {
  const product = await visibleOrThrow(ctx.db, caller, id);
  return { products: { total: 1, detail: [presentProduct(product)] } };
}

export async function listProducts(ctx: AppContext, caller: Caller, page: number, perPage: number) {
  const { total, rows } = await repo.listVisibleProducts(ctx.db, caller.clientId, {
    limit: perPage,
    offset: (page - 1) * perPage,
  });
  return { products: { total, detail: rows.map(presentProduct) } };
}

/**
 * The last day of the month `months` from this one (Mexico City's calendar, as the expiry is
 * judged): cards expire at the end of a month.
 */
function expiryDate(months: number): string {
  const today = mexicoCityToday();
  const end = new Date(Date.UTC(Number(today.slice(0, 4)), Number(today.slice(5, 7)) - 1 + months + 1, 0));
  return end.toISOString().slice(0, 10);
}

/**
 * Mints `quantity` cards into the product's stock: random Luhn-valid PANs from the BIN, each
 * sealed with AES-256-GCM (bound to the card id) and fingerprinted; a PAN that collides with an
 * existing one (the unique fingerprint) is drawn again.
 */
export async function mintStock(
  ctx: AppContext,
  caller: Caller,
  productId: string,
  quantity: number,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  return runIdempotent(ctx.db, idempotency, async (tx) => {
    const product = await visibleOrThrow(tx, caller, productId);
    if (product.owner_client_id !== caller.clientId) throw new AppError(errors.productNotOwned);
    if (product.status !== "ACTIVE") throw new AppError(errors.productInactive);
    const expiresOn = expiryDate(product.card_validity_months);
    let minted = 0;
    for (let round = 0; minted < quantity && round < 10; round++) {
      for (let start = minted; start < quantity; start += 500) {
        minted += await insertCards(ctx, tx, product, Math.min(500, quantity - start), expiresOn);
      }
    }
    // Numbers are unique across every product on the BIN (an 8-digit BIN has 10^7): one nearly
    // used up fails the draws, and the transaction rolls back what was minted.
    if (minted < quantity) throw new AppError(errors.binExhausted);
    const after = await visibleOrThrow(tx, caller, productId);
    return { minted, products: { total: 1, detail: [presentProduct(after)] } };
  });
}

async function insertCards(
  ctx: AppContext,
  tx: Tx,
  product: repo.ProductRow,
  count: number,
  expiresOn: string,
) {
  const rows = Array.from({ length: count }, () => {
    const id = randomUUID();
    const pan = randomPan(product.bin);
    return {
      id,
      product_id: product.id,
      pan_sealed: seal(ctx.keys.vault, pan, id),
      pan_fingerprint: fingerprint(ctx.keys.fingerprint, pan),
      last_four: pan.slice(-4),
      expires_on: expiresOn,
    };
  });
  const inserted = await tx
    .insertInto("cards")
    .values(rows)
    .onConflict((oc) => oc.column("pan_fingerprint").doNothing())
    .returning("id")
    .execute();
  return inserted.length;
}

/** Makes a product the caller created available to a client of its subtree. */
export async function assignProductToClient(
  ctx: AppContext,
  caller: Caller,
  productId: string,
  clientId: string,
) {
  return ctx.db.transaction().execute(async (tx) => {
    const product = await visibleOrThrow(tx, caller, productId);
    if (product.owner_client_id !== caller.clientId) throw new AppError(errors.productNotOwned);
    if (clientId === caller.clientId)
      throw invalidField("client_id", "sub_client", "must be one of your sub-clients");
    const client = await findClientInScope(tx, caller.clientId, clientId);
    if (!client) throw new AppError(errors.clientNotFound);
    await repo.assignProduct(tx, productId, clientId, caller.clientId);
    return { client_id: clientId, products: { total: 1, detail: [presentProduct(product)] } };
  });
}
