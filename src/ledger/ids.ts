import { randomFillSync } from "node:crypto";

const bytes = Buffer.alloc(16);
/** Random bytes drawn 4 KiB at a time (as Node's own randomUUID does): one draw per 409 ids. */
const pool = Buffer.alloc(4096);
let used = pool.length;

/**
 * A time-ordered UUID (version 7, RFC 9562): 48 bits of Unix milliseconds, then 74 random bits.
 * Journal entries and events are written once per payment, forever, and looked up by id. A random
 * (version 4) key puts each insert on a random leaf of the primary-key index, so once the index
 * outgrows the buffer cache every insert reads and dirties a cold page; keys that grow with time
 * all land on the right edge, so a ledger of millions of entries inserts as fast as a new one.
 * The id tells when the row was made, which its created_at says anyway.
 */
export function timeOrderedUuid(now: number = Date.now()): string {
  if (used + 10 > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  pool.copy(bytes, 6, used, used + 10);
  used += 10;
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
