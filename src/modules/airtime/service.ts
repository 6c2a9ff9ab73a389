import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Db, Tx } from "../../db/database.ts";
import { completeRailJob, enqueueRailJob } from "../../db/rail-outbox.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import {
  answered,
  type IdempotentResult,
  isFinalRefusal,
  okReply,
  refusalResponse,
} from "../../idempotency/reply.ts";
import { checkBeforeWork, runIdempotent } from "../../idempotency/run.ts";
import {
  forgetIdempotencyKey,
  type IdempotencyScope,
  replaceStoredResponse,
} from "../../idempotency/store.ts";
import { systemAccounts } from "../../ledger/accounts.ts";
import { InsufficientFundsError, postEntry, reverseEntry } from "../../ledger/ledger.ts";
import { limits } from "../../limits.ts";
import {
  type AirtimeProvider,
  AirtimeProviderUnavailableError,
  type AirtimeResult,
  type AirtimeTopupRequest,
} from "../../rails/airtime/port.ts";
import { withDeadline } from "../../rails/timeout.ts";
import { firstCharacters } from "../../text.ts";
import type { CardRef } from "../cards/card-number.ts";
import { emitEvent } from "../events/outbox.ts";
import * as repo from "./repository.ts";
import { renderProduct, renderTopup, renderTopupResponse } from "./views.ts";

/**
 * Airtime top-up (contract 4.9). The debit commits first (payer -> AIRTIME_PAYABLE, the top-up
 * PENDING, a job in the rail outbox), then the provider is called outside any transaction, then
 * a second transaction records the outcome: COMPLETED, or FAILED with the debit reversed. If the
 * process dies in between, or the provider does not answer, the job becomes due and the worker
 * (worker.ts) asks the provider again; the provider deduplicates by top-up id.
 */
export interface AirtimeDeps {
  db: Db;
  provider: AirtimeProvider;
  /** The ACTIVE card of the caller's subtree named by the 4.9 `id` (cards module). */
  findPayingCard?: (caller: Caller, cardRef: CardRef) => Promise<{ id: string; client_id: string }>;
  /** The same card read again under lock in the debit's transaction: refused unless still ACTIVE. */
  lockPayingCard?: (tx: Tx, caller: Caller, cardId: string) => Promise<unknown>;
  warn?: (message: string, detail: Record<string, unknown>) => void;
}

/** Who pays: a ledger account and the client that owns it. */
export interface AirtimePayer {
  accountId: string;
  clientId: string;
  cardId: string | null;
  /** Run first in the debit's transaction: a card blocked or canceled since it was resolved is refused. */
  recheck?: (tx: Tx) => Promise<unknown>;
}

/**
 * The payer of a top-up: without `cardRef` the caller's main balance; with one, that ACTIVE card
 * of the caller's subtree (its ledger account has the card's id; its owner is the card's client).
 */
export async function resolveAirtimePayer(
  deps: AirtimeDeps,
  caller: Caller,
  cardRef: CardRef | undefined,
): Promise<AirtimePayer> {
  if (cardRef === undefined) return { accountId: caller.clientId, clientId: caller.clientId, cardId: null };
  assert.ok(deps.findPayingCard, "a top-up paid by card needs the cards module's resolver");
  const card = await deps.findPayingCard(caller, cardRef);
  const { lockPayingCard } = deps;
  assert.ok(lockPayingCard, "a top-up paid by card needs the cards module's lock");
  return {
    accountId: card.id,
    clientId: card.client_id,
    cardId: card.id,
    recheck: (tx) => lockPayingCard(tx, caller, card.id),
  };
}

export interface TopupInput {
  /** The 4.9 `id`: a card (ciphered PAN or UUID) pays instead of the caller's main balance. */
  cardRef?: CardRef | undefined;
  productId: string;
  phoneNumber: string;
  email: string;
  externalId?: string | undefined;
  additionalData?: string | undefined;
}

export async function listAirtimeProducts(db: Db) {
  const products = await repo.listProducts(db);
  return { products: { total: products.length, detail: products.map(renderProduct) } };
}

