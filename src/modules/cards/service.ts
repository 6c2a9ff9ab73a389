import { randomUUID } from "node:crypto";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Tx } from "../../db/database.ts";
import type { CardStatus } from "../../db/schema.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { decodeCursor, instantIdPage, invalidCursor, isCursorPage, keysetPage } from "../../http/cursor.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { createAccount } from "../../ledger/ledger.ts";
import { toPesos } from "../../ledger/money.ts";
import { findClientInScope } from "../clients/repository.ts";
import { emitEvent } from "../events/outbox.ts";
import { findVisibleProduct, type ProductRow } from "../products/repository.ts";
import { type CardRef, maskedCardNumber, parseCardNumber } from "./card-number.ts";
import { expirationOf, isExpired } from "./expiry.ts";
import * as repo from "./repository.ts";
import type { AssignCardBody, ChangeStatusBody } from "./schemas.ts";
import { sensitiveCardData } from "./sensitive.ts";

/** The card summary most card responses share. */
export function presentCard(card: Pick<repo.CardRecord, "id" | "status" | "last_four" | "card_type">) {
  return {
    id: card.id,
    type: card.card_type,
    status: card.status,
    masked_card_number: maskedCardNumber(card.last_four),
    last_four: card.last_four,
  };
}

export async function cardOrThrow(tx: Tx | AppContext["db"], caller: Caller, ref: CardRef, lock = false) {
  const card = await repo.findCardInScope(tx, caller.clientId, ref, { lock });
  if (!card) throw new AppError(errors.cardNotFound);
  return card;
}

/** Contract 4.5: takes a card from the product's stock and gives it to the cardholder. */
export async function assignCard(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof AssignCardBody>,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  return runIdempotent(ctx.db, idempotency, async (tx) => {
    const { cardholder, product } = await assignmentParties(tx, caller, body);
    // A virtual card is not shipped: its shipping fields name no address, and need none on file.
    const address = product.card_type === "PHYSICAL" ? await deliveryAddress(tx, body, cardholder) : null;
    const stock = await repo.takeStockCard(tx, product.id);
    if (!stock) throw new AppError(errors.stockEmpty);
    const assignment: Assignment = {
      caller,
      body,
      cardholder,
      product,
      stock,
      now: new Date(),
      accountId: randomUUID(),
      status: product.card_type === "VIRTUAL" ? "ACTIVE" : "NEED_ACTIVATION",
    };
    const account = await writeAssignment(tx, assignment, address);
    const data = assignedData(assignment, account);
    await emitEvent(tx, { type: "card.assigned", clientId: cardholder.client_id, data });
    return data;
  });
}

/** A card being assigned: who, from which product, which stock card, and when. */
interface Assignment {
  caller: Caller;
  body: Static<typeof AssignCardBody>;
  cardholder: repo.CardholderForAssignment;
  product: ProductRow;
  stock: { id: string; last_four: string };
  now: Date;
  accountId: string;
  status: CardStatus;
}

/** The cardholder and the product, in the caller's scope, the product active and allowing the holder. */
async function assignmentParties(tx: Tx, caller: Caller, body: Static<typeof AssignCardBody>) {
  const cardholder = await repo.findCardholderInScope(tx, caller.clientId, body.cardholder_id);
  if (!cardholder) throw new AppError(errors.cardholderNotFound);
  const product = await findVisibleProduct(tx, caller.clientId, body.product_id);
  if (!product) throw new AppError(errors.productNotFound);
  if (product.status !== "ACTIVE") throw new AppError(errors.productInactive);
  // A blank rfc (curp) was allowed by some product; this one must allow it too.
  for (const [field, blank, allowed] of [
    ["rfc", cardholder.rfc === null, product.allow_blank_rfc],
    ["curp", cardholder.curp === null, product.allow_blank_curp],
  ] as const) {
    if (blank && !allowed) {
      throw new AppError(errors.cardholderIdentityMissing, {
        message: `The product requires the cardholder's ${field}, which is blank`,
      });
    }
  }
  return { cardholder, product };
}

