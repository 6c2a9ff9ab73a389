import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Db, Tx } from "../../db/database.ts";
import { completeRailJob, enqueueRailJob } from "../../db/rail-outbox.ts";
import type { SpeiOrderStatus } from "../../db/schema.ts";
import { maskCardNumbers } from "../../domain/luhn.ts";
import { mexicoCityToday, newTrackingKey, trackingKeyDate } from "../../domain/spei.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { systemAccounts } from "../../ledger/accounts.ts";
import type { BatchEntry } from "../../ledger/batch.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { InsufficientFundsError, type Posting, postEntry, reverseEntry } from "../../ledger/ledger.ts";
import { type Cents, ivaOf } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import type { SpeiRail, SpeiStateChange } from "../../rails/spei/port.ts";
import { SpeiSimulator } from "../../rails/spei/simulator.ts";
import { firstCharacters } from "../../text.ts";
import { emitEvent } from "../events/outbox.ts";
import type { Beneficiary } from "./beneficiary.ts";
import { storedBeneficiary } from "./beneficiary-card.ts";
import * as repo from "./repository.ts";
import { renderOrder, type SpeiOrderView } from "./views.ts";

/**
 * The transfer-out engine (contract 4.10 without its HTTP route, which needs cards): one
 * transaction debits the payer, credits SPEI_OUT, COMMISSION_REVENUE and IVA_PAYABLE, stores the
 * order with a fresh tracking key and queues it in the rail outbox. The dispatcher hands it to
 * the rail; the rail's asynchronous state changes settle it (LIQUIDADA) or return it (DEVUELTA,
 * CANCELADA), and a return reverses the whole debit.
 *
 * Fee policy on a return: everything comes back (amount, commission and IVA). The transfer did
 * not happen, so nothing was earned, and the IVA of a commission that is refunded is not owed.
 */
export interface SpeiOrderInput {
  /** The client that owns the paying account: tenancy of GET /v1/transfer/cards/{id}, and events. */
  clientId: string;
  /** The ledger account debited (a card's account). */
  payerAccountId: string;
  /** The paying card, recorded on the order for the 4.10 response and the order view. */
  cardId?: string | null;
  amountCents: Cents;
  /** The product's FLAT commission; IVA (16%, half-up) is computed here. */
  commissionCents: Cents;
  beneficiary: Beneficiary;
  /** Seals a beneficiary's card number (`beneficiary-card.ts`). */
  vaultKey: Buffer;
}

export interface SpeiOrder {
  id: string;
  trackingKey: string;
  operationDate: string;
  /** The ledger entry of the debit (the contract's reference_operation). */
  referenceOperation: string;
  amountCents: Cents;
  commissionCents: Cents;
  ivaCents: Cents;
  totalCents: Cents;
  status: SpeiOrderStatus;
  view: SpeiOrderView;
}

/** A transfer-out order decided and not yet written: its row, its ledger entry, its amounts. */
export interface PreparedSpeiOrder {
  row: repo.SpeiOrderRow;
  entry: BatchEntry;
  ivaCents: Cents;
  totalCents: Cents;
}

/**
 * Everything a new order writes, made now: the order (PENDIENTE, a fresh tracking key) and
 * its entry, which debits the payer amount + commission + IVA (16%, half-up) and credits SPEI_OUT,
 * the commission and the IVA.
 */
export function prepareSpeiOrder(input: SpeiOrderInput): PreparedSpeiOrder {
  assert.ok(input.amountCents > 0n && input.amountCents <= limits.amountCentsMax, "amount out of bounds");
  assert.ok(input.commissionCents >= 0n, "a commission cannot be negative");
  const ivaCents = ivaOf(input.commissionCents);
  const totalCents = input.amountCents + input.commissionCents + ivaCents;
  const id = randomUUID();
  const entryId = timeOrderedUuid();
  const now = new Date();
  const operationDate = mexicoCityToday();
  const b = input.beneficiary;
  const row: repo.SpeiOrderRow = {
    id,
    client_id: input.clientId,
    payer_account_id: input.payerAccountId,
    card_id: input.cardId ?? null,
    tracking_key: newTrackingKey(operationDate),
    operation_date: operationDate,
    amount_cents: input.amountCents,
    commission_cents: input.commissionCents,
    iva_cents: ivaCents,
    ...storedBeneficiary(input.vaultKey, id, b.account, b.accountType),
    beneficiary_account_type: b.accountType,
    beneficiary_institution: b.institution.key,
    beneficiary_name: b.name,
    beneficiary_rfc_curp: b.rfcCurp,
    beneficiary_email: b.email,
    payment_concept: b.paymentConcept,
    numeric_reference: b.numericReference,
    status: "PENDIENTE",
    rail_reference: null,
    state_detail: null,
    return_cause: null,
    entry_id: entryId,
    reversal_entry_id: null,
    sent_at: null,
    settled_at: null,
    returned_at: null,
    created_at: now,
    updated_at: now,
  };
  const postings: Posting[] = [
    { accountId: input.payerAccountId, amountCents: -totalCents },
    { accountId: systemAccounts.speiOut, amountCents: input.amountCents },
  ];
  if (input.commissionCents > 0n)
    postings.push({ accountId: systemAccounts.commissionRevenue, amountCents: input.commissionCents });
  if (ivaCents > 0n) postings.push({ accountId: systemAccounts.ivaPayable, amountCents: ivaCents });
  const entry: BatchEntry = {
    id: entryId,
    kind: "SPEI_OUT",
    description: "SPEI transfer out",
    clientId: input.clientId,
    metadata: { beneficiary_account_type: b.accountType },
    postings,
  };
  return { row, entry, ivaCents, totalCents };
}