/** POST /v1/airtime/topup: resolves who pays, then tops up. */
export async function topupAirtime(
  deps: AirtimeDeps,
  caller: Caller,
  input: TopupInput,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  // A card that cannot pay or a product that cannot be bought is the key's final answer, as
  // every refusal on the caller's data.
  const checked = await checkBeforeWork(deps.db, idempotency, async () => {
    const payer = await resolveAirtimePayer(deps, caller, input.cardRef);
    const product = await repo.findProduct(deps.db, input.productId);
    if (!product) throw new AppError(errors.airtimeProductNotFound);
    if (product.status !== "ACTIVE") throw new AppError(errors.airtimeProductInactive);
    return { payer, product };
  });
  if ("stored" in checked) return checked.stored;
  return topupWithPayer(deps, checked.value.payer, checked.value.product, input, idempotency);
}

/** A top-up paid by any ledger account (a main balance, a card's account). */
async function topupWithPayer(
  deps: AirtimeDeps,
  payer: AirtimePayer,
  product: repo.AirtimeProductRow,
  input: TopupInput,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const id = randomUUID();
  const pending = await runIdempotent(deps.db, idempotency, async (tx) => {
    const topup = await debitTopup(tx, { id, payer, product, input, idempotency });
    return renderTopupResponse(topup, product);
  });
  // A replay (or a concurrent duplicate that lost) must not call the provider again.
  if (pending.replayed) return pending;
  const outcome = await askProvider(deps, providerRequest(id, input.phoneNumber, product));
  if (outcome === "UNKNOWN") return pending;
  let topup: repo.TopupRow;
  try {
    topup = await settleTopup(deps.db, id, outcome);
  } catch (error) {
    // The debit is committed and the provider has answered: a 503 now would invite a retry
    // without a key to pay twice. The top-up is PENDING, which is what it is until the worker
    // (its job comes due after the lease) asks the provider again and records the answer.
    deps.warn?.("recording the airtime provider's answer failed; the worker will", {
      topup_id: id,
      error: error instanceof Error ? error.message : String(error),
    });
    return pending;
  }
  if (topup.status === "COMPLETED") return answered(renderTopupResponse(topup, product));
  if (topup.status === "PENDING") return pending;
  throw failureError(topup.failure_reason, outcome.status === "FAILED" && outcome.retryable);
}

/** Transaction one: the debit, the PENDING top-up and its outbox job (leased past the provider call). */
async function debitTopup(
  tx: Tx,
  args: {
    id: string;
    payer: AirtimePayer;
    product: repo.AirtimeProductRow;
    input: TopupInput;
    idempotency: IdempotencyScope | undefined;
  },
): Promise<repo.TopupRow> {
  const { id, payer, product, input } = args;
  await payer.recheck?.(tx);
  const amountCents = BigInt(product.amount_cents);
  let entryId: string;
  try {
    entryId = await postEntry(tx, {
      kind: "AIRTIME",
      description: `Airtime ${product.sku}`,
      clientId: payer.clientId,
      metadata: { airtime_topup_id: id },
      postings: [
        { accountId: payer.accountId, amountCents: -amountCents },
        { accountId: systemAccounts.airtimePayable, amountCents },
      ],
    });
  } catch (error) {
    if (error instanceof InsufficientFundsError && error.accountId === payer.accountId) {
      throw new AppError(errors.airtimeInsufficientFunds);
    }
    throw error;
  }
  await repo.insertTopup(tx, {
    id,
    client_id: payer.clientId,
    payer_account_id: payer.accountId,
    card_id: payer.cardId,
    product_id: product.id,
    phone_number: input.phoneNumber,
    email: input.email,
    external_id: input.externalId ?? null,
    additional_data: input.additionalData ?? null,
    amount_cents: amountCents,
    entry_id: entryId,
    api_key_id: args.idempotency?.apiKeyId ?? null,
    idempotency_key: args.idempotency?.key ?? null,
  });
  await enqueueRailJob(tx, "AIRTIME", id, limits.railLeaseSeconds);
  const topup = await repo.findTopup(tx, id);
  assert.ok(topup, "the top-up just inserted is missing");
  return topup;
}

