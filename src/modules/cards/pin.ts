import { createHmac, timingSafeEqual } from "node:crypto";
import { sql } from "kysely";
import type { AppContext } from "../../context.ts";
import { verifySecret } from "../../crypto/secrets.ts";
import type { Queryable } from "../../db/database.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { limits } from "../../limits.ts";
import { parseCardNumber } from "./card-number.ts";
import type { CardRecord } from "./repository.ts";
import { activeOrThrow, cardOrThrow, presentCard } from "./service.ts";

/**
 * PINs are checked as an issuer's HSM checks them: the stored value is a PIN verification value,
 * HMAC-SHA256 under the PIN key (derived from the master key, never in the database) over the
 * card's id and the PIN. A stolen table cannot be brute-forced without the key, and a check costs
 * microseconds, so it never holds a connection, a lock or a turn on the CPU another tenant needs.
 *
 * Values written before this scheme are scrypt hashes of the same HMAC ("scrypt$..."). They are
 * still checked, with scrypt, outside any transaction, and replaced by the verification value on
 * their first successful check: the PIN itself is needed to make the new value, so no step at
 * start could convert them.
 */
const pvvScheme = "pvv1$";

/** What checking a PIN needs: the database, the PIN key, the system key that ciphers PINs. */
export type PinDeps = Pick<AppContext, "db" | "keys" | "systemKey">;

function pinMac(ctx: Pick<AppContext, "keys">, cardId: string, pin: string): Buffer {
  return createHmac("sha256", ctx.keys.pin).update(`${cardId}:${pin}`).digest();
}

/** The value stored for a card's PIN. */
export function pinVerificationValue(ctx: Pick<AppContext, "keys">, cardId: string, pin: string): string {
  return pvvScheme + pinMac(ctx, cardId, pin).toString("base64");
}

/** Whether `pin` is the card's PIN, and whether its stored value must be replaced (scrypt). */
async function checkPin(
  ctx: Pick<AppContext, "keys">,
  cardId: string,
  pin: string,
  stored: string,
): Promise<{ match: boolean; rekey: boolean }> {
  const mac = pinMac(ctx, cardId, pin);
  if (stored.startsWith(pvvScheme)) {
    const expected = Buffer.from(stored.slice(pvvScheme.length), "base64");
    return { match: expected.length === mac.length && timingSafeEqual(expected, mac), rekey: false };
  }
  const match = await verifySecret(mac.toString("base64"), stored);
  return { match, rekey: match };
}

/** Reads a PIN: 4-6 digits, in clear where allowed, or ciphered under the system key. */
export async function readPin(
  ctx: Pick<AppContext, "systemKey">,
  text: string,
  allowClear: boolean,
): Promise<string> {
  // Digits alone are a PIN in clear, whatever their number (a ciphertext is hundreds of Base64
  // characters): a 7-digit PIN is "must be 4-6 digits", not "could not be deciphered".
  const clear = /^[0-9]{1,64}$/.test(text);
  if (clear && !allowClear)
    throw invalidField(
      "pin",
      "ciphered",
      "must be ciphered under the system key; a PIN in clear is refused here",
    );
  const pin = clear ? text : (await ctx.systemKey.decryptAsync(text, "pin")).toString("utf8");
  if (!/^[0-9]{4,6}$/.test(pin)) throw invalidField("pin", "pin", "must be 4-6 digits");
  return pin;
}

/** PUT /v1/cards/pin: sets the PIN of an ACTIVE card (ciphered in the request). */
export async function setPin(ctx: AppContext, caller: Caller, cardNumber: string, pinText: string) {
  const ref = await parseCardNumber(ctx, cardNumber);
  const card = activeOrThrow(await cardOrThrow(ctx.db, caller, ref));
  const pin = await readPin(ctx, pinText, false);
  // Set only on a card still ACTIVE: one blocked or canceled since it was read gets that card's
  // refusal, never a success.
  const updated = await ctx.db
    .updateTable("cards")
    .set({
      pin_hash: pinVerificationValue(ctx, card.id, pin),
      pin_failed_attempts: 0,
      pin_locked: false,
      updated_at: new Date(),
    })
    .where("id", "=", card.id)
    .where("status", "=", "ACTIVE")
    .returning("id")
    .executeTakeFirst();
  if (!updated) {
    activeOrThrow(await cardOrThrow(ctx.db, caller, { id: card.id }));
    throw new AppError(errors.cardNotActive);
  }
  return { card: presentCard(card), pin_set: true };
}

