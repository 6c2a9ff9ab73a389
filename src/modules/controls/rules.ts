import { isMexico, normalizeCountry } from "../../domain/countries.ts";
import { mccInGroup } from "../../domain/mcc.ts";
import type { Spending } from "../purchases/spending.ts";
import type { VelocityWindow } from "./windows.ts";

/**
 * Spending controls as rules: what each kind of control says, and whether a purchase passes the
 * controls that apply to its card. Every control in scope must pass (the strictest wins), so a
 * sub-client's control can only narrow what its ancestors allow, never widen it.
 */
export const controlScopes = ["PRODUCT", "CLIENT", "CARDHOLDER", "CARD"] as const;
export type ControlScope = (typeof controlScopes)[number];
export const controlTypes = ["VELOCITY_LIMIT", "MCC", "MERCHANT_COUNTRY", "CHANNEL", "MAX_AMOUNT"] as const;
export type ControlType = (typeof controlTypes)[number];
export type ListMode = "ALLOW" | "BLOCK";

export type Rule =
  | {
      type: "VELOCITY_LIMIT";
      window: VelocityWindow;
      amountLimitCents: bigint | null;
      countLimit: number | null;
    }
  | { type: "MCC"; mode: ListMode; mccs: string[]; mccGroups: string[] }
  | { type: "MERCHANT_COUNTRY"; mode: ListMode; countries: string[] }
  | { type: "CHANNEL"; ecommerce?: boolean; atm?: boolean; contactless?: boolean; international?: boolean }
  | { type: "MAX_AMOUNT"; amountCents: bigint };

export interface Control {
  id: string;
  ownerClientId: string;
  scope: ControlScope;
  targetId: string;
  rule: Rule;
}

/** The control declines, in the order they are checked. */
export const controlDeclineReasons = [
  "CHANNEL_BLOCKED",
  "COUNTRY_BLOCKED",
  "MCC_BLOCKED",
  "AMOUNT_ABOVE_MAXIMUM",
  "SPENDING_LIMIT_EXCEEDED",
] as const;
export type ControlDecline = (typeof controlDeclineReasons)[number];

/** A purchase as the controls see it: the MXN amount, where and how it is made. */
export interface Purchase {
  amountCents: bigint;
  channel: string;
  mcc: string;
  /** The merchant's country as alpha-3, or null when the network did not give a known one. */
  country: string | null;
}

export function purchaseCountry(code: string | undefined): string | null {
  return code === undefined ? null : normalizeCountry(code);
}

const checks: Array<[ControlDecline, (rule: Rule, purchase: Purchase) => boolean]> = [
  ["CHANNEL_BLOCKED", channelRefuses],
  ["COUNTRY_BLOCKED", countryRefuses],
  ["MCC_BLOCKED", mccRefuses],
  ["AMOUNT_ABOVE_MAXIMUM", (rule, p) => rule.type === "MAX_AMOUNT" && p.amountCents > rule.amountCents],
];

/**
 * Why the controls in scope refuse the purchase, or null. `spending` is what the card spent in
 * the windows that contain now, before this purchase (velocity limits count approvals, so a
 * purchase passes a limit when what was spent plus it stays within it).
 */
export function controlDecline(
  controls: readonly Control[],
  purchase: Purchase,
  spending: Spending | null,
): ControlDecline | null {
  if (controls.length === 0) return null;
  for (const [reason, refuses] of checks)
    if (controls.some((control) => refuses(control.rule, purchase))) return reason;
  for (const control of controls)
    if (control.rule.type === "VELOCITY_LIMIT" && exceeds(control.rule, purchase.amountCents, spending))
      return "SPENDING_LIMIT_EXCEEDED";
  return null;
}

function channelRefuses(rule: Rule, purchase: Purchase): boolean {
  if (rule.type !== "CHANNEL") return false;
  const notPresent = purchase.channel === "ECOMMERCE" || purchase.channel === "MANUAL";
  if (rule.ecommerce === false && notPresent) return true;
  if (rule.atm === false && purchase.channel === "ATM") return true;
  if (rule.contactless === false && purchase.channel === "CONTACTLESS") return true;
  // A country the network did not give is not taken for abroad.
  return rule.international === false && purchase.country !== null && !isMexico(purchase.country);
}

