import { mexicoCityToday } from "../../domain/spei.ts";

/**
 * A card is good through the last day of its expiry month (what `expires_on` stores), in Mexico
 * City. Past it the card can no longer be assigned, activated, paid or spent from (5314).
 */
export function isExpired(expiresOn: string): boolean {
  return expiresOn < mexicoCityToday();
}

/** `MM/YY` of a card's expiry date (YYYY-MM-DD, the last day of its month). */
export function expirationOf(expiresOn: string): string {
  return `${expiresOn.slice(5, 7)}/${expiresOn.slice(2, 4)}`;
}