type PinCard = Pick<CardRecord, "id" | "pin_hash" | "pin_failed_attempts" | "pin_locked">;

/**
 * Checks the PIN of `card` (as just read in the caller's scope): clear 4-6 digits or ciphered.
 * Each outcome is recorded by one conditional statement on the stored value that was checked, so
 * attempts at once are counted exactly (the bound locks the PIN until a new one is set), and a
 * PIN changed or locked meanwhile is read again and checked against what is stored now. Answers
 * the value stored for the PIN once it checked, which a spending may require to be unchanged.
 */
export async function verifyPin(
  ctx: PinDeps,
  card: PinCard,
  pinText: string,
  allowClear = true,
): Promise<string> {
  const pin = await readPin(ctx, pinText, allowClear);
  // Each pass that finds the value changed follows another request that set or locked the PIN,
  // so the loop ends as soon as the owner stops changing it.
  for (let current = card; ; current = await readPinState(ctx.db, card.id)) {
    if (current.pin_locked) throw new AppError(errors.pinLocked);
    const stored = current.pin_hash;
    if (stored === null) throw new AppError(errors.pinNotSet);
    const { match, rekey } = await checkPin(ctx, current.id, pin, stored);
    const recorded = await recordPinCheck(ctx, current, stored, match, rekey ? pin : undefined);
    if (recorded === "right") return rekey ? pinVerificationValue(ctx, current.id, pin) : stored;
    if (recorded === "wrong") throw new AppError(errors.pinIncorrect);
    if (recorded === "locked") throw new AppError(errors.pinLocked);
  }
}

async function readPinState(db: Queryable, cardId: string): Promise<PinCard> {
  return db
    .selectFrom("cards")
    .select(["id", "pin_hash", "pin_failed_attempts", "pin_locked"])
    .where("id", "=", cardId)
    .executeTakeFirstOrThrow();
}

/**
 * Records one check against the stored value `checked`: "changed" when the PIN was set again or
 * locked since it was read (nothing recorded). A right PIN clears the count (and replaces an
 * scrypt value, given `rekeyPin`); a wrong one counts, locking at the bound.
 */
async function recordPinCheck(
  ctx: PinDeps,
  card: PinCard,
  checked: string,
  match: boolean,
  rekeyPin: string | undefined,
): Promise<"right" | "wrong" | "locked" | "changed"> {
  // Nothing to clear: the check holds as of the read, and writes nothing.
  if (match && card.pin_failed_attempts === 0 && rekeyPin === undefined) return "right";
  const unchanged = ctx.db
    .updateTable("cards")
    .where("id", "=", card.id)
    .where("pin_hash", "=", checked)
    .where("pin_locked", "=", false);
  if (match) {
    const pinHash = rekeyPin === undefined ? checked : pinVerificationValue(ctx, card.id, rekeyPin);
    const cleared = await unchanged
      .set({ pin_failed_attempts: 0, pin_hash: pinHash })
      .returning("id")
      .executeTakeFirst();
    return cleared ? "right" : "changed";
  }
  const counted = await unchanged
    .set({
      pin_failed_attempts: sql`pin_failed_attempts + 1`,
      pin_locked: sql<boolean>`pin_failed_attempts + 1 >= ${limits.pinAttemptsMax}`,
    })
    .returning("pin_locked")
    .executeTakeFirst();
  if (!counted) return "changed";
  return counted.pin_locked ? "locked" : "wrong";
}
