// Proves clearing files through the processor's signed route: lines matched to holds, force posts,
// returns, repeats and refused lines counted and summed in the report, each line posted once (a
// repeat of the file answers its report; an upload retried after a crash half-way posts the rest
// and counts what was posted as posted), the file's id refused with other lines, the limits, the
// line's file_id recorded, and the ledger balanced throughout.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { limits } from "../src/limits.ts";
import { startFile } from "../src/modules/purchases/clearing-file-repository.ts";
import { linesDigest } from "../src/modules/purchases/clearing-files.ts";
import { messageOf, processMessage, purchaseSettings } from "../src/modules/purchases/service.ts";
import { cardNetworkSignatureHeader } from "../src/modules/rails/routes.ts";
import { signSpeiCallback } from "../src/modules/transfers/signature.ts";
import { call, createTenant, expectError, expectOk, type Response, type Tenant } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
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

/** POSTs a clearing file signed with the configured secret (or unsigned, or as given raw). */
async function postFile(
  body: unknown,
  options: { header?: string | null; raw?: string } = {},
): Promise<Response<Report>> {
  const raw = options.raw ?? JSON.stringify(body);
  const header =
    options.header === undefined
      ? signSpeiCallback(t.config.cardNetworkSecret ?? "", raw, Math.floor(Date.now() / 1000))
      : options.header;
  return call<Report>(t.app, "POST", "/v1/rails/cards/clearing_files", {
    raw,
    headers: header === null ? {} : { [cardNetworkSignatureHeader]: header },
  });
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

test("the route refuses unsigned files and wrongly signed ones", async () => {
  const body = { file_id: fileId(), lines: [{}] };
  expectError(await postFile(body, { header: null }), 2801, 401);
  expectError(await postFile(body, { header: "t=1,v1=00" }), 2801, 401);
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
    "not a message",
  ];
  const id = fileId();
  const response = await postFile({ file_id: id, lines });
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
      lines: 13,
      matched: { count: 3, amount: 15_500 },
      force_posts: { count: 1, amount: 2_500 },
      returns: { count: 1, amount: 700 },
      net: 17_300,
      over: [1, 1_500],
      overLines: [[3, shop]],
      duplicates: [2, 4_100],
      duplicateLines: [
        [6, repeated],
        [7, sentBefore],
      ],
    },
  );
  assert.deepEqual(
    report.refused.lines.map((l) => [l.line, l.code]),
    [
      [8, 3302],
      [9, 3801],
      [10, 1000],
      [11, 1000],
      [12, 1000],
      [13, 1000],
    ],
  );
  assert.match(report.refused.lines[2]?.message ?? "", /^type: must be CLEARING or RETURN/);
  assert.match(report.refused.lines[3]?.message ?? "", /^amount: must be at least 0/);
  assert.match(report.refused.lines[4]?.message ?? "", /^merchant: is required/);
  assert.equal(report.refused.lines[5]?.message_id, null);
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
  const first = expectOk(await postFile({ file_id: id, lines }));
  // The same lines, spaced and ordered otherwise, are the same file.
  const reordered = lines.map((l) => ({
    amount: l.amount,
    type: l.type,
    authorization_id: l.authorization_id,
    message_id: l.message_id,
  }));
  const again = await postFile({ file_id: id, lines: reordered }, {});
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(again), first);
  assert.equal(first.lines_sha256, linesDigest(lines));
  const other = [{ ...lines[0], amount: 1_999 }];
  expectError(await postFile({ file_id: id, lines: other }), 4802, 409);
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
  await startFile(t.ctx.db, id, lines.length, linesDigest(lines));
  for (const line of lines.slice(0, 2))
    await processMessage(t.ctx.db, await messageOf(t.ctx, line as never, id), purchaseSettings(t.ctx));
  const report = expectOk(await postFile({ file_id: id, lines }));
  assert.deepEqual([report.matched, report.duplicates.count], [{ count: 3, amount: 6_000 }, 0]);
  assert.deepEqual(await available(cardId), { available: 440, held: 0, owed: 0 });
  await assertLedgerBalanced(t);
});

test("a file over the line limit is refused whole (400), over the byte limit with 413", async () => {
  const lines = Array.from({ length: limits.clearingFileLinesMax + 1 }, () => ({}));
  const tooMany = expectError(await postFile({ file_id: fileId(), lines }), 1000, 400);
  assert.match(tooMany.body.message, /^lines: /);
  expectError(await postFile({ file_id: fileId(), lines: [] }), 1000, 400);
  const padding = "x".repeat(limits.clearingFileBytesMax);
  expectError(
    await postFile(undefined, { raw: `{"file_id":"big","lines":[],"pad":"${padding}"}` }),
    1002,
    413,
  );
});
