/**
 * The calendar windows a velocity limit counts in, in Mexico City time: the day, the ISO week
 * (Monday to Sunday), the month, the year, and the card's lifetime. Each is named by a key, as
 * card_spending stores it (migration 0027): days since 1970-01-01, the Monday that starts the week
 * as such a day, year * 12 + month - 1, the year. The same instant always has the same keys.
 */
export const velocityWindows = ["TRANSACTION", "DAY", "WEEK", "MONTH", "YEAR", "LIFETIME"] as const;
export type VelocityWindow = (typeof velocityWindows)[number];
/** The windows that accumulate (TRANSACTION limits each purchase alone). */
export type CountedWindow = "DAY" | "WEEK" | "MONTH" | "YEAR";
export const countedWindows: readonly CountedWindow[] = ["DAY", "WEEK", "MONTH", "YEAR"];

export interface WindowKeys {
  DAY: number;
  WEEK: number;
  MONTH: number;
  YEAR: number;
}

const calendar = new Intl.DateTimeFormat("en-CA", {
  timeZone: "America/Mexico_City",
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
});

/** Keys are the same for a whole Mexico City day: the last day's are kept with its bounds. */
let last: { from: number; until: number; keys: WindowKeys } | undefined;

export function windowKeysAt(at: Date | number): WindowKeys {
  const ms = typeof at === "number" ? at : at.getTime();
  if (last && ms >= last.from && ms < last.until) return last.keys;
  const [year, month, day] = calendar.format(ms).split("-").map(Number) as [number, number, number];
  const dayKey = Math.round(Date.UTC(year, month - 1, day) / 86_400_000);
  // 1970-01-01 was a Thursday: day 0 is 3 days after a Monday.
  const weekKey = dayKey - ((dayKey + 3) % 7);
  const keys = { DAY: dayKey, WEEK: weekKey, MONTH: year * 12 + month - 1, YEAR: year };
  // Valid until the next minute at most: a day's bounds in UTC move with the zone's rules.
  const minute = ms - (ms % 60_000);
  last = { from: minute, until: minute + 60_000, keys };
  return keys;
}