/** The account, the card given to the cardholder, its ledger account, its shipment, its history. */
async function writeAssignment(tx: Tx, a: Assignment, address: Record<string, string | null> | null) {
  const { body, cardholder, now, status } = a;
  const account = await tx
    .insertInto("accounts")
    .values({
      id: a.accountId,
      cardholder_id: cardholder.id,
      client_id: cardholder.client_id,
      product_id: a.product.id,
      document_type: body.document_type,
      document_number: body.document_number,
      observations: body.observations,
      assigned_by_api_key_id: a.caller.apiKeyId,
      activation_date: status === "ACTIVE" ? now : null,
      created_at: now,
    })
    .returning(["reference", "clabe"])
    .executeTakeFirstOrThrow();
  await tx
    .updateTable("cards")
    .set({
      status,
      client_id: cardholder.client_id,
      cardholder_id: cardholder.id,
      account_id: a.accountId,
      assigned_at: now,
      activated_at: status === "ACTIVE" ? now : null,
      updated_at: now,
    })
    .where("id", "=", a.stock.id)
    .execute();
  // The card's balance: a ledger account with the card's own id, owned by the cardholder's client.
  await createAccount(tx, { id: a.stock.id, kind: "CARD", clientId: cardholder.client_id });
  if (address) {
    await tx
      .insertInto("card_shipments")
      .values({
        id: randomUUID(),
        card_id: a.stock.id,
        shipping_method: body.shipping_method,
        delivery_type: body.delivery_type,
        address: JSON.stringify(address),
      })
      .execute();
  }
  await repo.recordStatusChange(tx, {
    cardId: a.stock.id,
    from: "NOT_ASSIGNED",
    to: status,
    reason: "assigned",
    latitude: null,
    longitude: null,
    apiKeyId: a.caller.apiKeyId,
  });
  return account;
}

/** The 4.5 answer, which the `card.assigned` event carries too. */
function assignedData(a: Assignment, account: { reference: string; clabe: string | null }) {
  const { cardholder, product, stock, now } = a;
  return {
    cardholder: {
      id: cardholder.id,
      first_name: cardholder.first_name,
      second_name: cardholder.second_name ?? "",
      surname: cardholder.surname,
      second_surname: cardholder.second_surname ?? "",
      rfc: cardholder.rfc,
      curp: cardholder.curp,
    },
    card: {
      id: stock.id,
      type: product.card_type,
      status: a.status,
      last_four: stock.last_four,
      assignation_timestamp: now.toISOString(),
    },
    account: {
      id: a.accountId,
      reference: account.reference,
      clabe: account.clabe,
      assignation_timestamp: now.toISOString(),
    },
    product: { id: product.id, code: product.code, name: product.name },
  };
}

/** B2B: the cardholder's address; B2C: the client's; CUSTOM: the one given. */
async function deliveryAddress(
  tx: Tx,
  body: Static<typeof AssignCardBody>,
  cardholder: repo.CardholderForAssignment,
): Promise<Record<string, string | null>> {
  if (body.shipping_method === "B2B") return cardholder.address;
  if (body.shipping_method === "B2C") {
    const address = await repo.findClientAddress(tx, cardholder.client_id);
    if (!address) throw new AppError(errors.clientAddressMissing);
    return address;
  }
  if (!body.delivery_address) {
    throw invalidField("delivery_address", "required", "is required when shipping_method is CUSTOM");
  }
  return { int_street_number: null, ...body.delivery_address };
}

interface Location {
  latitude: number;
  longitude: number;
}

/**
 * The ACTIVE card `ref` names (parsed from a UUID or a ciphered number) in the caller's subtree, for
 * operations that spend from a card (transfers out, airtime): 404 unknown, 5304 canceled, 5307
 * any other status (a NEED_ACTIVATION card can receive money but not spend it).
 */
export async function resolveActiveCard(ctx: AppContext, caller: Caller, ref: CardRef) {
  return activeOrThrow(await cardOrThrow(ctx.db, caller, ref));
}

