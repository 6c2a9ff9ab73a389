import type { Tx } from "../../db/database.ts";
import { postingShardOf, systemAccounts } from "../../ledger/accounts.ts";
import { authorizationCode } from "./authorize.ts";
import { postCardEntry } from "./card-money.ts";
import {
  authorizationEvent,
  type CardMessage,
  holdDaysFor,
  lockAuthorization,
  type Outcome,
  type PurchaseSettings,
} from "./message.ts";
import * as repo from "./repository.ts";

/** The status an authorization settles in once nothing is held: SETTLED if anything cleared. */
export function statusWithoutHold(authorization: repo.AuthorizationRow): repo.AuthorizationRow["status"] {
  return authorization.cleared_cents > 0n ? "SETTLED" : "VOIDED";
}

/**
 * Moves the authorization's hold to `target` centavos: more is taken from the card (what it cannot
 * cover is posted to what it owes: an advice cannot be refused), less is given back to it. Every
 * change of one hold moves the CARD_HOLDS shard it was taken on.
 */
export async function moveHold(
  tx: Tx,
  card: repo.CardState,
  authorization: repo.AuthorizationRow,
  target: bigint,
  messageId: string,
): Promise<{ entryId: string | null; shard: string }> {
  const shard = authorization.hold_account_id ?? postingShardOf(systemAccounts.cardHolds);
  const delta = target - authorization.held_cents;
  const entryId = await postCardEntry(tx, card, {
    kind: delta > 0n ? "CARD_HOLD" : "CARD_HOLD_RELEASE",
    description: (authorization.merchant as { name?: string }).name ?? "Card purchase",
    system: [{ accountId: shard, amountCents: delta }],
    metadata: { authorization_id: authorization.id, message_id: messageId },
  });
  return { entryId, shard };
}

/**
 * AUTHORIZATION_ADVICE on an authorization (an incremental authorization, a final amount): the
 * hold becomes `amount`. An advice cannot be refused, so an authorization voided, expired or
 * declined is held again.
 */
export async function adviseHold(tx: Tx, message: CardMessage, settings: PurchaseSettings): Promise<Outcome> {
  const { card, authorization } = await lockAuthorization(tx, message);
  const target = message.amountCents ?? 0n;
  const moved = await moveHold(tx, card, authorization, target, message.messageId);
  const reopened = authorization.status !== "PENDING" && target > 0n;
  const days = holdDaysFor(authorization.mcc, settings);
  // An advice of nothing on an authorization that holds nothing changes nothing of its status.
  const status =
    target > 0n
      ? "PENDING"
      : authorization.status === "PENDING"
        ? statusWithoutHold(authorization)
        : authorization.status;
  const updated = await repo.updateAuthorization(tx, authorization, {
    held_cents: target,
    authorized_cents: authorization.cleared_cents + target,
    hold_account_id: moved.shard,
    status,
    ...(reopened ? { expires_at: new Date(Date.now() + days * 86_400_000) } : {}),
    // A declined authorization the network approved after all gets its code now.
    ...(reopened && authorization.authorization_code === null
      ? { authorization_code: authorizationCode() }
      : {}),
  });
  return {
    result: "APPROVED",
    amountCents: target,
    card,
    authorization: updated,
    entryId: moved.entryId,
    events: [authorizationEvent("card_authorization.updated", updated)],
  };
}

/**
 * AUTHORIZATION_REVERSAL (0400), and the expiry worker's AUTHORIZATION_EXPIRY: gives back all of
 * the hold, or `amount` of it (never more than is held). A hold released whole ends the
 * authorization: VOIDED (EXPIRED for an expiry), or SETTLED when part of it cleared.
 */
export async function releaseHold(tx: Tx, message: CardMessage): Promise<Outcome> {
  const { card, authorization } = await lockAuthorization(tx, message);
  const held = authorization.held_cents;
  const asked = message.amountCents ?? held;
  const release = asked < held ? asked : held;
  const moved = await moveHold(tx, card, authorization, held - release, message.messageId);
  let status = authorization.status;
  if (status === "PENDING" && held - release === 0n)
    status =
      message.type === "AUTHORIZATION_EXPIRY" && authorization.cleared_cents === 0n
        ? "EXPIRED"
        : statusWithoutHold(authorization);
  const updated =
    release > 0n || status !== authorization.status
      ? await repo.updateAuthorization(tx, authorization, { held_cents: held - release, status })
      : authorization;
  return {
    result: "RELEASED",
    amountCents: release,
    card,
    authorization: updated,
    entryId: moved.entryId,
    events: updated === authorization ? [] : [authorizationEvent("card_authorization.updated", updated)],
  };
}
