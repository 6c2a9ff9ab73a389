// Proves the ISO 18245 merchant category codes and their groups, and the ISO 3166-1 countries:
// the data is well formed, the lookups agree with it code by code, and bad input is refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { countries, countryOf, isMexico, normalizeCountry } from "../../src/domain/countries.ts";
import {
  groupsOfMcc,
  isKnownMcc,
  isMccGroupKey,
  mccDescription,
  mccEntries,
  mccGroupKeys,
  mccGroups,
  mccInGroup,
} from "../../src/domain/mcc.ts";

const fourDigits = /^[0-9]{4}$/;

test("MCC entries: four-digit codes in order, without overlaps, each described", () => {
  assert.ok(mccEntries.length > 250, `${mccEntries.length} entries`);
  let previous = -1;
  for (const entry of mccEntries) {
    assert.match(entry.first, fourDigits);
    assert.match(entry.last, fourDigits);
    assert.ok(Number(entry.first) > previous, `${entry.first} overlaps or is out of order`);
    assert.ok(Number(entry.last) >= Number(entry.first));
    assert.ok(entry.description.length > 3 && entry.description.length <= 200);
    previous = Number(entry.last);
  }
  assert.equal(mccEntries[0]?.first, "0742");
  assert.equal(mccEntries.at(-1)?.last, "9950");
});

test("MCC lookups: known codes, the brand-specific ranges, and what is not a code", () => {
  assert.equal(mccDescription("5812"), "Eating places and restaurants");
  assert.equal(mccDescription("6011"), "Financial institutions: automated cash disbursements (ATM)");
  assert.match(mccDescription("3001") ?? "", /^Airlines/);
  assert.match(mccDescription("3441") ?? "", /^Car rental/);
  assert.match(mccDescription("3999") ?? "", /^Lodging/);
  for (const code of ["3000", "3299", "3351", "3501", "7995", "9950", "0742"])
    assert.ok(isKnownMcc(code), code);
  for (const code of ["3300", "3350", "3442", "0000", "1234", "9999", "4000"]) {
    assert.ok(!isKnownMcc(code), code);
    assert.equal(mccDescription(code), null);
  }
  for (const bad of ["", "581", "58120", "581a", "５８１２", " 5812", "-812", "58.2"]) {
    assert.ok(!isKnownMcc(bad), bad);
    assert.equal(mccDescription(bad), null);
    assert.deepEqual(groupsOfMcc(bad), []);
    assert.equal(mccInGroup(bad, "restaurants"), false);
  }
});

test("MCC lookups agree with the entries for every code 0000-9999", () => {
  for (let n = 0; n < 10_000; n++) {
    const code = String(n).padStart(4, "0");
    const entry = mccEntries.find((e) => Number(e.first) <= n && n <= Number(e.last));
    assert.equal(mccDescription(code), entry?.description ?? null, code);
    const expected = mccGroups
      .filter(
        (g) => g.codes.includes(code) || g.ranges.some((r) => Number(r.first) <= n && n <= Number(r.last)),
      )
      .map((g) => g.key);
    assert.deepEqual(groupsOfMcc(code), expected, code);
    for (const key of mccGroupKeys) assert.equal(mccInGroup(code, key), expected.includes(key));
  }
});

test("MCC groups: the ones a spending control needs, with the codes the networks use for them", () => {
  for (const key of [
    "gambling",
    "cash",
    "quasi_cash",
    "airlines",
    "lodging",
    "car_rental",
    "restaurants",
    "transportation",
    "digital_goods",
    "adult",
    "crypto",
    "government",
    "utilities",
    "travel",
  ])
    assert.ok(isMccGroupKey(key), key);
  assert.equal(new Set(mccGroupKeys).size, mccGroupKeys.length);
  for (const g of mccGroups) {
    assert.match(g.key, /^[a-z_]+$/);
    assert.ok(g.codes.length + g.ranges.length > 0, g.key);
    for (const code of g.codes) assert.match(code, fourDigits);
  }
  const inGroup = (key: string, list: string[]) => {
    for (const code of list) assert.ok(mccInGroup(code, key), `${code} in ${key}`);
  };
  inGroup("gambling", ["7800", "7801", "7802", "7995", "9406"]);
  inGroup("cash", ["6010", "6011"]);
  inGroup("quasi_cash", ["6050", "6051", "6540", "4829"]);
  inGroup("restaurants", ["5812", "5813", "5814"]);
  inGroup("digital_goods", ["5815", "5816", "5817", "5818"]);
  inGroup("government", ["9211", "9222", "9311", "9399", "9405"]);
  inGroup("airlines", ["3000", "3150", "3299", "4511"]);
  inGroup("lodging", ["3501", "3999", "7011"]);
  inGroup("car_rental", ["3351", "3441", "7512"]);
  inGroup("travel", ["3000", "3501", "3351", "4722", "4411"]);
  inGroup("crypto", ["6051"]);
  inGroup("adult", ["5967"]);
  inGroup("utilities", ["4900"]);
  assert.ok(!mccInGroup("6012", "cash"));
  assert.ok(!mccInGroup("9406", "government"));
  assert.ok(!mccInGroup("5812", "no_such_group"));
  assert.deepEqual(groupsOfMcc("6051"), ["quasi_cash", "crypto"]);
  assert.deepEqual(groupsOfMcc("0742"), []);
});

test("countries: every ISO 3166-1 country once in each form, Mexico among them", () => {
  assert.equal(countries.length, 249);
  for (const form of ["alpha2", "alpha3", "numeric"] as const)
    assert.equal(new Set(countries.map((c) => c[form])).size, countries.length, form);
  for (const c of countries) {
    assert.match(c.alpha2, /^[A-Z]{2}$/);
    assert.match(c.alpha3, /^[A-Z]{3}$/);
    assert.match(c.numeric, /^[0-9]{3}$/);
    assert.ok(c.name.length > 2);
    for (const code of [c.alpha2, c.alpha3, c.numeric]) assert.equal(normalizeCountry(code), c.alpha3);
    assert.equal(isMexico(c.alpha3), c.alpha3 === "MEX");
  }
  assert.equal(countryOf("484")?.name, "Mexico");
  assert.equal(normalizeCountry("US"), "USA");
  assert.equal(normalizeCountry("840"), "USA");
  assert.equal(normalizeCountry("004"), "AFG");
  for (const code of ["MX", "MEX", "484"]) assert.ok(isMexico(code), code);
});

test("countries: lower case, other lengths, unassigned codes and padding are not countries", () => {
  for (const bad of [
    "mx",
    "mex",
    "Mx",
    "",
    "M",
    "MEXI",
    "XX",
    "ZZZ",
    "4",
    "48",
    "4840",
    "000",
    " MX",
    "MX ",
  ]) {
    assert.equal(normalizeCountry(bad), null, bad);
    assert.ok(!isMexico(bad), bad);
  }
  fc.assert(
    fc.property(fc.string({ maxLength: 5 }), (text) => {
      const alpha3 = normalizeCountry(text);
      return (
        alpha3 === null ||
        countries.some((c) => c.alpha3 === alpha3 && [c.alpha2, c.alpha3, c.numeric].includes(text))
      );
    }),
  );
});
