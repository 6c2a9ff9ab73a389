import { open, seal } from "../../crypto/vault.ts";
import type { Db } from "../../db/database.ts";
import { maskedCardNumber } from "../cards/card-number.ts";
import type { SpeiOrderRow } from "./repository.ts";

/**
 * A transfer out to a card: the beneficiary's card number is stored sealed under the vault key
 * (bound to the order, so a sealed value cannot be moved to another order), and the order's
 * `beneficiary_account` holds the masked form every answer, event and webhook shows. Only the
 * dispatcher opens it, to hand the order to the rail.
 */
const context = (orderId: string) => `spei-order:${orderId}:beneficiary`;

/** The stored columns of a beneficiary account: masked and sealed for a card, as is otherwise. */
export function storedBeneficiary(
  vaultKey: Buffer,
  orderId: string,
  account: string,
  accountType: SpeiOrderRow["beneficiary_account_type"],
): { beneficiary_account: string; beneficiary_card_sealed: string | null } {
  if (accountType !== "CARD") return { beneficiary_account: account, beneficiary_card_sealed: null };
  return {
    beneficiary_account: maskedCardNumber(account.slice(-4)),
    beneficiary_card_sealed: seal(vaultKey, account, context(orderId)),
  };
}

/** The account as the rail needs it: the card number opened, or the CLABE or phone as stored. */
export function railBeneficiaryAccount(vaultKey: Buffer, order: SpeiOrderRow): string {
  return order.beneficiary_card_sealed === null
    ? order.beneficiary_account
    : open(vaultKey, order.beneficiary_card_sealed, context(order.id));
}

/**
 * Seals the card numbers of orders stored before migration 0013, once, at start: each row in its
 * own statement, guarded so that two processes starting together seal a row once. Answers how
 * many it sealed.
 */
export async function sealStoredBeneficiaryCards(db: Db, vaultKey: Buffer): Promise<number> {
  const rows = await db
    .selectFrom("spei_orders")
    .select(["id", "beneficiary_account"])
    .where("beneficiary_account_type", "=", "CARD")
    .where("beneficiary_card_sealed", "is", null)
    .execute();
  let sealed = 0;
  for (const row of rows) {
    const stored = storedBeneficiary(vaultKey, row.id, row.beneficiary_account, "CARD");
    const result = await db
      .updateTable("spei_orders")
      .set(stored)
      .where("id", "=", row.id)
      .where("beneficiary_card_sealed", "is", null)
      .executeTakeFirst();
    sealed += Number(result.numUpdatedRows);
  }
  return sealed;
}