function countryRefuses(rule: Rule, purchase: Purchase): boolean {
  if (rule.type !== "MERCHANT_COUNTRY") return false;
  const listed = purchase.country !== null && rule.countries.includes(purchase.country);
  // An allow list refuses a purchase whose country is not known: it cannot be shown to be allowed.
  return rule.mode === "ALLOW" ? !listed : listed;
}

function mccRefuses(rule: Rule, purchase: Purchase): boolean {
  if (rule.type !== "MCC") return false;
  const listed =
    rule.mccs.includes(purchase.mcc) || rule.mccGroups.some((group) => mccInGroup(purchase.mcc, group));
  return rule.mode === "ALLOW" ? !listed : listed;
}

function exceeds(
  rule: Extract<Rule, { type: "VELOCITY_LIMIT" }>,
  amount: bigint,
  spending: Spending | null,
): boolean {
  if (rule.window === "TRANSACTION") return rule.amountLimitCents !== null && amount > rule.amountLimitCents;
  const cents = spending?.cents[rule.window] ?? 0n;
  const count = spending?.count[rule.window] ?? 0;
  if (rule.amountLimitCents !== null && cents + amount > rule.amountLimitCents) return true;
  return rule.countLimit !== null && count + 1 > rule.countLimit;
}

/** Whether any control counts spending across purchases (its card's usage must then be exact). */
export function countsSpending(controls: readonly Control[]): boolean {
  return controls.some((c) => c.rule.type === "VELOCITY_LIMIT" && c.rule.window !== "TRANSACTION");
}

/** The rule as stored (card_spending amounts as text) and as read back. */
export function storedRule(rule: Rule): Record<string, unknown> {
  switch (rule.type) {
    case "VELOCITY_LIMIT":
      return {
        window: rule.window,
        amount_limit_cents: rule.amountLimitCents === null ? null : String(rule.amountLimitCents),
        count_limit: rule.countLimit,
      };
    case "MAX_AMOUNT":
      return { amount_cents: String(rule.amountCents) };
    case "MCC":
      return { mode: rule.mode, mccs: rule.mccs, mcc_groups: rule.mccGroups };
    case "MERCHANT_COUNTRY":
      return { mode: rule.mode, countries: rule.countries };
    case "CHANNEL":
      return {
        ecommerce: rule.ecommerce ?? null,
        atm: rule.atm ?? null,
        contactless: rule.contactless ?? null,
        international: rule.international ?? null,
      };
  }
}

type Stored = Record<string, unknown>;
const flag = (value: unknown) => (typeof value === "boolean" ? value : undefined);

export function ruleOf(type: ControlType, stored: Stored): Rule {
  switch (type) {
    case "VELOCITY_LIMIT":
      return {
        type,
        window: stored.window as VelocityWindow,
        amountLimitCents:
          stored.amount_limit_cents == null ? null : BigInt(String(stored.amount_limit_cents)),
        countLimit: stored.count_limit == null ? null : Number(stored.count_limit),
      };
    case "MAX_AMOUNT":
      return { type, amountCents: BigInt(String(stored.amount_cents)) };
    case "MCC":
      return {
        type,
        mode: stored.mode as ListMode,
        mccs: (stored.mccs as string[]) ?? [],
        mccGroups: (stored.mcc_groups as string[]) ?? [],
      };
    case "MERCHANT_COUNTRY":
      return { type, mode: stored.mode as ListMode, countries: (stored.countries as string[]) ?? [] };
    case "CHANNEL":
      return {
        type,
        ...definedFlags({
          ecommerce: flag(stored.ecommerce),
          atm: flag(stored.atm),
          contactless: flag(stored.contactless),
          international: flag(stored.international),
        }),
      };
  }
}

function definedFlags(flags: Record<string, boolean | undefined>): Record<string, boolean> {
  return Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)) as Record<
    string,
    boolean
  >;
}
