import { toPesos } from "../../ledger/money.ts";
import type { Spending } from "../purchases/spending.ts";
import { type ControlRow, controlOf } from "./repository.ts";
import type { Control, Rule } from "./rules.ts";
import type { VelocityWindow } from "./windows.ts";

/** A control as the API shows it: its type's fields, amounts in pesos. */
export function presentControl(row: ControlRow) {
  return {
    id: row.id,
    owner_client_id: row.owner_client_id,
    scope: row.scope,
    target_id: row.target_id,
    type: row.type,
    ...ruleFields(controlOf(row).rule),
    description: row.description,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function ruleFields(rule: Rule): Record<string, unknown> {
  switch (rule.type) {
    case "VELOCITY_LIMIT":
      return {
        window: rule.window,
        amount_limit: rule.amountLimitCents === null ? null : toPesos(rule.amountLimitCents),
        count_limit: rule.countLimit,
      };
    case "MCC":
      return { mode: rule.mode, mccs: rule.mccs, mcc_groups: rule.mccGroups };
    case "MERCHANT_COUNTRY":
      return { mode: rule.mode, countries: rule.countries };
    case "CHANNEL": {
      const { type: _type, ...flags } = rule;
      return flags;
    }
    case "MAX_AMOUNT":
      return { amount: toPesos(rule.amountCents) };
  }
}

type Velocity = Extract<Rule, { type: "VELOCITY_LIMIT" }>;

/** What a velocity limit's window has used and has left (TRANSACTION: nothing accumulates). */
export function usageOf(rule: Velocity, spending: Spending) {
  const used = usedIn(rule.window, spending);
  return {
    window: rule.window,
    used_amount: toPesos(used.cents),
    used_count: used.count,
    remaining_amount:
      rule.amountLimitCents === null ? null : toPesos(remaining(rule.amountLimitCents, used.cents)),
    remaining_count: rule.countLimit === null ? null : Math.max(0, rule.countLimit - used.count),
  };
}

function usedIn(window: VelocityWindow, spending: Spending): { cents: bigint; count: number } {
  if (window === "TRANSACTION") return { cents: 0n, count: 0 };
  return { cents: spending.cents[window], count: spending.count[window] };
}

function remaining(limit: bigint, used: bigint): bigint {
  return limit > used ? limit - used : 0n;
}

const minOf = <T extends bigint | number>(values: T[]): T | null =>
  values.length === 0 ? null : values.reduce((a, b) => (b < a ? b : a));

/** The strictest of every rule in scope, kind by kind. */
export function effectiveRules(controls: readonly Control[], spending: Spending) {
  const rules = controls.map((control) => control.rule);
  const of = <T extends Rule["type"]>(type: T) =>
    rules.filter((r): r is Extract<Rule, { type: T }> => r.type === type);
  const channel = of("CHANNEL");
  const countries = of("MERCHANT_COUNTRY");
  const mccs = of("MCC");
  const allowLists = countries.filter((r) => r.mode === "ALLOW").map((r) => r.countries);
  return {
    max_amount: minOrNull(of("MAX_AMOUNT").map((r) => r.amountCents)),
    velocity: velocityByWindow(of("VELOCITY_LIMIT"), spending),
    channels: {
      ecommerce: !channel.some((r) => r.ecommerce === false),
      atm: !channel.some((r) => r.atm === false),
      contactless: !channel.some((r) => r.contactless === false),
      international: !channel.some((r) => r.international === false),
    },
    allowed_countries:
      allowLists.length === 0
        ? null
        : allowLists.reduce((kept, list) => kept.filter((code) => list.includes(code))),
    blocked_countries: [...new Set(countries.filter((r) => r.mode === "BLOCK").flatMap((r) => r.countries))],
    mcc_allow_lists: mccs
      .filter((r) => r.mode === "ALLOW")
      .map((r) => ({ mccs: r.mccs, mcc_groups: r.mccGroups })),
    blocked_mccs: [...new Set(mccs.filter((r) => r.mode === "BLOCK").flatMap((r) => r.mccs))],
    blocked_mcc_groups: [...new Set(mccs.filter((r) => r.mode === "BLOCK").flatMap((r) => r.mccGroups))],
  };
}

function minOrNull(cents: bigint[]): number | null {
  const min = minOf(cents);
  return min === null ? null : toPesos(min);
}

function velocityByWindow(rules: Velocity[], spending: Spending) {
  const windows = [...new Set(rules.map((r) => r.window))];
  return windows.map((window) => {
    const inWindow = rules.filter((r) => r.window === window);
    const strictest: Velocity = {
      type: "VELOCITY_LIMIT",
      window,
      amountLimitCents: minOf(
        inWindow.flatMap((r) => (r.amountLimitCents === null ? [] : [r.amountLimitCents])),
      ),
      countLimit: minOf(inWindow.flatMap((r) => (r.countLimit === null ? [] : [r.countLimit]))),
    };
    return {
      amount_limit: strictest.amountLimitCents === null ? null : toPesos(strictest.amountLimitCents),
      count_limit: strictest.countLimit,
      ...usageOf(strictest, spending),
    };
  });
}
