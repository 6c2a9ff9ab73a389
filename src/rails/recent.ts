/** How many calls a simulator keeps for inspection by tests and the sandbox. */
export const keptCallsMax = 1_000;

/**
 * Appends `item` to a simulator's record of calls, dropping the oldest beyond `keptCallsMax` (in
 * chunks, not one by one), so a long-running process does not keep every call it ever got.
 */
export function keepLast<T>(items: T[], item: T): void {
  items.push(item);
  if (items.length > keptCallsMax * 1.1) items.splice(0, items.length - keptCallsMax);
}
