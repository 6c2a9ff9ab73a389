import { createHmac } from "node:crypto";
import type { AppContext } from "../../context.ts";
import { encryptFor } from "../../crypto/rsa.ts";
import { open } from "../../crypto/vault.ts";
import type { Caller } from "../../http/caller.ts";
import { registeredPublicKey } from "../keys/service.ts";
import { expirationOf } from "./expiry.ts";

/**
 * A card's verification value (CVV2), computed, never stored: as an issuer's CVK computes it
 * from the number and the expiry, here an HMAC-SHA256 under a key of its own derived from the
 * master key, reduced to three digits. The same card always has the same value; nothing at rest
 * holds it, so a stolen database does not give it.
 */
export function cardVerificationValue(key: Buffer, pan: string, expiration: string): string {
  const digest = createHmac("sha256", key).update(`${pan}|${expiration}`).digest();
  return String(digest.readUInt32BE(0) % 1000).padStart(3, "0");
}

/**
 * What a cardholder needs to use a card that has no plastic (a virtual card) or to show its
 * details in an app: the full number, the expiry and the CVV, ciphered under the calling API
 * key's registered public key (contract 5.4: responses carry sensitive data ciphered with the
 * client's key). Only the JSON text `{"card_number","expiration","cvv"}` is ciphered; nothing of
 * it is logged or stored in clear.
 */
export async function sensitiveCardData(
  ctx: AppContext,
  caller: Caller,
  card: { id: string; expires_on: string },
): Promise<string> {
  const publicKey = await registeredPublicKey(ctx.db, caller);
  const { pan_sealed } = await ctx.db
    .selectFrom("cards")
    .select("pan_sealed")
    .where("id", "=", card.id)
    .executeTakeFirstOrThrow();
  const pan = open(ctx.keys.vault, pan_sealed, card.id);
  const expiration = expirationOf(card.expires_on);
  const cvv = cardVerificationValue(ctx.keys.cvv, pan, expiration);
  return encryptFor(publicKey, JSON.stringify({ card_number: pan, expiration, cvv }));
}
