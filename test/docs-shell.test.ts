// Proves the documents run as written: every shell block of the README's tour, of
// docs/using-the-api.md and of each guide in docs/guides/, pasted into one bash session per document, against an Emisor started as
// `npm start` starts it (src/main.ts; on PostgreSQL, on a database of this file's own), with the
// credentials its first start printed. A command that fails fails the test with its block and
// what it printed, so an example cannot rot unnoticed.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { bannerOf } from "./helpers/banner.ts";
import { runDocument } from "./helpers/doc-shell.ts";
import { freshDatabase } from "./helpers/harness.ts";

const root = path.resolve(import.meta.dirname, "..");
const speiSecret = `docs-${randomBytes(12).toString("hex")}`;
const networkSecret = `docs-network-${randomBytes(12).toString("hex")}`;
const documents = [
  "README.md",
  "docs/using-the-api.md",
  ...readdirSync(path.join(root, "docs/guides"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/guides/${name}`),
];

let server: ChildProcess | undefined;
let dropDatabase = async () => {};
const values: Record<string, string> = {};

before(async () => {
  // On PostgreSQL the harness makes this file's database (migrated, with no client yet, so the
  // start creates the sandbox tenant and prints it); without DATABASE_URL, an empty data directory.
  let databaseUrl = "";
  if (process.env.DATABASE_URL) {
    const fresh = await freshDatabase();
    await fresh.database.close();
    databaseUrl = fresh.url ?? "";
    dropDatabase = fresh.drop;
  }
  server = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      EMISOR_DATA_DIR: mkdtempSync(path.join(tmpdir(), "emisor-docs-")),
      EMISOR_MASTER_KEY: randomBytes(32).toString("hex"),
      EMISOR_SPEI_WEBHOOK_SECRET: speiSecret,
      EMISOR_CARD_NETWORK_SECRET: networkSecret,
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const banner = await bannerOf(server);
  values.EMISOR = /listening on (http:\/\/\S+)/.exec(banner)?.[1] ?? "";
  values.API_KEY = /api_key: +(\S+)/.exec(banner)?.[1] ?? "";
  values.PASSWORD = /password: +(\S+)/.exec(banner)?.[1] ?? "";
  values.EMISOR_SPEI_WEBHOOK_SECRET = speiSecret;
  values.EMISOR_CARD_NETWORK_SECRET = networkSecret;
  assert.ok(values.EMISOR && values.API_KEY && values.PASSWORD, banner);
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server?.once("exit", resolve));
    server.kill("SIGTERM");
    await exited;
  }
  await dropDatabase();
});

test("every document with shell blocks is run", () => {
  assert.ok(documents.length >= 7, documents.join(", "));
});

for (const document of documents) {
  test(`the shell blocks of ${document} run as written`, async () => {
    const run = await runDocument(path.join(root, document), values);
    assert.ok(run.ok, run.report);
  });
}