/**
 * The same card read again under a row lock inside the operation's transaction: a card blocked
 * or canceled since `resolveActiveCard` (while its PIN was checked, or a provider was chosen) is
 * refused, and cannot be blocked until the spending commits.
 */
export async function lockActiveCard(tx: Tx, caller: Caller, cardId: string) {
  return activeOrThrow(await cardOrThrow(tx, caller, { id: cardId }, true));
}

export function activeOrThrow<T extends repo.CardRecord>(card: T): T {
  if (card.status === "CANCELED") throw new AppError(errors.cardCanceled);
  if (card.status !== "ACTIVE") throw new AppError(errors.cardNotActive);
  if (isExpired(card.expires_on)) throw new AppError(errors.cardExpired);
  return card;
}

/** POST /v1/cards/activate: NEED_ACTIVATION -> ACTIVE, once. */
export async function activateCard(ctx: AppContext, caller: Caller, cardNumber: string, location: Location) {
  const ref = await parseCardNumber(ctx, cardNumber);
  return ctx.db.transaction().execute(async (tx) => {
    const card = await cardOrThrow(tx, caller, ref, true);
    if (card.status === "ACTIVE") throw new AppError(errors.cardAlreadyActive);
    if (card.status === "CANCELED") throw new AppError(errors.cardCanceled);
    if (card.status !== "NEED_ACTIVATION")
      throw new AppError(errors.cardTransitionNotAllowed, {
        message: `A ${card.status} card cannot be activated; unblock it with PUT /v1/cards/status`,
      });
    if (isExpired(card.expires_on)) throw new AppError(errors.cardExpired);
    const now = new Date();
    await tx
      .updateTable("cards")
      .set({ status: "ACTIVE", activated_at: now, updated_at: now })
      .where("id", "=", card.id)
      .execute();
    await tx
      .updateTable("accounts")
      .set({ activation_date: now })
      .where("id", "=", card.account_id)
      .where("activation_date", "is", null)
      .execute();
    await repo.recordStatusChange(tx, {
      cardId: card.id,
      from: card.status,
      to: "ACTIVE",
      reason: "activated",
      ...location,
      apiKeyId: caller.apiKeyId,
    });
    const data = {
      card: { ...presentCard({ ...card, status: "ACTIVE" }), activation_date: now.toISOString() },
    };
    await emitEvent(tx, { type: "card.activated", clientId: card.client_id, data });
    return data;
  });
}

/** Which status changes PUT /v1/cards/status allows: blocks, unblocks and cancellation. */
const allowedTransitions: Record<CardStatus, readonly CardStatus[]> = {
  NOT_ASSIGNED: [],
  NEED_ACTIVATION: ["CANCELED"],
  ACTIVE: ["TEMPORARY_INACTIVE", "CANCELED"],
  TEMPORARY_INACTIVE: ["ACTIVE", "CANCELED"],
  CANCELED: [],
};

/** PUT /v1/cards/status: ACTIVE <-> TEMPORARY_INACTIVE, or CANCELED (terminal). */
export async function changeCardStatus(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof ChangeStatusBody>,
) {
  const ref = await parseCardNumber(ctx, body.card_number);
  return ctx.db.transaction().execute(async (tx) => {
    const card = await cardOrThrow(tx, caller, ref, true);
    const to = body.status;
    if (card.status === "CANCELED") throw new AppError(errors.cardCanceled);
    if (card.status === to) throw new AppError(errors.cardStatusUnchanged);
    if (!allowedTransitions[card.status].includes(to)) {
      throw new AppError(errors.cardTransitionNotAllowed, {
        message:
          card.status === "NEED_ACTIVATION" && to === "ACTIVE"
            ? "A NEED_ACTIVATION card becomes ACTIVE with POST /v1/cards/activate"
            : `A ${card.status} card cannot become ${to}`,
      });
    }
    // Blocking and canceling an expired card still work; unblocking it would give back an ACTIVE
    // card that nothing can use.
    if (to === "ACTIVE" && isExpired(card.expires_on)) throw new AppError(errors.cardExpired);
    const now = new Date();
    const reason = body.reason ?? null;
    await tx
      .updateTable("cards")
      .set({
        status: to,
        status_reason: reason,
        updated_at: now,
        ...(to === "CANCELED" ? { canceled_at: now } : {}),
      })
      .where("id", "=", card.id)
      .execute();
    await repo.recordStatusChange(tx, {
      cardId: card.id,
      from: card.status,
      to,
      reason,
      latitude: body.latitude,
      longitude: body.longitude,
      apiKeyId: caller.apiKeyId,
    });
    const data = {
      card: presentCard({ ...card, status: to }),
      previous_status: card.status,
      reason,
      cancellation_timestamp: to === "CANCELED" ? now.toISOString() : null,
    };
    await emitEvent(tx, { type: "card.status_changed", clientId: card.client_id, data });
    return data;
  });
}

