// Proves what the per-address login limit counts: an IPv6 host's whole /64 (it can rotate inside
// it), IPv4 as itself, an IPv4-mapped IPv6 address as its IPv4.
import assert from "node:assert/strict";
import { test } from "node:test";
import { addressBucket } from "../../src/modules/auth/service.ts";

test("the login limit counts an IPv6 /64 as one address, and IPv4 as itself", () => {
  const cases: Array<[string, string]> = [
    ["203.0.113.7", "203.0.113.7"],
    ["::ffff:203.0.113.7", "203.0.113.7"],
    ["2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"],
    ["2001:db8:1:2::1", "2001:db8:1:2::/64"],
    ["2001:0DB8:0001:0002:0:0:0:ffff", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["::1", "0:0:0:0::/64"],
    ["fe80::1%eth0", "fe80:0:0:0::/64"],
    ["64:ff9b::192.0.2.33", "64:ff9b:0:0::/64"],
    ["unknown", "unknown"],
  ];
  for (const [address, bucket] of cases) assert.equal(addressBucket(address), bucket, address);
  // Two addresses of one /64 share a count; neighbouring /64s do not.
  assert.equal(addressBucket("2001:db8:1:2::a"), addressBucket("2001:db8:1:2:ffff::b"));
  assert.notEqual(addressBucket("2001:db8:1:2::a"), addressBucket("2001:db8:1:3::a"));
});
