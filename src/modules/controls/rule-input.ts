import type { Static } from "typebox";
import { normalizeCountry } from "../../domain/countries.ts";
import { isKnownMcc, mccGroupKeys } from "../../domain/mcc.ts";
import { invalidField } from "../../errors.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import type { Rule } from "./rules.ts";
import type { UpdateSpendingControlBody } from "./schemas.ts";

type RuleBody = Static<typeof UpdateSpendingControlBody>;
type RuleField = Exclude<keyof RuleBody, "type" | "description">;

/** The fields each type takes; any other type's field in a body is refused by name. */
const fieldsOf: Record<Rule["type"], RuleField[]> = {
  VELOCITY_LIMIT: ["window", "amount_limit", "count_limit"],
  MCC: ["mode", "mccs", "mcc_groups"],
  MERCHANT_COUNTRY: ["mode", "countries"],
  CHANNEL: ["ecommerce", "atm", "contactless", "international"],
  MAX_AMOUNT: ["amount"],
};
const allFields = [...new Set(Object.values(fieldsOf).flat())];

/** A control's rule from a request body: its type's fields checked and normalized. */
export function ruleFromBody(body: RuleBody): Rule {
  const own = new Set(fieldsOf[body.type]);
  for (const field of allFields)
    if (body[field] !== undefined && !own.has(field))
      throw invalidField(field, "type", `is not a field of a ${body.type} control`);
  return builders[body.type](body);
}

const amountOf = (value: number | undefined, field: string) =>
  value === undefined ? null : parsePesos(value, field, { maxCents: limits.amountCentsMax });

function required<T>(value: T | undefined, field: string, type: string): T {
  if (value === undefined) throw invalidField(field, "required", `is required for a ${type} control`);
  return value;
}

const builders: Record<Rule["type"], (body: RuleBody) => Rule> = {
  VELOCITY_LIMIT: (body) => {
    const window = required(body.window, "window", body.type);
    const amountLimitCents = amountOf(body.amount_limit, "amount_limit");
    const countLimit = body.count_limit ?? null;
    if (amountLimitCents === null && countLimit === null)
      throw invalidField("amount_limit", "required", "amount_limit or count_limit is required");
    if (window === "TRANSACTION" && countLimit !== null)
      throw invalidField("count_limit", "window", "a TRANSACTION window limits the amount only");
    return { type: "VELOCITY_LIMIT", window, amountLimitCents, countLimit };
  },
  MCC: (body) => {
    const mode = required(body.mode, "mode", body.type);
    const mccs = body.mccs ?? [];
    const mccGroups = body.mcc_groups ?? [];
    if (mccs.length + mccGroups.length === 0)
      throw invalidField("mccs", "required", "mccs or mcc_groups must name at least one code");
    mccs.forEach((code, i) => {
      if (!isKnownMcc(code)) throw invalidField(`mccs/${i}`, "mcc", "is not an ISO 18245 code");
    });
    mccGroups.forEach((group, i) => {
      if (!mccGroupKeys.includes(group))
        throw invalidField(`mcc_groups/${i}`, "mcc_group", "is not a group of GET /v1/catalogs/mcc_groups");
    });
    return { type: "MCC", mode, mccs, mccGroups };
  },
  MERCHANT_COUNTRY: (body) => {
    const mode = required(body.mode, "mode", body.type);
    const countries = required(body.countries, "countries", body.type).map((code, i) => {
      const alpha3 = normalizeCountry(code);
      if (alpha3 === null) throw invalidField(`countries/${i}`, "country", "is not an ISO 3166-1 country");
      return alpha3;
    });
    if (countries.length === 0) throw invalidField("countries", "minItems", "must name at least one country");
    return { type: "MERCHANT_COUNTRY", mode, countries: [...new Set(countries)] };
  },
  CHANNEL: (body) => {
    const flags = {
      ...(body.ecommerce === undefined ? {} : { ecommerce: body.ecommerce }),
      ...(body.atm === undefined ? {} : { atm: body.atm }),
      ...(body.contactless === undefined ? {} : { contactless: body.contactless }),
      ...(body.international === undefined ? {} : { international: body.international }),
    };
    if (Object.keys(flags).length === 0)
      throw invalidField(
        "ecommerce",
        "required",
        "at least one of ecommerce, atm, contactless, international",
      );
    return { type: "CHANNEL", ...flags };
  },
  MAX_AMOUNT: (body) => ({
    type: "MAX_AMOUNT",
    amountCents: amountOf(required(body.amount, "amount", body.type), "amount") ?? 0n,
  }),
};
