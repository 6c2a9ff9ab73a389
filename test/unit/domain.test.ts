// Proves the Mexican-domain rules against domain-mx's own examples and with properties.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { buildClabe, clabeControlDigit, isValidClabe } from "../../src/domain/clabe.ts";
import { curpCheckDigit, curpProblem, isValidCurp } from "../../src/domain/curp.ts";
import {
  cardNumberSpans,
  containsCardNumber,
  isLuhnValid,
  luhnCheckDigit,
  maskCardNumbers,
  randomPan,
} from "../../src/domain/luhn.ts";
import { isValidRfc, rfcCheckDigit } from "../../src/domain/rfc.ts";
import { numericCode } from "../../src/domain/spei.ts";

test("CLABE: the domain example, and any single-digit change is caught", () => {
  assert.ok(isValidClabe("032180000118359719"));
  assert.equal(clabeControlDigit("03218000011835971"), 9);
  assert.ok(!isValidClabe("032180000118359718"));
  assert.ok(!isValidClabe("03218000011835971"));
  fc.assert(
    fc.property(
      fc.stringMatching(/^[0-9]{17}$/),
      fc.nat({ max: 16 }),
      fc.integer({ min: 1, max: 9 }),
      (body, at, bump) => {
        const clabe = `${body}${clabeControlDigit(body)}`;
        assert.ok(isValidClabe(clabe));
        const changed = `${clabe.slice(0, at)}${(Number(clabe[at]) + bump) % 10}${clabe.slice(at + 1)}`;
        // Weights 3, 7 and 1 are coprime with 10: any single-digit change alters the control digit.
        assert.ok(!isValidClabe(changed));
      },
    ),
  );
  assert.equal(buildClabe("646", "180", 1n).length, 18);
  assert.ok(isValidClabe(buildClabe("646", "180", 12345678901n)));
  assert.throws(() => buildClabe("646", "180", 123456789012n), RangeError);
});

test("CURP: valid and invalid examples of domain-mx §3", () => {
  for (const curp of ["BOXW310820HNERXN09", "XEXX010101HNEXXXA4", "HEGG560427MVZRRL04"]) {
    assert.ok(isValidCurp(curp), curp);
  }
  assert.equal(curpProblem("JUAP800101HNEXXXA4"), "check_digit");
  assert.equal(curpProblem("JUAP800101HDFNRN09"), "check_digit");
  assert.equal(curpProblem("HEGG560427MZZRRL04"), "state");
  assert.equal(curpProblem("HEGG561327MVZRRL04"), "date");
  assert.equal(curpProblem("hegg560427MVZRRL04"), "format");
  assert.equal(curpProblem("HEGG560427MVZRRL0"), "format");
  // Regression (domain audit): the 17th character gives the century, a digit up to 1999. 29
  // February 1900 did not exist (1900 is not a leap year); 29 February 2000 did.
  const body1900 = "EBFT000229HDFRPN0";
  assert.equal(curpProblem(`${body1900}${curpCheckDigit(body1900)}`), "date");
  const body2000 = "EBFT000229HDFRPNA";
  assert.equal(curpProblem(`${body2000}${curpCheckDigit(body2000)}`), undefined);
  fc.assert(
    fc.property(
      fc.stringMatching(
        /^[A-Z]{4}[0-9]{2}(0[1-9]|1[0-2])(0[1-9]|1[0-9]|2[0-8])[HM](DF|JC|NE)[A-Z]{3}[0-9A-Z]$/,
      ),
      (body) => {
        assert.ok(isValidCurp(`${body}${curpCheckDigit(body)}`));
        assert.ok(!isValidCurp(`${body}${(curpCheckDigit(body) + 1) % 10}`));
      },
    ),
  );
});

test("RFC: format and date only, never the check digit", () => {
  for (const rfc of [
    "GODE561231GR8",
    "XAXX010101000",
    "ABC010101AB1",
    "GODE561231",
    "ÑAAA010101AAA",
    "A&C010101AB1",
  ]) {
    assert.ok(isValidRfc(rfc), rfc);
  }
  for (const rfc of [
    "GODE561331GR8",
    "GO1E561231GR8",
    "ABC010101",
    "GODE561231GR",
    "GODE561231GR81",
    "gode561231gr8",
  ]) {
    assert.ok(!isValidRfc(rfc), rfc);
  }
  assert.equal(rfcCheckDigit("GODE561231GR8"), "8");
  assert.notEqual(rfcCheckDigit("XAXX010101000"), "0");
});

test("Luhn: known numbers, generated PANs, single-digit errors", () => {
  assert.ok(isLuhnValid("4111111111111111"));
  assert.ok(isLuhnValid("5555555555554444"));
  assert.ok(!isLuhnValid("4111111111111112"));
  assert.equal(luhnCheckDigit("411111111111111"), 1);
  fc.assert(
    fc.property(fc.stringMatching(/^[0-9]{6,8}$/), (bin) => {
      const pan = randomPan(bin);
      assert.equal(pan.length, 16);
      assert.ok(pan.startsWith(bin));
      assert.ok(isLuhnValid(pan));
    }),
  );
});