/** What the API and the event say of a new order. */
export function speiOrderOf(prepared: PreparedSpeiOrder): SpeiOrder {
  const { row } = prepared;
  return {
    id: row.id,
    trackingKey: row.tracking_key,
    operationDate: row.operation_date,
    referenceOperation: row.entry_id,
    amountCents: row.amount_cents,
    commissionCents: row.commission_cents,
    ivaCents: prepared.ivaCents,
    totalCents: prepared.totalCents,
    status: row.status,
    view: renderOrder(row),
  };
}

/**
 * Creates a transfer-out order inside the caller's transaction. Throws AppError 5501 (and the
 * caller's transaction rolls back, so nothing changes) when the payer cannot cover amount +
 * commission + IVA.
 */
export async function createSpeiOrder(tx: Tx, input: SpeiOrderInput): Promise<SpeiOrder> {
  const prepared = await insertWithFreshTrackingKey(tx, prepareSpeiOrder(input));
  const order = speiOrderOf(prepared);
  await enqueueRailJob(tx, "SPEI", order.id);
  await emitEvent(tx, { type: "transfer.out.created", clientId: input.clientId, data: order.view });
  // Last (the order's reference to it is checked at the commit): the entry credits the rows every
  // client's transfers share (SPEI_OUT, commission, IVA), which are then held only until the commit.
  try {
    await postEntry(tx, prepared.entry);
  } catch (error) {
    if (error instanceof InsufficientFundsError && error.accountId === input.payerAccountId) {
      throw new AppError(errors.speiInsufficientFunds);
    }
    throw error;
  }
  return order;
}

/** Inserts the order, with another tracking key while its key is taken that day. */
async function insertWithFreshTrackingKey(tx: Tx, prepared: PreparedSpeiOrder): Promise<PreparedSpeiOrder> {
  let { row } = prepared;
  for (let attempt = 0; attempt < limits.trackingKeyAttemptsMax; attempt++) {
    const inserted = await repo.insertSpeiOrder(tx, newOrderOf(row));
    if (inserted) return { ...prepared, row: inserted };
    row = { ...row, tracking_key: newTrackingKey(row.operation_date) };
  }
  throw new Error("no free tracking key after several attempts");
}

/** The columns a new order is inserted with (the rest take their defaults). */
export function newOrderOf(row: repo.SpeiOrderRow): repo.NewSpeiOrderRow {
  const { status: _, rail_reference: _r, state_detail: _d, return_cause: _c, ...fields } = row;
  const { reversal_entry_id: _e, sent_at: _s, settled_at: _t, returned_at: _u, ...inserted } = fields;
  return inserted;
}

// ---- state changes ----

export type StateChangeOutcome = { applied: boolean; order: repo.SpeiOrderRow } | undefined;

/**
 * Applies a rail state change in its own transaction; undefined when no order has that key. The
 * order is found by the callback's (FechaOperacion, ClaveRastreo), or else by the key alone: the
 * rail may give an order sent after its cut-off, or on a non-business day, the next business day
 * as its operation date, while the order keeps the date Emisor sent it on, which its key carries
 * (`newTrackingKey`) and which makes the key unique by itself.
 */
export async function applySpeiStateChange(db: Db, change: SpeiStateChange): Promise<StateChangeOutcome> {
  return db.transaction().execute(async (tx) => {
    const keysDate = trackingKeyDate(change.trackingKey);
    const order =
      (await repo.lockOrderByTrackingKey(tx, change.operationDate, change.trackingKey)) ??
      (keysDate && keysDate !== change.operationDate
        ? await repo.lockOrderByTrackingKey(tx, keysDate, change.trackingKey)
        : undefined);
    if (!order) return undefined;
    const applied = await applyStateChangeTx(tx, order, change);
    const after = await repo.findOrderById(tx, order.id);
    assert.ok(after, "the order vanished");
    return { applied, order: after };
  });
}