/**
 * A card's money as the API shows it: `available` to spend (its account less what it owes, never
 * below zero), `held` by pending authorizations, `owed`, and `balance`: its account plus its holds
 * less what it owes (so available + held while the card owes less than it holds).
 */
export function cardBalances(money: { balance_cents: bigint; held_cents: bigint; owed_cents: bigint }) {
  const available = money.balance_cents > money.owed_cents ? money.balance_cents - money.owed_cents : 0n;
  return {
    balance: toPesos(money.balance_cents + money.held_cents - money.owed_cents),
    available: toPesos(available),
    held: toPesos(money.held_cents),
    owed: toPesos(money.owed_cents),
  };
}

/** GET /v1/cards/{id}: status, masked number, balance. */
export async function getCard(ctx: AppContext, caller: Caller, id: string) {
  const card = await cardOrThrow(ctx.db, caller, { id });
  const money = await repo.cardMoney(ctx.db, card.id);
  return {
    card: {
      ...presentCard(card),
      expiration: expirationOf(card.expires_on),
      ...cardBalances(money),
      product: { id: card.product_id, code: card.product_code, name: card.product_name },
      cardholder_id: card.cardholder_id,
      account: { id: card.account_id, reference: card.account_reference },
      assignation_date: card.assigned_at.toISOString(),
      activation_date: card.activated_at?.toISOString() ?? null,
      cancellation_timestamp: card.canceled_at?.toISOString() ?? null,
      status_reason: card.status_reason,
      pin_set: card.pin_hash !== null,
      pin_locked: card.pin_locked,
    },
  };
}

/**
 * GET /v1/cards/{id}/sensitive_data: the card's number, expiry and CVV ciphered under the calling
 * API key's public key (5101 without one). A canceled card's are not given (5304).
 */
export async function revealCard(ctx: AppContext, caller: Caller, id: string) {
  const card = await cardOrThrow(ctx.db, caller, { id });
  if (card.status === "CANCELED") throw new AppError(errors.cardCanceled);
  return { card: presentCard(card), sensitive_data: await sensitiveCardData(ctx, caller, card) };
}

/**
 * GET /v1/cards/{id}/movements: the card's ledger postings, newest first. Paged by `page` or by
 * `cursor` (the previous page's `next_cursor`, which wins): a cursor is the position of the last
 * movement given, so movements posted while a client pages (newer, at the top) shift nothing.
 */
export async function cardMovements(
  ctx: AppContext,
  caller: Caller,
  id: string,
  query: { page: number; perPage: number; cursor?: string | undefined },
) {
  const listing = [id, query.perPage];
  const cursor = query.cursor === undefined ? undefined : movementsCursor(query.cursor, listing);
  const card = await cardOrThrow(ctx.db, caller, { id });
  const page = cursor ? cursor.page + 1 : query.page;
  const { total, rows } = await repo.listMovements(await ctx.listings.reader(), card.id, {
    limit: query.perPage + 1,
    offset: (page - 1) * query.perPage,
    before: cursor?.before,
  });
  const { items, nextCursor } = keysetPage(
    rows,
    query.perPage,
    (last) => ({ i: String(last.id), p: page }),
    listing,
  );
  return {
    card: presentCard(card),
    movements: {
      items: items.map((row) => ({
        id: String(row.id),
        entry_id: row.entry_id,
        type: row.amount_cents > 0n ? "CREDIT" : "DEBIT",
        kind: row.kind,
        amount: toPesos(row.amount_cents > 0n ? row.amount_cents : -row.amount_cents),
        description: row.description,
        created_at: row.created_at.toISOString(),
      })),
      page,
      per_page: query.perPage,
      pages: Math.ceil(total / query.perPage),
      total,
      next_cursor: nextCursor,
    },
  };
}