export function providerRequest(
  id: string,
  phoneNumber: string,
  product: repo.AirtimeProductRow,
): AirtimeTopupRequest {
  return {
    id,
    sku: product.sku,
    carrier: product.carrier,
    phoneNumber,
    amountCents: BigInt(product.amount_cents),
  };
}

/** The provider's answer, or UNKNOWN when it could not be reached in time (ask again later). */
export async function askProvider(
  deps: AirtimeDeps,
  request: AirtimeTopupRequest,
): Promise<AirtimeResult | "UNKNOWN"> {
  try {
    return await withDeadline(
      deps.provider.topup(request),
      limits.railCallTimeoutMs,
      () => new AirtimeProviderUnavailableError("airtime provider did not answer in time"),
    );
  } catch (error) {
    deps.warn?.("airtime provider call failed; will retry", {
      topup_id: request.id,
      error: error instanceof Error ? error.message : String(error),
    });
    return "UNKNOWN";
  }
}

/**
 * Transaction two: records the provider's answer once (whoever gets here first, the request or
 * the worker): COMPLETED, or FAILED with the debit reversed in full. The stored idempotent
 * response follows, by the rule for every answer: replaced by COMPLETED, or by the refusal when
 * the carrier refused the number (5604, final); forgotten when the carrier failed (6601, which
 * says nothing about the request: a retry with the key is evaluated again). Returns the top-up as
 * it stands.
 */
export async function settleTopup(db: Db, id: string, outcome: AirtimeResult): Promise<repo.TopupRow> {
  return db.transaction().execute(async (tx) => {
    const topup = await repo.findTopup(tx, id, true);
    assert.ok(topup, `top-up ${id} does not exist`);
    if (topup.status !== "PENDING") return topup;
    if (outcome.status === "COMPLETED") {
      await repo.finishTopup(tx, id, "COMPLETED", { provider_reference: outcome.reference });
    } else {
      const reversal = await reverseEntry(tx, topup.entry_id, {
        kind: "AIRTIME_REFUND",
        description: "Airtime top-up failed",
        clientId: topup.client_id,
        metadata: { airtime_topup_id: id },
      });
      await repo.finishTopup(tx, id, "FAILED", {
        failure_reason: firstCharacters(outcome.reason, limits.railDetailLengthMax),
        reversal_entry_id: reversal,
      });
    }
    await completeRailJob(tx, "AIRTIME", id);
    const after = await repo.findTopup(tx, id);
    const product = await repo.findProduct(tx, topup.product_id);
    assert.ok(after && product, "the top-up or its product vanished");
    await emitEvent(tx, {
      type: after.status === "COMPLETED" ? "airtime.completed" : "airtime.failed",
      clientId: after.client_id,
      data: renderTopup(after),
    });
    if (after.api_key_id && after.idempotency_key) {
      const key = {
        apiKeyId: after.api_key_id,
        key: after.idempotency_key,
        answers: { path: ["data", "topup", "id"], value: after.id },
      };
      const refusal =
        outcome.status === "FAILED" ? failureError(after.failure_reason, outcome.retryable) : undefined;
      if (refusal === undefined) {
        await replaceStoredResponse(tx, key, okReply(renderTopupResponse(after, product)));
      } else if (isFinalRefusal(refusal)) {
        await replaceStoredResponse(tx, key, refusalResponse(refusal));
      } else {
        await forgetIdempotencyKey(tx, key);
      }
    }
    return after;
  });
}

function failureError(reason: string | null, retryable: boolean): AppError {
  const def = retryable ? errors.airtimeProviderFailed : errors.airtimeNumberRejected;
  return new AppError(def, { message: reason ? `${def.message} (${reason})` : def.message });
}

/** GET /v1/airtime/topups/{id}: a top-up in the caller's subtree, in the 4.9 response shape. */
export async function getTopup(db: Db, caller: Caller, id: string) {
  const topup = await repo.findTopupInScope(db, caller.clientId, id);
  if (!topup) throw new AppError(errors.airtimeTopupNotFound);
  const product = await repo.findProduct(db, topup.product_id);
  assert.ok(product, "a top-up's product vanished");
  return renderTopupResponse(topup, product);
}
