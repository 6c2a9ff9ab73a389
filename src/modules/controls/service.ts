import { randomUUID } from "node:crypto";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Tx } from "../../db/database.ts";
import { AppError, type ErrorDef, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { instantIdPage } from "../../http/cursor.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { limits } from "../../limits.ts";
import { findCardholderInScope, findCardInScope, productSeenBySubtree } from "../cards/repository.ts";
import { findClientInScope } from "../clients/repository.ts";
import { spendingAt } from "../purchases/spending.ts";
import * as repo from "./repository.ts";
import { ruleFromBody } from "./rule-input.ts";
import type { ControlScope } from "./rules.ts";
import type { CreateSpendingControlBody, UpdateSpendingControlBody } from "./schemas.ts";
import { effectiveRules, presentControl, usageOf } from "./views.ts";
import { windowKeysAt } from "./windows.ts";

/**
 * Spending controls: set on a product, a client, a cardholder or a card of the caller's subtree,
 * read and changed by the client that set them or its ancestors. Each change bumps the controls'
 * generation in its transaction, so every process deciding authorizations sees it on its next batch.
 */
const targetFinders: Record<ControlScope, (tx: Tx, callerId: string, id: string) => Promise<boolean>> = {
  PRODUCT: (tx, callerId, id) => productSeenBySubtree(tx, callerId, id),
  CLIENT: async (tx, callerId, id) => (await findClientInScope(tx, callerId, id)) !== undefined,
  CARDHOLDER: async (tx, callerId, id) => (await findCardholderInScope(tx, callerId, id)) !== undefined,
  CARD: async (tx, callerId, id) => (await findCardInScope(tx, callerId, { id })) !== undefined,
};

const targetMissing: Record<ControlScope, ErrorDef> = {
  PRODUCT: errors.productNotFound,
  CLIENT: errors.clientNotFound,
  CARDHOLDER: errors.cardholderNotFound,
  CARD: errors.cardNotFound,
};

export async function createSpendingControl(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof CreateSpendingControlBody>,
  idempotency: IdempotencyScope | undefined,
) {
  const { scope, target_id: targetId, description, ...ruleBody } = body;
  const rule = ruleFromBody(ruleBody);
  const target = targetId.toLowerCase();
  return runIdempotent(ctx.db, idempotency, async (tx) => {
    if (!(await targetFinders[scope](tx, caller.clientId, target))) throw new AppError(targetMissing[scope]);
    await repo.lockTarget(tx, target);
    if ((await repo.countOnTarget(tx, target)) >= limits.spendingControlsPerTargetMax)
      throw new AppError(errors.spendingControlsLimitReached);
    const id = randomUUID();
    const row = await repo.insertControl(tx, {
      id,
      owner_client_id: caller.clientId,
      scope,
      target_id: target,
      type: rule.type,
      description: description ?? null,
      control: { id, ownerClientId: caller.clientId, scope, targetId: target, rule },
    });
    await repo.bumpGeneration(tx);
    return { spending_control: presentControl(row) };
  });
}

export async function getSpendingControl(ctx: AppContext, caller: Caller, id: string) {
  const row = await repo.findControlInScope(ctx.db, caller.clientId, id);
  if (!row) throw new AppError(errors.spendingControlNotFound);
  return { spending_control: presentControl(row) };
}

export async function updateSpendingControl(
  ctx: AppContext,
  caller: Caller,
  id: string,
  body: Static<typeof UpdateSpendingControlBody>,
) {
  const { description, ...ruleBody } = body;
  const rule = ruleFromBody(ruleBody);
  return ctx.db.transaction().execute(async (tx) => {
    const row = await repo.findControlInScope(tx, caller.clientId, id, true);
    if (!row) throw new AppError(errors.spendingControlNotFound);
    if (row.type !== rule.type) throw new AppError(errors.spendingControlTypeFixed);
    const control = repo.controlOf(row);
    const updated = await repo.updateControl(tx, row.id, {
      control: { ...control, rule },
      description: description ?? null,
    });
    if (!updated) throw new Error("a locked spending control vanished");
    await repo.bumpGeneration(tx);
    return { spending_control: presentControl(updated) };
  });
}

export async function deleteSpendingControl(ctx: AppContext, caller: Caller, id: string) {
  return ctx.db.transaction().execute(async (tx) => {
    const row = await repo.findControlInScope(tx, caller.clientId, id, true);
    if (!row || !(await repo.deleteControl(tx, row.id))) throw new AppError(errors.spendingControlNotFound);
    await repo.bumpGeneration(tx);
    return { deleted: true, id: row.id };
  });
}

export async function listSpendingControls(
  ctx: AppContext,
  caller: Caller,
  query: {
    scope?: string | undefined;
    targetId?: string | undefined;
    perPage: number;
    cursor?: string | undefined;
  },
) {
  const filter = { scope: query.scope, targetId: query.targetId?.toLowerCase() };
  const listing = [caller.clientId, filter.scope ?? "", filter.targetId ?? "", query.perPage];
  const { items, nextCursor } = await instantIdPage(
    query,
    listing,
    (before, limit) => repo.listControlsInScope(ctx.db, caller.clientId, filter, { before, limit }),
    (row) => row.created_at_text,
  );
  return { spending_controls: items.map(presentControl), next_cursor: nextCursor };
}

/**
 * GET /v1/cards/{id}/spending_controls: every control that applies to the card, from every scope
 * (an ancestor's too: the card's own rules), each velocity limit with what the card used and has
 * left in its window now, and the strictest of them all.
 */
export async function cardSpendingControls(ctx: AppContext, caller: Caller, cardId: string) {
  const card = await repo.cardTargetsInScope(ctx.db, caller.clientId, cardId);
  if (!card) throw new AppError(errors.cardNotFound);
  const { rows } = await repo.controlsOnTargets(ctx.db, repo.targetsOf(card));
  const controls = repo.controlsOfCard(card, rows.map(repo.controlOf));
  const applying = new Set(controls.map((control) => control.id));
  const spending = spendingAt(card.spending, windowKeysAt(Date.now()));
  return {
    card_id: card.id,
    rules: rows
      .filter((row) => applying.has(row.id))
      .sort((a, b) => a.created_at.getTime() - b.created_at.getTime())
      .map((row) => {
        const rule = repo.controlOf(row).rule;
        return {
          control: presentControl(row),
          usage: rule.type === "VELOCITY_LIMIT" ? usageOf(rule, spending) : null,
        };
      }),
    effective: effectiveRules(controls, spending),
  };
}
