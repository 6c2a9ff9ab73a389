import { Type } from "typebox";
import { clabeBankPrefix, isValidClabe } from "../../domain/clabe.ts";
import { isValidCurp } from "../../domain/curp.ts";
import { containsCardNumber, isLuhnValid } from "../../domain/luhn.ts";
import { isValidRfc } from "../../domain/rfc.ts";
import { type AccountType, accountTypeCodes, accountTypeOf } from "../../domain/spei.ts";
import { cardNumberRule, type ValidationDetail, validationError } from "../../errors.ts";
import { Email, VisibleText } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { characterCount, hasInvisibleCharacter } from "../../text.ts";
import { type InstitutionItem, institutionByCode } from "../catalogs/data.ts";

/**
 * The beneficiary fields of a transfer out (contract 4.10), validated in one place so the HTTP
 * route and any other caller apply the same rules. The body schema below checks shapes; the
 * function checks what a schema cannot (control digits, Luhn, the CLABE's bank against the
 * institution, RFC/CURP) and repeats the bounds and the text rules, so it is safe to call without
 * the schema.
 */
export const BeneficiaryProperties = {
  payment_concept: VisibleText(1, limits.speiConceptLengthMax, "Concepto de pago, 1-40 characters"),
  beneficiary_account: Type.String({
    pattern: "^([0-9]{10}|[0-9]{16}|[0-9]{18})$",
    "x-message": "must be 10 (phone), 16 (card) or 18 (CLABE) digits",
  }),
  // Any wrong value of a sane length is told what it should be (a key of the catalog), "BBVA
  // Mexico" as well as "99999": a bound of 10 told a name it was too long instead.
  beneficiary_institution: Type.String({
    minLength: 1,
    maxLength: 40,
    description: "Banxico code from GET /v1/catalogs/transfer_institutions",
  }),
  beneficiary_name: VisibleText(1, limits.speiNameLengthMax, "1-40 characters"),
  numeric_reference: Type.String({
    pattern: `^[0-9]{1,${limits.speiNumericReferenceDigitsMax}}$`,
    "x-message": `must be 1-${limits.speiNumericReferenceDigitsMax} digits`,
  }),
  beneficiary_rfc_curp: Type.String({
    minLength: 2,
    maxLength: limits.speiRfcCurpLengthMax,
    description: "ND when unknown, else an RFC (10-13) or a CURP (18)",
  }),
  beneficiary_email: Email(),
};

export interface BeneficiaryInput {
  payment_concept: string;
  beneficiary_account: string;
  beneficiary_institution: string;
  beneficiary_name: string;
  numeric_reference: string;
  beneficiary_rfc_curp: string;
  beneficiary_email: string;
}

export interface Beneficiary {
  account: string;
  accountType: AccountType;
  /** SPEI tipo de cuenta: 10, 3 or 40. */
  accountTypeCode: string;
  institution: InstitutionItem;
  name: string;
  rfcCurp: string;
  email: string;
  paymentConcept: string;
  numericReference: string;
}

const emailPattern = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The validated beneficiary, or AppError 1000 (1010 for a card number in text) naming every failed rule. */
export function validateBeneficiary(input: BeneficiaryInput): Beneficiary {
  const details: ValidationDetail[] = [];
  const fail = (field: string, rule: string, message: string) => details.push({ field, rule, message });

  const institution = institutionByCode(input.beneficiary_institution);
  if (!institution)
    fail("beneficiary_institution", "catalog", "must be a key of the transfer_institutions catalog");
  const accountType = accountTypeOf(input.beneficiary_account);
  if (!accountType) {
    fail("beneficiary_account", "pattern", "must be 10 (phone), 16 (card) or 18 (CLABE) digits");
  } else if (accountType === "CLABE") {
    if (!isValidClabe(input.beneficiary_account)) {
      fail("beneficiary_account", "clabe", "is not a valid CLABE (control digit)");
    } else if (institution && clabeBankPrefix(input.beneficiary_account) !== institution.clabe_prefix) {
      fail(
        "beneficiary_account",
        "clabe_institution",
        "the CLABE does not belong to beneficiary_institution",
      );
    }
  } else if (accountType === "CARD" && !isLuhnValid(input.beneficiary_account)) {
    fail("beneficiary_account", "luhn", "is not a valid card number (Luhn)");
  }
  const reference = input.numeric_reference;
  if (!/^[0-9]+$/.test(reference) || reference.length > limits.speiNumericReferenceDigitsMax) {
    fail("numeric_reference", "pattern", `must be 1-${limits.speiNumericReferenceDigitsMax} digits`);
  } else if (/^0+$/.test(reference)) {
    fail("numeric_reference", "minimum", "must be greater than 0");
  }
  const rfcCurp = input.beneficiary_rfc_curp;
  if (rfcCurp !== "ND" && !(rfcCurp.length === 18 ? isValidCurp(rfcCurp) : isValidRfc(rfcCurp))) {
    fail(
      "beneficiary_rfc_curp",
      "rfc_curp",
      "must be ND, an RFC (10-13 characters) or a CURP (18 characters)",
    );
  }
  checkText(fail, "beneficiary_name", input.beneficiary_name, limits.speiNameLengthMax);
  checkText(fail, "payment_concept", input.payment_concept, limits.speiConceptLengthMax);
  if (characterCount(input.beneficiary_email) > 100 || !emailPattern.test(input.beneficiary_email)) {
    fail("beneficiary_email", "format", "must be an email address");
  }
  if (details.length > 0 || !institution || !accountType) throw validationError(details);
  return {
    account: input.beneficiary_account,
    accountType,
    accountTypeCode: accountTypeCodes[accountType],
    institution,
    name: input.beneficiary_name,
    rfcCurp,
    email: input.beneficiary_email,
    paymentConcept: input.payment_concept,
    numericReference: reference,
  };
}

function checkText(
  fail: (field: string, rule: string, message: string) => void,
  field: string,
  value: string,
  max: number,
): void {
  const characters = characterCount(value);
  if (characters === 0) fail(field, "minLength", "must be at least 1 characters");
  else if (!/\S/.test(value)) fail(field, "blank", "must not be blank");
  else if (characters > max) fail(field, "maxLength", `must be at most ${max} characters`);
  // SPEI carries printable text (control characters are return cause 19 at the receiver), and an
  // invisible one makes a name or concept read otherwise than it is sent.
  else if (hasInvisibleCharacter(value))
    fail(field, "characters", "must not contain control or invisible characters");
  if (containsCardNumber(value)) fail(field, cardNumberRule, "must not contain a card number");
}
