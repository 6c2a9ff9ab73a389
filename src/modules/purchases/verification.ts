import { timingSafeEqual } from "node:crypto";
import { sql } from "kysely";
import { open } from "../../crypto/vault.ts";
import type { Db } from "../../db/database.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import { limits } from "../../limits.ts";
import type { CardRef } from "../cards/card-number.ts";
import { expirationOf } from "../cards/expiry.ts";
import { type PinDeps, verifyPin } from "../cards/pin.ts";
import { cardVerificationValue } from "../cards/sensitive.ts";
import { emitEvent } from "../events/outbox.ts";
import type { VerificationDecline } from "./authorize.ts";
import type { CardMessage } from "./message.ts";

/** What checking a card's CVV2 and PIN needs: the keys, the system key that ciphers them. */
export type VerificationDeps = PinDeps;

interface VerifiedCard {
  id: string;
  client_id: string | null;
  pan_sealed: string;
  expires_on: string;
  pin_hash: string | null;
  pin_failed_attempts: number;
  pin_locked: boolean;
}

/**
 * An authorization's CVV2 (card not present) and PIN (at a terminal), both ciphered under the
 * system key as card numbers are, checked before the authorization is decided, outside any
 * transaction: the answer is a decline reason, or null. The CVV2 is computed from the card's
 * number and expiry (it is never stored); wrong ones in a row are counted and a run reaching the
 * bound raises `card.cvv_failures`. The PIN is the keyed check transfers out use: a wrong one
 * counts towards the card's PIN lock. A card Emisor does not know is left to the decision
 * (UNKNOWN_CARD).
 */
export async function verifyAuthorization(
  deps: VerificationDeps,
  message: CardMessage,
): Promise<VerificationDecline | null> {
  if (message.cvv2 === undefined && message.pin === undefined) return null;
  const card = message.card ? await verifiedCard(deps.db, message.card) : undefined;
  if (!card) return null;
  if (message.cvv2 !== undefined && !(await cvv2Matches(deps, card, message.cvv2))) return "INCORRECT_CVV";
  if (message.pin !== undefined) return pinDecline(deps, card, message.pin);
  return null;
}

async function verifiedCard(db: Db, ref: CardRef): Promise<VerifiedCard | undefined> {
  const where = "id" in ref ? sql`id = ${ref.id}::uuid` : sql`pan_fingerprint = ${ref.fingerprint}`;
  const result = await sql<VerifiedCard>`
    select id, client_id, pan_sealed, expires_on::text as expires_on, pin_hash, pin_failed_attempts, pin_locked
    from cards where ${where}`.execute(db);
  return result.rows[0];
}

async function cvv2Matches(deps: VerificationDeps, card: VerifiedCard, ciphered: string): Promise<boolean> {
  const given = (await deps.systemKey.decryptAsync(ciphered, "cvv2")).toString("utf8");
  if (!/^[0-9]{3}$/.test(given)) throw invalidField("cvv2", "cvv2", "must cipher 3 digits");
  const pan = open(deps.keys.vault, card.pan_sealed, card.id);
  const expected = cardVerificationValue(deps.keys.cvv, pan, expirationOf(card.expires_on));
  const match = timingSafeEqual(Buffer.from(given), Buffer.from(expected));
  await recordCvv2Check(deps.db, card, match);
  return match;
}

/**
 * A right CVV2 starts the count again; a wrong one counts, and the one that makes the count reach
 * the bound raises the event (once per run of wrong ones), in the same transaction.
 */
async function recordCvv2Check(db: Db, card: VerifiedCard, match: boolean): Promise<void> {
  if (match) {
    await sql`update cards set cvv_failures = 0 where id = ${card.id}::uuid and cvv_failures > 0`.execute(db);
    return;
  }
  await db.transaction().execute(async (tx) => {
    const result = await sql<{ cvv_failures: number }>`
      update cards set cvv_failures = cvv_failures + 1 where id = ${card.id}::uuid
      returning cvv_failures`.execute(tx);
    const failures = result.rows[0]?.cvv_failures ?? 0;
    if (failures !== limits.cvvFailuresForEvent || card.client_id === null) return;
    await emitEvent(tx, {
      type: "card.cvv_failures",
      clientId: card.client_id,
      data: { card_id: card.id, failures },
    });
  });
}

async function pinDecline(
  deps: VerificationDeps,
  card: VerifiedCard,
  ciphered: string,
): Promise<VerificationDecline | null> {
  try {
    await verifyPin(deps, card, ciphered, false);
    return null;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    if (error.def === errors.pinLocked) return "PIN_LOCKED";
    if (error.def === errors.pinIncorrect || error.def === errors.pinNotSet) return "INCORRECT_PIN";
    throw error;
  }
}
