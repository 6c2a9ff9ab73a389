/**
 * Placeholder of the ISO 18245 catalog (the full one lands with the catalogs' routes): the groups
 * spending controls name, by their codes.
 */
const groups: Record<string, Array<number | [number, number]>> = {
  gambling: [7800, 7801, 7802, 7995, 9406],
  cash: [6010, 6011],
  quasi_cash: [4829, 6050, 6051, 6540],
  airlines: [[3000, 3350], 4511],
  lodging: [[3501, 3999], 7011],
  car_rental: [[3351, 3441], 7512],
  restaurants: [5812, 5813, 5814],
};

export const mccGroupKeys: readonly string[] = Object.keys(groups);

export function isKnownMcc(code: string): boolean {
  return /^[0-9]{4}$/.test(code);
}

export function mccInGroup(code: string, group: string): boolean {
  const n = Number(code);
  return (groups[group] ?? []).some((c) => (typeof c === "number" ? c === n : n >= c[0] && n <= c[1]));
}
