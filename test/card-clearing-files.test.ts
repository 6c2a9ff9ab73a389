// Proves clearing files through the processor's signed route: lines matched to holds, force posts,
// returns, repeats and refused lines counted and summed in the report, each line posted once (a
// repeat of the file answers its report; an upload retried after a crash half-way posts the rest
// and counts what was posted as posted), the file's id refused with other lines, the limits, the
// line's file_id recorded, and the ledger balanced throughout; and the operator's daily settlement
// with the network (`emisor settlement`) over a Mexico City day.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { sql } from "kysely";
import { encryptFor } from "../src/crypto/rsa.ts";
import { shardsOf, systemAccounts } from "../src/ledger/accounts.ts";
import { limits } from "../src/limits.ts";
import { startFile } from "../src/modules/purchases/clearing-file-repository.ts";
import { messageOf, processMessage, purchaseSettings } from "../src/modules/purchases/service.ts";
import { dailySettlement } from "../src/modules/purchases/settlement.ts";
import { cardNetworkSignatureHeader } from "../src/modules/rails/routes.ts";
import { signSpeiCallback } from "../src/modules/transfers/signature.ts";
import { call, createTenant, expectError, expectOk, type Response, type Tenant } from "./helpers/api.ts";
import { panOf, spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { assertLedgerBalanced, messageId, postCardMessage } from "./helpers/rails.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-clearing-files" });
  tenant = await createTenant(t, { available: 100_000 });
});
after(() => t.close());

interface Tally {
  count: number;
  amount: number;
}
interface Report {
  file_id: string;
  lines: number;
  lines_sha256: string;
  matched: Tally;
  force_posts: Tally;
  returns: Tally;
  net: number;
  over_tolerance: Tally & { lines: Array<{ line: number; message_id: string; authorization_id: string }> };
  duplicates: Tally & { lines: Array<{ line: number; message_id: string }> };
  refused: {
    count: number;
    lines: Array<{ line: number; message_id: string | null; code: number; message: string }>;
  };
  processed_at: string;
}

const merchant = { name: "OXXO INSURGENTES", city: "CDMX", country: "MEX", mcc: "5411" };

let fileSequence = 0;
function fileId(): string {
  fileSequence += 1;
  return `FILE-${process.pid}-${Date.now()}-${fileSequence}`;
}

/** A file as NDJSON: the header line, then each line (a string is sent as it is, else as JSON). */
function ndjson(id: string, lines: unknown[], eol = "\n"): string {
  const text = lines.map((line) => (typeof line === "string" ? line : JSON.stringify(line)));
  return [JSON.stringify({ file_id: id }), ...text].join(eol) + eol;
}

/** POSTs a clearing file's bytes signed with the configured secret (or unsigned, or as given). */
async function postFile(
  raw: string,
  options: { header?: string | null; contentType?: string } = {},
): Promise<Response<Report>> {
  const header =
    options.header === undefined
      ? signSpeiCallback(t.config.cardNetworkSecret ?? "", raw, Math.floor(Date.now() / 1000))
      : options.header;
  return call<Report>(t.app, "POST", "/v1/rails/cards/clearing_files", {
    raw,
    headers: {
      "content-type": options.contentType ?? "application/x-ndjson",
      ...(header === null ? {} : { [cardNetworkSignatureHeader]: header }),
    },
  });
}

/** The report's digest of the lines: each message line as sent, ending in a LF. */
function digestOf(lines: unknown[]): string {
  return createHash("sha256")
    .update(lines.map((line) => `${JSON.stringify(line)}\n`).join(""))
    .digest("hex");
}

async function card(funds: number): Promise<string> {
  return (await spendableCard(t, tenant, { commission: 0, funds })).id;
}

