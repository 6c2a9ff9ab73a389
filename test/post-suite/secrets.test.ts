import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { testLogDir } from "../helpers/harness.ts";
import { issuingRoutes, type SecretKind, type SecretsFile } from "../helpers/secrets.ts";

/**
 * Runs after the whole suite (`npm test`): every secret any test file saw issued must be absent
 * from every log line, every response body (but the one that hands it out) and every database
 * dump of the run. See test/helpers/secrets.ts for what is recorded.
 */
const files = readdirSync(testLogDir);
const of = (suffix: string) =>
  files.filter((name) => name.endsWith(suffix)).map((name) => path.join(testLogDir, name));
const logs = files
  .filter((name) => /^\d+-\d+\.log$/.test(name))
  .map((name) => ({ name, text: readFileSync(path.join(testLogDir, name), "utf8") }));
const dumps = of(".dump.sql").map((file) => ({
  name: path.basename(file),
  text: readFileSync(file, "utf8"),
}));
const responses = of(".responses.log").map((file) => ({
  name: path.basename(file),
  text: readFileSync(file, "utf8"),
}));
const secrets = of(".secrets.json").flatMap(
  (file) => (JSON.parse(readFileSync(file, "utf8")) as SecretsFile).secrets,
);

/** Shorter secrets than this are matched by field (PINs), not searched as text. */
const minLength = 12;

/**
 * A secret with fewer distinct characters than this (a fuzzer's "xxxxxxxxxxxx" that happened to be
 * accepted as a password) would be "found" in any other field that repeats the character; the
 * credentials tests issue are random.
 */
const distinctCharactersMin = 6;

function byKind(kinds: SecretKind[]): string[] {
  const values = new Set<string>();
  for (const secret of secrets) {
    if (!kinds.includes(secret.kind)) continue;
    if (secret.kind !== "pin" && new Set(secret.value).size < distinctCharactersMin) continue;
    values.add(secret.value);
  }
  return [...values];
}

/**
 * Multi-pattern search in one pass (Rabin-Karp over the first `minLength` characters of every
 * secret): thousands of secrets over tens of megabytes of text in well under a second.
 */
function findAny(text: string, needles: string[]): string | undefined {
  const window = minLength;
  const base = 257;
  const mod = 1_000_000_007;
  const byHash = new Map<number, string[]>();
  const hash = (s: string, from: number) => {
    let h = 0;
    for (let i = from; i < from + window; i++) h = (h * base + s.charCodeAt(i)) % mod;
    return h;
  };
  for (const needle of needles) {
    if (needle.length < window) continue;
    const h = hash(needle, 0);
    const list = byHash.get(h) ?? [];
    list.push(needle);
    byHash.set(h, list);
  }
  if (byHash.size === 0 || text.length < window) return undefined;
  let power = 1;
  for (let i = 1; i < window; i++) power = (power * base) % mod;
  let h = hash(text, 0);
  for (let i = 0; ; i++) {
    const candidates = byHash.get(h);
    if (candidates) for (const needle of candidates) if (text.startsWith(needle, i)) return needle;
    if (i + window >= text.length) return undefined;
    h = (h - ((text.charCodeAt(i) * power) % mod) + mod) % mod;
    h = (h * base + text.charCodeAt(i + window)) % mod;
  }
}

/** Every 16-digit window of every run of digits: a PAN in clear, wherever it is. */
function panCandidates(text: string): Set<string> {
  const found = new Set<string>();
  for (const match of text.matchAll(/\d{16,}/g)) {
    const run = match[0];
    for (let i = 0; i + 16 <= run.length; i++) found.add(run.slice(i, i + 16));
  }
  return found;
}

/** A private key is searched by the lines of its Base64 body, not its PEM armour. */
function keyLines(pems: string[]): string[] {
  return pems.flatMap((pem) =>
    pem.split("\n").filter((line) => line.length >= minLength && !line.startsWith("-----")),
  );
}

function assertNoPan(corpus: { name: string; text: string }[]) {
  const pans = new Set(byKind(["pan"]));
  for (const { name, text } of corpus) {
    for (const candidate of panCandidates(text)) assert.ok(!pans.has(candidate), `a PAN in clear in ${name}`);
  }
}

function assertNone(corpus: { name: string; text: string }[], kinds: SecretKind[]) {
  const needles = [...byKind(kinds.filter((k) => k !== "private_key")), ...keyLines(byKind(["private_key"]))];
  for (const { name, text } of corpus) {
    const leak = findAny(text, needles);
    const kind = secrets.find((s) => leak && s.value.includes(leak))?.kind;
    assert.equal(leak, undefined, `a ${kind} in clear in ${name}`);
  }
}

/** PINs are short: a PIN in clear is a recorded PIN as the value of a pin field. */
function assertNoPin(corpus: { name: string; text: string }[]) {
  const pins = new Set(byKind(["pin"]));
  for (const { name, text } of corpus) {
    for (const match of text.matchAll(/"(?:pin|new_pin|current_pin|old_pin)"\s*:\s*"([^"]*)"/gi)) {
      assert.ok(!pins.has(match[1] ?? ""), `a PIN in clear in ${name}`);
    }
  }
}

test("the suite recorded what it checks (the scan cannot pass on nothing)", () => {
  assert.ok(logs.length > 0 && dumps.length > 0 && responses.length > 0, "no logs, dumps or responses found");
  for (const kind of ["pan", "pin", "password", "token", "private_key", "signing_secret"] as const) {
    assert.ok(byKind([kind]).length > 0, `no ${kind} was recorded`);
  }
});

test("no PAN, PIN, password, token, signing secret, private key or master key in any log line", () => {
  assertNoPan(logs);
  assertNoPin(logs);
  assertNone(logs, ["password", "token", "signing_secret", "private_key", "master_key"]);
});

test("no PAN, PIN, password, private key or master key in any response or error body", () => {
  assertNoPan(responses);
  assertNoPin(responses);
  assertNone(responses, ["password", "private_key", "master_key"]);
  // A token or a signing secret appears only in the answer that hands it out.
  for (const { name, text } of responses) {
    const lines = text.split("\n").filter((line) => {
      const route = line.slice(0, line.indexOf("\t"));
      return !(issuingRoutes[route] ?? []).length;
    });
    assertNone([{ name, text: lines.join("\n") }], ["token", "signing_secret"]);
  }
});

test("no PAN, password, token, signing secret, private key or master key in clear in any database dump", () => {
  assertNoPan(dumps);
  assertNone(dumps, ["password", "token", "signing_secret", "private_key", "master_key"]);
});