/**
 * The rail's text as an order keeps it: masked, not refused (a refusal would leave the order
 * unsettled), and before the cut, so no part of a card number is left readable.
 */
export function stateDetailOf(change: SpeiStateChange): string | null {
  return firstCharacters(maskCardNumbers(change.detalle), limits.railDetailLengthMax) || null;
}

/**
 * The order's state machine. PENDIENTE/ENVIADA -> LIQUIDADA on LIQUIDACION; PENDIENTE/ENVIADA/
 * LIQUIDADA -> DEVUELTA on DEVOLUCION (a receiving bank can return a settled transfer);
 * PENDIENTE/ENVIADA -> CANCELADA on CANCELACION. Anything else (a repeated or late callback) is
 * ignored and answers false. `order` must be locked by the caller.
 */
export async function applyStateChangeTx(
  tx: Tx,
  order: repo.SpeiOrderRow,
  change: SpeiStateChange,
): Promise<boolean> {
  const detail = stateDetailOf(change);
  let applied = false;
  if (change.estado === "LIQUIDACION") {
    applied = await repo.transitionOrder(tx, order.id, ["PENDIENTE", "ENVIADA"], "LIQUIDADA", {
      settled_at: change.tsLiquidacion ?? new Date(),
      state_detail: detail,
    });
  } else {
    const returning = change.estado === "DEVOLUCION";
    const from: SpeiOrderStatus[] = returning
      ? ["PENDIENTE", "ENVIADA", "LIQUIDADA"]
      : ["PENDIENTE", "ENVIADA"];
    if (!from.includes(order.status)) return false;
    // A cause outside Banxico's table is kept as sent; the view describes it as unknown.
    const cause = returning ? (change.causaDevolucion ?? null) : null;
    const reversalId = await reverseEntry(tx, order.entry_id, {
      kind: returning ? "SPEI_OUT_RETURN" : "SPEI_OUT_CANCEL",
      description: returning ? "SPEI transfer returned" : "SPEI transfer cancelled",
      clientId: order.client_id,
      metadata: { spei_order_id: order.id, return_cause: cause },
    });
    applied = await repo.transitionOrder(tx, order.id, from, returning ? "DEVUELTA" : "CANCELADA", {
      return_cause: cause,
      state_detail: detail,
      returned_at: new Date(),
      reversal_entry_id: reversalId,
    });
    assert.ok(applied, "a locked order changed state under us");
  }
  if (!applied) return false;
  await completeRailJob(tx, "SPEI", order.id);
  const after = await repo.findOrderById(tx, order.id);
  assert.ok(after, "the order vanished");
  await emitEvent(tx, {
    type: change.estado === "LIQUIDACION" ? "transfer.out.settled" : "transfer.out.returned",
    clientId: order.client_id,
    data: renderOrder(after),
  });
  return true;
}

// ---- reading and the sandbox ----

/** GET /v1/transfer/cards/{id}: the order when it is in the caller's subtree, else 404. */
export async function getSpeiOrder(db: Db, caller: Caller, id: string) {
  const order = await repo.findOrderInScope(db, caller.clientId, id);
  if (!order) throw new AppError(errors.speiOrderNotFound);
  return { transfer: renderOrder(order) };
}

/**
 * POST /v1/sandbox/spei/orders/{id}/return: the receiving bank returns the order with `cause`,
 * through the same state machine as the rail's callbacks (the payer is refunded in full).
 */
export async function forceReturn(
  db: Db,
  rail: SpeiRail,
  caller: Caller,
  id: string,
  cause: string,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  let key: { trackingKey: string; operationDate: string } | undefined;
  const result = await runIdempotent(db, idempotency, async (tx) => {
    const order = await repo.findOrderInScope(tx, caller.clientId, id, true);
    if (!order) throw new AppError(errors.speiOrderNotFound);
    key = { trackingKey: order.tracking_key, operationDate: order.operation_date };
    const applied = await applyStateChangeTx(tx, order, {
      trackingKey: order.tracking_key,
      operationDate: order.operation_date,
      estado: "DEVOLUCION",
      causaDevolucion: cause,
      detalle: "Devolución forzada (sandbox)",
    });
    if (!applied) throw new AppError(errors.speiOrderNotReturnable);
    const after = await repo.findOrderById(tx, id);
    assert.ok(after, "the order vanished");
    return { transfer: renderOrder(after) };
  });
  // The simulator would otherwise still deliver its own outcome later (ignored: DEVUELTA is final).
  if (key && rail instanceof SpeiSimulator) rail.cancelPending(key.operationDate, key.trackingKey);
  return result;
}
