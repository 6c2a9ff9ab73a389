import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { timeOrderedUuid } from "../../src/ledger/ids.ts";

describe("time-ordered ids (journal entries, events)", () => {
  it("are version-7 UUIDs that PostgreSQL's uuid type and the API's uuid format accept", () => {
    const id = timeOrderedUuid();
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("carry their millisecond first, so later ids sort after earlier ones", () => {
    const at = Date.UTC(2026, 10, 22, 6, 30);
    const id = timeOrderedUuid(at);
    assert.equal(Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16), at);
    const ids = [at + 2, at, at + 1, at + 60_000].map((ms) => timeOrderedUuid(ms));
    assert.deepEqual([...ids].sort(), [ids[1], ids[2], ids[0], ids[3]]);
  });

  it("differ within one millisecond (74 random bits)", () => {
    const at = Date.now();
    const ids = new Set(Array.from({ length: 10_000 }, () => timeOrderedUuid(at)));
    assert.equal(ids.size, 10_000);
  });
});