/** A Luhn-valid number of `length` digits not starting with 0 (and, at 18, not a valid CLABE). */
const cardNumberOf = (length: number) =>
  fc
    .tuple(fc.integer({ min: 1, max: 9 }), fc.stringMatching(new RegExp(`^[0-9]{${length - 2}}$`)))
    .map(([first, middle]) => `${first}${middle}${luhnCheckDigit(`${first}${middle}`)}`)
    .filter((digits) => !(digits.length === 18 && isValidClabe(digits)));

test("card numbers in text: found with or without separators, masked to their last four", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 13, max: 19 }).chain(cardNumberOf),
      fc.array(fc.constantFrom("", " ", "-", "."), { minLength: 18, maxLength: 18 }),
      fc.constantFrom("", "Pago ", "ref: ", "x"),
      (digits, separators, prefix) => {
        const written = [...digits]
          .map((digit, i) => (i === 0 ? digit : `${separators[i - 1]}${digit}`))
          .join("");
        const text = `${prefix}${written} fin`;
        assert.ok(containsCardNumber(text), text);
        const masked = maskCardNumbers(text);
        assert.equal(masked.length, text.length);
        assert.ok(!containsCardNumber(masked), masked);
        assert.equal(masked.replace(/[^0-9]/g, "").slice(-4), digits.slice(-4));
        assert.equal(masked.replace(/[0-9*]/g, ""), text.replace(/[0-9]/g, ""));
      },
    ),
  );
  // Found among other numbers of the same run; not across two separators, nor inside a longer number.
  assert.deepEqual(cardNumberSpans("1 5311 0105 6911 4749 12 27"), [[2, 21]]);
  assert.equal(containsCardNumber("5311  0105 6911 4749"), false);
  assert.equal(containsCardNumber("15311010569114749"), false);
  assert.equal(containsCardNumber("53110105691147490000"), false);
  // Not card numbers: Luhn fails, too short, a leading 0, a valid CLABE, a UUID.
  for (const text of ["5311010569114748", "411111111111", "0000000000000000", "646180000000000119"]) {
    assert.equal(containsCardNumber(text), false, text);
  }
  assert.equal(containsCardNumber("a1700000-0000-4000-8000-000000000100"), false);
});

test("collection CLABEs can only be issued under a SPEI participant's bank code", () => {
  // Regression (domain audit): any 3 digits were taken, and a CLABE under 999 can never be paid.
  assert.throws(() => loadConfig({ EMISOR_CLABE_BANK_PREFIX: "999" }), ConfigError);
  assert.throws(() => loadConfig({ EMISOR_CLABE_BANK_PREFIX: "64" }), ConfigError);
  assert.equal(loadConfig({}).clabeBankPrefix, "646");
  assert.equal(loadConfig({ EMISOR_CLABE_BANK_PREFIX: "012" }).clabeBankPrefix, "012");
});

test("EMISOR_TRUST_PROXY names the proxies to believe, never every hop", () => {
  // Regression (third audit): true trusted every hop, so the caller's address was the leftmost
  // X-Forwarded-For entry, which the caller writes, and the login limit per address was void.
  const trust = (value: string) => loadConfig({ EMISOR_TRUST_PROXY: value }).trustProxy;
  assert.equal(trust(""), false);
  assert.equal(trust("false"), false);
  assert.equal(trust("true"), "loopback,linklocal,uniquelocal");
  assert.equal(trust("10.0.0.0/8, 192.168.1.7,::1, fd00::/8"), "10.0.0.0/8,192.168.1.7,::1,fd00::/8");
  for (const bad of ["yes please", "10.0.0.0/33", "::1/129", "10.0.0/8", "2", "10.0.0.1/8/1"])
    assert.throws(() => trust(bad), ConfigError, bad);
  // Every address is every hop, spelled as a range (audit): the caller would pick its address.
  for (const everyone of ["0.0.0.0/0", "::/0", "10.0.0.1, 0.0.0.0/00"])
    assert.throws(() => trust(everyone), /must not trust every address/, everyone);
});

test("EMISOR_SANDBOX set but empty stops the start instead of turning the sandbox on", () => {
  // Regression (third audit): empty meant unset, and unset is sandbox mode, which mints money.
  assert.throws(() => loadConfig({ EMISOR_SANDBOX: "" }), ConfigError);
  assert.throws(() => loadConfig({ EMISOR_SANDBOX: " " }), ConfigError);
  assert.equal(loadConfig({}).sandbox, true);
  assert.equal(loadConfig({ EMISOR_SANDBOX: "false" }).sandbox, false);
});

test("institution codes are their number, the catalog's key, whatever the zeros", () => {
  assert.equal(numericCode("040012"), "40012");
  assert.equal(numericCode(40012), "40012");
  assert.equal(numericCode("02001"), "2001");
  assert.equal(numericCode(0), "0");
  assert.equal(numericCode("000"), "0");
});