/** An approved authorization of `cents` on the card: its id. */
async function hold(cardId: string, cents: number): Promise<string> {
  const answer = expectOk(
    await postCardMessage(t, {
      type: "AUTHORIZATION",
      card_id: cardId,
      amount: cents,
      merchant,
      channel: "POS_CHIP",
    }),
  ) as { result: string; authorization_id: string };
  assert.equal(answer.result, "APPROVED");
  return answer.authorization_id;
}

async function available(cardId: string): Promise<{ available: number; held: number; owed: number }> {
  const view = expectOk(await call(t.app, "GET", `/v1/cards/${cardId}`, { token: tenant.token })) as {
    card: { available: number; held: number; owed: number };
  };
  return { available: view.card.available, held: view.card.held, owed: view.card.owed };
}

test("the route refuses unsigned files, wrongly signed ones, and other content types", async () => {
  const raw = ndjson(fileId(), [{}]);
  expectError(await postFile(raw, { header: null }), 2801, 401);
  expectError(await postFile(raw, { header: "t=1,v1=00" }), 2801, 401);
  const json = JSON.stringify({ file_id: fileId(), lines: [] });
  const refused = expectError(await postFile(json, { contentType: "application/json" }), 1003, 415);
  assert.match(refused.body.message, /application\/x-ndjson/);
});

test("a file's report counts and sums matched, force posts, returns, repeats and refused lines", async () => {
  const cardId = await card(1_000);
  const first = await hold(cardId, 10_000);
  const second = await hold(cardId, 5_000);
  const shop = await hold(cardId, 1_000);
  const sentBefore = messageId();
  expectOk(
    await postCardMessage(t, {
      type: "RETURN",
      card_id: cardId,
      amount: 100,
      merchant,
      message_id: sentBefore,
    }),
  );
  const repeated = messageId();
  const lines = [
    { message_id: messageId(), type: "CLEARING", authorization_id: first, amount: 10_000 },
    { message_id: repeated, type: "CLEARING", authorization_id: second, amount: 4_000 },
    { message_id: messageId(), type: "CLEARING", authorization_id: shop, amount: 1_500 },
    { message_id: messageId(), type: "CLEARING", card_id: cardId, amount: 2_500, merchant },
    { message_id: messageId(), type: "RETURN", card_id: cardId, amount: 700, merchant },
    { message_id: repeated, type: "CLEARING", authorization_id: second, amount: 4_000 },
    { message_id: sentBefore, type: "RETURN", card_id: cardId, amount: 100, merchant },
    {
      message_id: messageId(),
      type: "CLEARING",
      card_id: "00000000-0000-4000-8000-00000000dead",
      amount: 1,
      merchant,
    },
    {
      message_id: messageId(),
      type: "CLEARING",
      authorization_id: "00000000-0000-4000-8000-00000000beef",
      amount: 1,
    },
    {
      message_id: messageId(),
      type: "AUTHORIZATION",
      card_id: cardId,
      amount: 1,
      merchant,
      channel: "POS_CHIP",
    },
    { message_id: messageId(), type: "CLEARING", authorization_id: first, amount: -5 },
    { message_id: messageId(), type: "CLEARING", card_id: cardId, amount: 5 },
    '"not a message"',
    '{"message_id": "broken", "type": "CLEARING",',
    { message_id: messageId(), type: "RETURN", card_id: cardId, amount: 100, merchant: { name: "X" } },
  ];
  const id = fileId();
  const response = await postFile(ndjson(id, lines));
  const report = expectOk(response);
  assert.equal(response.headers["idempotent-replayed"], undefined);
  assert.deepEqual(
    {
      lines: report.lines,
      matched: report.matched,
      force_posts: report.force_posts,
      returns: report.returns,
      net: report.net,
      over: [report.over_tolerance.count, report.over_tolerance.amount],
      overLines: report.over_tolerance.lines.map((l) => [l.line, l.authorization_id]),
      duplicates: [report.duplicates.count, report.duplicates.amount],
      duplicateLines: report.duplicates.lines.map((l) => [l.line, l.message_id]),
    },
    {
      lines: 15,
      matched: { count: 3, amount: 15_500 },
      force_posts: { count: 1, amount: 2_500 },
      returns: { count: 1, amount: 700 },
      net: 17_300,
      over: [1, 1_500],
      overLines: [[4, shop]],
      duplicates: [2, 4_100],
      duplicateLines: [
        [7, repeated],
        [8, sentBefore],
      ],
    },
  );
  // Line numbers count the file_id line: the first message is line 2.
  assert.deepEqual(
    report.refused.lines.map((l) => [l.line, l.code]),
    [
      [9, 3302],
      [10, 3801],
      [11, 1000],
      [12, 1000],
      [13, 1000],
      [14, 1000],
      [15, 1001],
      [16, 1000],
    ],
  );
  const reasons = report.refused.lines.map((l) => l.message);
  assert.match(reasons[2] ?? "", /^type: must be CLEARING or RETURN/);
  assert.match(reasons[3] ?? "", /^amount: must be at least 0/);
  assert.match(reasons[4] ?? "", /^merchant: is required/);
  assert.match(reasons[5] ?? "", /^line: must be an object/);
  assert.deepEqual([reasons[6], report.refused.lines[6]?.message_id], ["The line is not valid JSON", null]);
  assert.match(reasons[7] ?? "", /^merchant\.mcc: is required/);
  // 1,000 - 160 held + 1 (the return sent before) + 10 (the rest of the second hold) - 5 (the
  // shop's clearing past its hold) - 25 (the force post) + 7 (the return).
  assert.deepEqual(await available(cardId), { available: 828, held: 0, owed: 0 });
  const recorded = await t.ctx.db
    .selectFrom("card_network_messages")
    .select(["message_id", "file_id"])
    .where("file_id", "=", id)
    .execute();
  assert.equal(recorded.length, 5);
  await assertLedgerBalanced(t);
});

