import type { AppContext } from "../../context.ts";
import { fingerprint } from "../../crypto/vault.ts";
import { AppError, errors, invalidField } from "../../errors.ts";

/**
 * `card_number` in every card operation: the card's UUID, or its 16-digit number ciphered with
 * RSA-OAEP-SHA256 under the system public key (Base64 or URL-safe Base64). A number in clear is
 * refused, so that a PAN never travels or lands in a log unprotected. A ciphered number is found
 * by its HMAC fingerprint, never by decrypting stored numbers.
 */
export type CardRef = { id: string } | { fingerprint: string };

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const clearNumberPattern = /^[0-9 -]{12,23}$/;

export async function parseCardNumber(
  ctx: AppContext,
  text: string,
  field = "card_number",
): Promise<CardRef> {
  if (uuidPattern.test(text)) return { id: text.toLowerCase() };
  if (clearNumberPattern.test(text)) {
    throw new AppError(errors.panInClear, {
      message: `${field} must be the card's UUID or its 16-digit number ciphered under the system key`,
      details: [{ field, rule: "ciphered", message: "a card number must be ciphered under the system key" }],
    });
  }
  const plain = (await ctx.systemKey.decryptAsync(text, field)).toString("utf8");
  if (!/^[0-9]{16}$/.test(plain))
    throw invalidField(field, "card_number", "deciphers to something that is not a 16-digit card number");
  return { fingerprint: fingerprint(ctx.keys.fingerprint, plain) };
}

/**
 * What a card reference names, for an idempotency fingerprint: the card's UUID (lower case), or
 * the number's HMAC fingerprint, the same however often the number is ciphered again.
 */
export function cardRefName(ref: CardRef): string {
  return "id" in ref ? ref.id : `pan:${ref.fingerprint}`;
}

/** Twelve asterisks and the last four digits (contract 2.5). */
export function maskedCardNumber(lastFour: string): string {
  return `************${lastFour}`;
}
