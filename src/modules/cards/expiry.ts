import { mexicoCityToday } from "../../domain/spei.ts";

/**
 * A card is good through the last day of its expiry month (what `expires_on` stores), in Mexico
 * City. Past it the card can no longer be assigned, activated, paid or spent from (5314).
 */
export function isExpired(expiresOn: string): boolean {
  return expiresOn < mexicoCityToday();
}