test("a repeat answers the stored report; the same file_id with other lines is refused", async () => {
  const cardId = await card(100);
  const authorization = await hold(cardId, 2_000);
  const id = fileId();
  const lines = [
    { message_id: messageId(), type: "CLEARING", authorization_id: authorization, amount: 2_000 },
  ];
  const first = expectOk(await postFile(ndjson(id, lines)));
  assert.equal(first.lines_sha256, digestOf(lines));
  // CRLF line ends and blank lines change nothing: the message lines are the same bytes.
  const again = await postFile(ndjson(id, ["", ...lines, "  "], "\r\n"));
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(again), first);
  expectError(await postFile(ndjson(id, [{ ...lines[0], amount: 1_999 }])), 4802, 409);
  assert.deepEqual(await available(cardId), { available: 80, held: 0, owed: 0 });
  await assertLedgerBalanced(t);
});

test("an upload retried after a crash half-way posts the rest and counts the first half as posted", async () => {
  const cardId = await card(500);
  const holds = [await hold(cardId, 1_000), await hold(cardId, 2_000), await hold(cardId, 3_000)];
  const id = fileId();
  const lines = holds.map((authorization, i) => ({
    message_id: messageId(),
    type: "CLEARING",
    authorization_id: authorization,
    amount: (i + 1) * 1_000,
  }));
  // What the first upload did before it died: the file's row, and its first two lines.
  await startFile(t.ctx.db, id, lines.length, digestOf(lines));
  for (const line of lines.slice(0, 2))
    await processMessage(t.ctx.db, await messageOf(t.ctx, line as never, id), purchaseSettings(t.ctx));
  const report = expectOk(await postFile(ndjson(id, lines)));
  assert.deepEqual([report.matched, report.duplicates.count], [{ count: 3, amount: 6_000 }, 0]);
  assert.deepEqual(await available(cardId), { available: 440, held: 0, owed: 0 });
  await assertLedgerBalanced(t);
});

