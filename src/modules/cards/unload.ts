import assert from "node:assert/strict";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Tx } from "../../db/database.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import { completeDraft, type IdempotencyDraft } from "../../idempotency/store.ts";
import { balanceOf, InsufficientFundsError, postEntry } from "../../ledger/ledger.ts";
import { type Cents, formatPesos, parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { emitEvent } from "../events/outbox.ts";
import { cardRefName, parseCardNumber } from "./card-number.ts";
import * as repo from "./repository.ts";
import type { UnloadBody } from "./schemas.ts";
import { presentCard } from "./service.ts";

/** The journal entry kind of an unload, as the card's movements show it. */
export const unloadKind = "CARD_UNLOAD";

/**
 * POST /v1/cards/unload: moves money from a card back to the main balance of the client that owns
 * the card, in one balanced entry. It is the way out for money a card can no longer spend: spending
 * needs an ACTIVE, unexpired card, so without it a balance left on a canceled, blocked or expired
 * card (a SPEI transfer out returned after the card was canceled is refunded onto that card) would
 * be stranded. Hence every status is allowed. The money goes to the card's own client whoever the
 * caller is (the card's client or an ancestor): the card belongs to that client's program, and a
 * parent that wants the money back then moves it up with POST /v1/clients/transfers.
 */
export async function unloadCard(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof UnloadBody>,
  draft: IdempotencyDraft | undefined,
): Promise<IdempotentResult> {
  const amountCents =
    body.amount === undefined
      ? undefined
      : parsePesos(body.amount, "amount", { maxCents: limits.amountCentsMax });
  const ref = await parseCardNumber(ctx, body.card_number);
  const { scope, stored } = await completeDraft(ctx.db, draft, { card_number: cardRefName(ref) });
  if (stored) return stored;
  return runIdempotent(ctx.db, scope, async (tx) => {
    const named = await repo.findCardInScope(tx, caller.clientId, ref);
    if (!named) throw new AppError(errors.cardNotFound);
    // The locks in the order a payment takes them (the client's main balance, the card, the card's
    // balance), so that an unload and a payment of the same client and card cannot deadlock.
    const mainCents = await balanceOf(tx, named.client_id, { lock: true });
    const card = await repo.findCardInScope(tx, caller.clientId, { id: named.id }, { lock: true });
    assert.ok(card, "an assigned card left its client's subtree");
    const balanceCents = await balanceOf(tx, card.id, { lock: true });
    const unloadCents = amountCents ?? balanceCents;
    if (balanceCents === 0n) throw new AppError(errors.cardBalanceEmpty);
    if (unloadCents > balanceCents) {
      throw new AppError(errors.cardUnloadExceedsBalance, {
        message: `The amount to unload (${formatPesos(unloadCents)}) is more than the card's balance (${formatPesos(balanceCents)})`,
      });
    }
    const entryId = await postUnload(tx, caller, card, unloadCents, body.description ?? null);
    const data = {
      operation: {
        id: entryId,
        kind: unloadKind,
        amount: toPesos(unloadCents),
        description: body.description ?? null,
      },
      card: { ...presentCard(card), balance: toPesos(balanceCents - unloadCents) },
      client: { id: card.client_id, available: toPesos(mainCents + unloadCents) },
    };
    await emitEvent(tx, { type: "card.unloaded", clientId: card.client_id, data });
    return data;
  });
}

/** The entry: the card's balance pays, its client's main balance (the account with its id) gets it. */
async function postUnload(
  tx: Tx,
  caller: Caller,
  card: repo.CardRecord,
  amountCents: Cents,
  description: string | null,
): Promise<string> {
  try {
    return await postEntry(tx, {
      kind: unloadKind,
      description,
      clientId: card.client_id,
      metadata: { card_id: card.id, unloaded_by_client_id: caller.clientId, api_key_id: caller.apiKeyId },
      postings: [
        { accountId: card.id, amountCents: -amountCents },
        { accountId: card.client_id, amountCents },
      ],
    });
  } catch (error) {
    // The ledger's conditional debit: unreachable under the lock above, and still a refusal, never
    // a negative balance, if that ever changes.
    if (error instanceof InsufficientFundsError && error.accountId === card.id)
      throw new AppError(errors.cardUnloadExceedsBalance);
    throw error;
  }
}
