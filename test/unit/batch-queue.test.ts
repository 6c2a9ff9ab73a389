// The batch queue (src/db/batch-queue.ts): what queues while a batch is written is the next batch,
// at most `max` of it; with a gathering wait, items submitted within it go in one write; a write
// that throws rejects its batch and the queue goes on.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BatchQueue } from "../../src/db/batch-queue.ts";

function recording(gatherMs = 0, max = 10) {
  const writes: number[][] = [];
  const queue = new BatchQueue<number, number>(
    max,
    async (batch) => {
      writes.push(batch.map(({ item }) => item));
      await new Promise((resolve) => setTimeout(resolve, 5));
      for (const { item, resolve } of batch) resolve(item * 2);
    },
    gatherMs,
  );
  return { queue, writes };
}

test("what queues while a batch is written is the next batch, at most max of it", async () => {
  const { queue, writes } = recording(0, 3);
  const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => queue.submit(n)));
  assert.deepEqual(answers, [2, 4, 6, 8, 10]);
  assert.deepEqual(writes, [[1], [2, 3, 4], [5]]);
});

test("with a gathering wait, items submitted apart within it are one write", async () => {
  const { queue, writes } = recording(30);
  const first = queue.submit(1);
  await new Promise((resolve) => setTimeout(resolve, 10));
  const second = queue.submit(2);
  assert.deepEqual(await Promise.all([first, second]), [2, 4]);
  assert.deepEqual(writes, [[1, 2]]);
});

test("a write that throws rejects its batch, and the next batch is written", async () => {
  let fail = true;
  const queue = new BatchQueue<number, number>(10, async (batch) => {
    if (fail) throw new Error("down");
    for (const { item, resolve } of batch) resolve(item);
  });
  const failed = queue.submit(1);
  const next = queue.submit(2);
  fail = false;
  await assert.rejects(failed, /down/);
  assert.equal(await next, 2);
  assert.equal(await queue.submit(3), 3);
});