/** The lines of one card's day, on its holds: split, tipped past the rule, forced past its balance, refunded. */
async function cardDay(cardId: string) {
  const restaurant = { ...merchant, name: "TACOS EL GUERO", mcc: "5812" };
  const order = await hold(cardId, 3_000);
  const answer = expectOk(
    await postCardMessage(t, {
      type: "AUTHORIZATION",
      card_id: cardId,
      amount: 5_000,
      merchant: restaurant,
      channel: "CONTACTLESS",
    }),
  ) as { authorization_id: string };
  const shop = await hold(cardId, 2_000);
  const lines = [
    { type: "CLEARING", authorization_id: order, amount: 1_000, is_final: false },
    { type: "CLEARING", authorization_id: order, amount: 1_500 },
    { type: "CLEARING", authorization_id: answer.authorization_id, amount: 6_500 },
    { type: "CLEARING", card_id: cardId, amount: 9_000, merchant },
    { type: "RETURN", card_id: cardId, amount: 4_000, merchant },
    { type: "CLEARING", card_id: cardId, authorization_id: shop, amount: 2_000 },
    { type: "RETURN", authorization_id: order, amount: 100 },
  ].map((line) => ({ message_id: messageId(), ...line }));
  return { lines, authorizations: [order, answer.authorization_id, shop] };
}

async function authorizationState(id: string) {
  const view = expectOk(await call(t.app, "GET", `/v1/authorizations/${id}`, { token: tenant.token })) as {
    authorization: { status: string; held: number; cleared: number; authorized: number };
  };
  const { status, held, cleared, authorized } = view.authorization;
  return { status, held, cleared, authorized };
}

test("a file posts what the messages route posts, line for line", async () => {
  const [one, other] = [await card(100), await card(100)];
  const sent = await cardDay(one);
  const answers = [];
  for (const line of sent.lines)
    answers.push(expectOk(await postCardMessage(t, line)) as Record<string, unknown>);
  const filed = await cardDay(other);
  const report = expectOk(await postFile(ndjson(fileId(), filed.lines)));
  assert.deepEqual([report.matched.count, report.force_posts.count, report.returns.count], [4, 1, 2]);
  assert.deepEqual(
    report.over_tolerance.lines.map((l) => l.line),
    [4],
  );
  const stored = await t.ctx.db
    .selectFrom("card_network_messages")
    .select(["message_id", "response"])
    .where(
      "message_id",
      "in",
      filed.lines.map((l) => l.message_id),
    )
    .execute();
  const byId = new Map(stored.map((row) => [row.message_id, row.response as Record<string, unknown>]));
  // The same answers, but for the ids (and a force post's new authorization).
  const comparable = (answer: Record<string, unknown> | undefined) => ({
    ...answer,
    message_id: undefined,
    authorization_id: undefined,
  });
  assert.deepEqual(
    filed.lines.map((line) => comparable(byId.get(line.message_id))),
    answers.map(comparable),
  );
  assert.deepEqual(await available(other), await available(one));
  // 100 held whole; 5 of the order's hold back; the tip past its hold takes those 5 and owes 10;
  // the force post owes 90 more; the returns repay 40 and 1.
  assert.deepEqual(await available(other), { available: 0, held: 0, owed: 59 });
  // Posted as one chunk: every entry on the chunk's one CARD_NETWORK shard (a chunk that failed
  // whole would have been posted a line at a time, each line on a shard of its own choosing).
  const shards = await sql<{ account_id: string }>`
    select distinct p.account_id from card_network_messages m join postings p on p.entry_id = m.entry_id
    where m.message_id = any(${filed.lines.map((l) => l.message_id)}::text[])
      and p.account_id = any(${shardsOf(systemAccounts.cardNetwork)}::uuid[])`.execute(t.ctx.db);
  assert.equal(shards.rows.length, 1);
  for (const [i, id] of filed.authorizations.entries())
    assert.deepEqual(await authorizationState(id), await authorizationState(sent.authorizations[i] ?? ""));
  await assertLedgerBalanced(t);
});

