// Proves the public-key exchange of contract 4.1 against the openssl CLI, both directions.
import assert from "node:assert/strict";
import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { after, before, test } from "node:test";
import { AppError } from "../src/errors.ts";
import { sensitiveDataConstant } from "../src/modules/keys/service.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import {
  opensslDecrypt,
  opensslEcPublicKey,
  opensslEncrypt,
  opensslKeyPair,
  readPrivatePem,
  toUrlSafe,
} from "./helpers/openssl.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t);
});
after(() => t.close());

const path = "/v1/clients/api_key/public_key";

interface Keys {
  client: { id: string; name: string; alias: string };
  api_key: { id: string; alias: string; public_key: string };
  system: { public_key: string };
  sensitive_data: string;
}

test("with no key registered, GET answers 5101 telling the client to register one", async () => {
  const fresh = await createTenant(t);
  const response = expectError(await call(t.app, "GET", path, { token: fresh.token }), 5101, 422);
  assert.match(response.body.message, /POST \/v1\/clients\/api_key\/public_key/);
});

test("openssl: register a key, decipher sensitive_data with the private key", async () => {
  const pair = opensslKeyPair();
  const registered = expectOk(
    await call<Omit<Keys, "system" | "sensitive_data">>(t.app, "POST", path, {
      token: tenant.token,
      body: { public_key: pair.publicPem },
    }),
  );
  assert.equal(registered.client.id, tenant.clientId);
  assert.equal(registered.api_key.id, tenant.apiKeyId);
  assert.equal(registered.api_key.public_key.trim(), pair.publicPem.trim());

  const keys = expectOk(await call<Keys>(t.app, "GET", path, { token: tenant.token }));
  assert.deepEqual(Object.keys(keys).sort(), ["api_key", "client", "sensitive_data", "system"]);
  assert.deepEqual(Object.keys(keys.client).sort(), ["alias", "id", "name"]);
  assert.deepEqual(Object.keys(keys.api_key).sort(), ["alias", "id", "public_key"]);
  assert.match(keys.system.public_key, /^-----BEGIN PUBLIC KEY-----/);
  assert.equal(opensslDecrypt(pair, keys.sensitive_data), sensitiveDataConstant);
  assert.ok(!JSON.stringify(keys).includes(readPrivatePem(pair)));
});

test("openssl: a value ciphered under the system key is deciphered, in standard and URL-safe Base64", async () => {
  const keys = expectOk(await call<Keys>(t.app, "GET", path, { token: tenant.token }));
  const cipher = opensslEncrypt(keys.system.public_key, "4111111111111111");
  assert.equal(t.ctx.systemKey.decrypt(cipher, "card_number").toString(), "4111111111111111");
  assert.equal(t.ctx.systemKey.decrypt(toUrlSafe(cipher), "card_number").toString(), "4111111111111111");
});

test("PKCS#1 v1.5, garbage, truncated and non-Base64 ciphertexts fail alike with 1005", () => {
  const pkcs1 = opensslEncrypt(t.ctx.systemKey.publicKeyPem, "4111111111111111", "pkcs1");
  const oaep = opensslEncrypt(t.ctx.systemKey.publicKeyPem, "4111111111111111");
  const messages = new Set<string>();
  for (const bad of [
    pkcs1,
    oaep.slice(0, -8),
    "not base64!!",
    "",
    "QUJD",
    `${oaep}${oaep}`,
    "A".repeat(344),
  ]) {
    try {
      t.ctx.systemKey.decrypt(bad, "card_number");
      assert.fail(`deciphered ${bad.slice(0, 20)}`);
    } catch (error) {
      assert.ok(error instanceof AppError);
      assert.equal(error.def.code, 1005);
      messages.add(error.message);
    }
  }
  assert.equal(messages.size, 1, "every failure must look the same (no padding oracle)");
});

test("registering an unusable key answers 1101", async () => {
  const small = opensslKeyPair(1024);
  const pair = opensslKeyPair();
  const candidates = [
    opensslEcPublicKey(),
    small.publicPem,
    readPrivatePem(pair),
    "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
    "hello",
  ];
  for (const public_key of candidates) {
    const response = await call(t.app, "POST", path, { token: tenant.token, body: { public_key } });
    expectError(response, 1101, 400);
  }
  expectError(await call(t.app, "POST", path, { token: tenant.token, body: {} }), 1000, 400);
  // Regression (third audit): a key OpenSSL reads but will not cipher under (a public exponent
  // over 64 bits on a modulus over 3072 bits) was stored, and every answer ciphered for it was 500.
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 4096 });
  const bigExponent = createPublicKey({
    key: {
      ...publicKey.export({ format: "jwk" }),
      e: Buffer.from("0100000000000000000001", "hex").toString("base64url"),
    },
    format: "jwk",
  });
  const refused = await call(t.app, "POST", path, {
    token: tenant.token,
    body: { public_key: bigExponent.export({ format: "pem", type: "spki" }).toString() },
  });
  expectError(refused, 1101, 400);
  assert.match(refused.body.message, /public exponent/);
  // The earlier registration is untouched, and answered like every secret: not to be stored.
  const kept = await call(t.app, "GET", path, { token: tenant.token });
  expectOk(kept);
  assert.equal(kept.headers["cache-control"], "no-store");
});

test("keys are per API key: another tenant sees only its own", async () => {
  const other = await createTenant(t);
  const pair = opensslKeyPair();
  expectOk(await call(t.app, "POST", path, { token: other.token, body: { public_key: pair.publicPem } }));
  const mine = expectOk(await call<Keys>(t.app, "GET", path, { token: tenant.token }));
  const theirs = expectOk(await call<Keys>(t.app, "GET", path, { token: other.token }));
  assert.notEqual(mine.api_key.public_key, theirs.api_key.public_key);
  assert.equal(theirs.client.id, other.clientId);
  assert.equal(mine.system.public_key, theirs.system.public_key);
});
