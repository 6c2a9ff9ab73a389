/** Placeholder of the ISO 3166-1 table (the full one lands with the catalogs): a few countries. */
const countries: Array<[string, string, string]> = [
  ["MX", "MEX", "484"],
  ["US", "USA", "840"],
  ["CA", "CAN", "124"],
  ["ES", "ESP", "724"],
  ["GT", "GTM", "320"],
];

export function normalizeCountry(code: string): string | null {
  return countries.find((c) => c.includes(code))?.[1] ?? null;
}

export function isMexico(code: string): boolean {
  return normalizeCountry(code) === "MEX";
}