test("a line may name its card by its number, ciphered under the system key", async () => {
  const cardId = await card(100);
  const pan = await panOf(t, cardId);
  const number = () => encryptFor(t.ctx.systemKey.publicKeyPem, pan);
  const lines = [
    { message_id: messageId(), type: "CLEARING", card_number: number(), amount: 1_200, merchant },
    { message_id: messageId(), type: "RETURN", card_number: number(), amount: 200, merchant },
    { message_id: messageId(), type: "CLEARING", card_number: pan, amount: 1, merchant },
  ];
  const report = expectOk(await postFile(ndjson(fileId(), lines)));
  assert.deepEqual(
    [report.force_posts, report.returns],
    [
      { count: 1, amount: 1_200 },
      { count: 1, amount: 200 },
    ],
  );
  assert.deepEqual(
    report.refused.lines.map((l) => [l.line, l.code]),
    [[4, 1301]],
  );
  assert.deepEqual(await available(cardId), { available: 90, held: 0, owed: 0 });
});

test("two uploads of one file at once post each line once and answer one report", async () => {
  const cardId = await card(500);
  const holds = [await hold(cardId, 1_000), await hold(cardId, 2_000)];
  const lines = [
    ...holds.map((id) => ({
      message_id: messageId(),
      type: "CLEARING",
      authorization_id: id,
      amount: 1_000,
    })),
    { message_id: messageId(), type: "RETURN", card_id: cardId, amount: 500, merchant },
  ];
  const raw = ndjson(fileId(), lines);
  const [first, second] = await Promise.all([postFile(raw), postFile(raw)]);
  assert.deepEqual(expectOk(second), expectOk(first));
  assert.deepEqual(
    [expectOk(first).matched, expectOk(first).returns.count],
    [{ count: 2, amount: 2_000 }, 1],
  );
  // 500 - 30 held + 10 (the second hold's rest) + 5 (the return).
  assert.deepEqual(await available(cardId), { available: 485, held: 0, owed: 0 });
  await assertLedgerBalanced(t);
});

test("a file without a valid first line, without lines or over the limits is refused whole", async () => {
  const noHeader = expectError(
    await postFile(ndjson("", [{}]).replace('{"file_id":""}', '{"id":1}')),
    1000,
    400,
  );
  assert.match(noHeader.body.message, /^file_id: is required/);
  expectError(await postFile("\n\n"), 1004, 400);
  expectError(await postFile(`${JSON.stringify({ file_id: fileId() })}\n`), 1000, 400);
  const lines = Array.from({ length: limits.clearingFileLinesMax + 1 }, () => "{}");
  const tooMany = expectError(await postFile(ndjson(fileId(), lines)), 1000, 400);
  assert.match(tooMany.body.message, /^lines: must be at most 100000 message lines/);
  const padding = "x".repeat(limits.clearingFileBytesMax);
  expectError(await postFile(`{"file_id":"big"}\n"${padding}"\n`), 1002, 413);
});

/** The CLI against this file's database (PostgreSQL: the embedded one is this process's alone). */
async function emisor(args: string[]) {
  const env = {
    ...process.env,
    EMISOR_MASTER_KEY: t.config.masterKey,
    EMISOR_DATA_DIR: t.config.dataDir,
    DATABASE_URL: t.databaseUrl ?? "",
  };
  return promisify(execFile)(process.execPath, ["bin/emisor.js", ...args], { env, timeout: 60_000 });
}