const bigintMax = 2n ** 63n - 1n;

/** A movements cursor: the id of the last posting given and the page it was on. */
function movementsCursor(text: string, listing: readonly (string | number)[]) {
  const { i, p } = decodeCursor(
    text,
    listing,
    "was returned for another card or another per_page: pass it with the query that returned it",
  );
  if (typeof i !== "string" || !/^[1-9][0-9]{0,18}$/.test(i) || !isCursorPage(p)) throw invalidCursor();
  const before = BigInt(i);
  if (before > bigintMax) throw invalidCursor();
  return { before, page: p };
}

export interface ListCardsQuery {
  status?: string | undefined;
  cardholder_id?: string | undefined;
  product_id?: string | undefined;
  client_id?: string | undefined;
  cursor?: string | undefined;
  perPage: number;
}

/**
 * GET /v1/cards: the assigned cards of the caller's subtree, newest assignment first, paged by
 * keyset: `next_cursor` is the position (assigned_at, id) of the last card given, bound to the
 * caller, the filters and per_page. A card assigned while a client pages is newer than every
 * position already given, so it shifts nothing and is not given in that walk. A filter naming a
 * client, cardholder or product outside the subtree is that resource's not found, as GET
 * /v1/events does with client_id.
 */
/** The clients, cardholders and products a card listing names are in the caller's subtree. */
async function checkListingFilters(ctx: AppContext, caller: Caller, query: ListCardsQuery): Promise<void> {
  if (query.client_id && !(await findClientInScope(ctx.db, caller.clientId, query.client_id)))
    throw new AppError(errors.clientNotFound);
  if (
    query.cardholder_id &&
    !(await repo.findCardholderInScope(ctx.db, caller.clientId, query.cardholder_id))
  )
    throw new AppError(errors.cardholderNotFound);
  if (query.product_id && !(await repo.productSeenBySubtree(ctx.db, caller.clientId, query.product_id)))
    throw new AppError(errors.productNotFound);
}

export async function listCards(ctx: AppContext, caller: Caller, query: ListCardsQuery) {
  const statuses = query.status ? ([...new Set(query.status.split(","))].sort() as CardStatus[]) : undefined;
  const listing = [
    caller.clientId,
    statuses?.join(",") ?? "",
    query.cardholder_id ?? "",
    query.product_id ?? "",
    query.client_id ?? "",
    query.perPage,
  ];
  const { items, nextCursor } = await instantIdPage(
    query,
    listing,
    async (before, limit) => {
      await checkListingFilters(ctx, caller, query);
      return repo.listCardsInScope(ctx.db, caller.clientId, {
        statuses,
        cardholderId: query.cardholder_id,
        productId: query.product_id,
        clientId: query.client_id,
        before,
        limit,
      });
    },
    (row) => row.assigned_at_text,
  );
  return {
    cards: {
      items: items.map((row) => ({
        ...presentCard(row),
        expiration: expirationOf(row.expires_on),
        ...cardBalances(row),
        product: { id: row.product_id, code: row.product_code, name: row.product_name },
        cardholder_id: row.cardholder_id,
        client_id: row.client_id,
        account: { id: row.account_id, reference: row.account_reference },
        assignation_date: row.assigned_at.toISOString(),
        activation_date: row.activated_at?.toISOString() ?? null,
      })),
      per_page: query.perPage,
      next_cursor: nextCursor,
    },
  };
}