test("the day's settlement: clearings less returns plus return reversals, by Mexico City's day", async () => {
  const cardId = await card(1_000);
  const authorization = await hold(cardId, 10_000);
  const id = {
    cleared: messageId(),
    forced: messageId(),
    returned: messageId(),
    early: messageId(),
    late: messageId(),
  };
  const lines = [
    { message_id: id.cleared, type: "CLEARING", authorization_id: authorization, amount: 10_000 },
    { message_id: id.forced, type: "CLEARING", card_id: cardId, amount: 2_000, merchant },
    { message_id: id.returned, type: "RETURN", card_id: cardId, amount: 3_000, merchant },
    { message_id: id.early, type: "CLEARING", card_id: cardId, amount: 111, merchant },
    { message_id: id.late, type: "RETURN", card_id: cardId, amount: 222, merchant },
  ];
  expectOk(await postFile(ndjson(fileId(), lines)));
  const reversal = messageId();
  expectOk(
    await postCardMessage(t, {
      type: "RETURN_REVERSAL",
      original_message_id: id.returned,
      message_id: reversal,
    }),
  );
  // 2021-07-01 in Mexico City ran from 05:00 to 05:00 UTC (summer time, before 2023): the
  // messages are moved to instants around those bounds.
  const at: Record<string, string> = {
    [id.cleared]: "2021-07-01T05:00:00Z",
    [id.forced]: "2021-07-01T17:30:00Z",
    [id.returned]: "2021-07-02T04:59:59.999Z",
    [reversal]: "2021-07-01T23:00:00Z",
    [id.early]: "2021-07-01T04:59:59.999Z",
    [id.late]: "2021-07-02T05:00:00Z",
  };
  for (const [messageId, instant] of Object.entries(at))
    await sql`update card_network_messages set created_at = ${instant}::timestamptz where message_id = ${messageId}`.execute(
      t.ctx.db,
    );
  const day = await dailySettlement(t.ctx.db, "2021-07-01");
  assert.deepEqual(
    [
      day.from.toISOString(),
      day.until.toISOString(),
      day.clearings,
      day.returns,
      day.returnReversals,
      day.owedCents,
    ],
    [
      "2021-07-01T05:00:00.000Z",
      "2021-07-02T05:00:00.000Z",
      { count: 2, amountCents: 12_000n },
      { count: 1, amountCents: 3_000n },
      { count: 1, amountCents: 3_000n },
      12_000n,
    ],
  );
  const winter = await dailySettlement(t.ctx.db, "2030-01-15");
  assert.deepEqual([winter.from.toISOString(), winter.owedCents], ["2030-01-15T06:00:00.000Z", 0n]);
  await assertLedgerBalanced(t);
});

test("emisor settlement prints the day's figures, for a program (--json) and a person", async (s) => {
  await assert.rejects(emisor(["settlement", "--date", "2021-02-30"]), /--date is required, as YYYY-MM-DD/);
  await assert.rejects(emisor(["settlement"]), /--date is required/);
  if (!t.databaseUrl) {
    s.skip("the CLI shares this file's database on PostgreSQL only (the embedded one is locked)");
    return;
  }
  const cardId = await card(100);
  const forced = messageId();
  const line = { message_id: forced, type: "CLEARING", card_id: cardId, amount: 4_550, merchant };
  expectOk(await postFile(ndjson(fileId(), [line])));
  // 2030-03-01 in Mexico City runs from 06:00 to 06:00 UTC.
  await sql`update card_network_messages set created_at = '2030-03-01T06:00:00Z' where message_id = ${forced}`.execute(
    t.ctx.db,
  );
  const { stdout } = await emisor(["settlement", "--date", "2030-03-01", "--json"]);
  assert.deepEqual(JSON.parse(stdout), {
    date: "2030-03-01",
    time_zone: "America/Mexico_City",
    from: "2030-03-01T06:00:00.000Z",
    until: "2030-03-02T06:00:00.000Z",
    clearings: { count: 1, amount: 45.5 },
    returns: { count: 0, amount: 0 },
    return_reversals: { count: 0, amount: 0 },
    owed_to_network: 45.5,
  });
  const human = await emisor(["settlement", "--date", "2030-03-01"]);
  assert.match(human.stdout, /^Card network settlement for 2030-03-01 \(America\/Mexico_City/);
  assert.match(human.stdout, /owed to network\s+45\.50 MXN/);
});
