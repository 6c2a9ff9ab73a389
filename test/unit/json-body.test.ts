// The checks of a JSON text that parsed: nesting depth and numbers that must read exactly.
import assert from "node:assert/strict";
import { test } from "node:test";
import { jsonTextProblem, readsExactly } from "../../src/http/json-body.ts";
import { limits } from "../../src/limits.ts";

test("a number reads exactly when the double JSON.parse makes is the number written", () => {
  for (const token of [
    "0",
    "-0",
    "100.10",
    "1e2",
    "0.1",
    "0.30000000000000004",
    "19.432608",
    "123456789012345",
    "9007199254740992e-1",
    "1e300",
    "1E-7",
    "100000000000000000000000",
    String(Math.PI),
    String(Number.MAX_SAFE_INTEGER),
    String(-Number.MAX_VALUE),
  ]) {
    assert.equal(readsExactly(token), true, token);
  }
  for (const token of [
    "0.009999999999999999999",
    "1.00000000000000000001",
    "12345678901234567890",
    "9007199254740993",
    "1e400",
    "-1e400",
    "1e-400",
    "0.1000000000000000055511151231257827",
  ]) {
    assert.equal(readsExactly(token), false, token);
  }
});

test("digits, brackets and quotes inside strings are text, not numbers or nesting", () => {
  const text = JSON.stringify({
    clabe: "646180000000000012",
    card: "4111111111111111111111",
    note: '[[[[{{{{"\\" 0.009999999999999999999 ]]]',
    'key "with" [quotes]': 1,
    list: [1, 2.5, "3.000000000000000000001"],
  });
  assert.equal(jsonTextProblem(text), undefined);
});

test("the field of an inexact number is named by its path, array indexes included", () => {
  assert.deepEqual(jsonTextProblem('{"amount":0.009999999999999999999}'), {
    field: "amount",
    rule: "number",
    message: "0.009999999999999999999 cannot be read exactly as a number: send at most 15 significant digits",
  });
  const nested = '{"a":{"b":1},"c":[{"d":2},1.00000000000000000001]}';
  assert.equal(jsonTextProblem(nested)?.field, "c.1");
  assert.equal(jsonTextProblem('{"a" : { "k\\"q" : [ 12345678901234567890 ] } }')?.field, 'a.k"q.0');
  assert.equal(jsonTextProblem("12345678901234567890")?.field, "body");
  const long = jsonTextProblem(`{"n":0.${"1".repeat(60)}}`)?.message ?? "";
  assert.match(long, /^0\.1{38}\.\.\. cannot be read exactly/);
});

test("a member name twice in one object is refused, however it is escaped; the same name in other objects is not", () => {
  assert.deepEqual(jsonTextProblem('{"card_number":"x","amount":0.01,"amount":5000000}'), {
    field: "amount",
    rule: "duplicate",
    message: "is sent twice: send each field once",
  });
  assert.equal(jsonTextProblem('{"amount":1,"\\u0061mount":2}')?.field, "amount");
  assert.equal(jsonTextProblem('{"a":{"b":1,"c":{"b":2}},"list":[{"b":1},{"b":2}],"b":3}'), undefined);
  assert.equal(jsonTextProblem('{"a":[{"x":1,"y":2,"x":3}]}')?.field, "a.0.x");
  // Strings that are values, not names, may repeat freely.
  assert.equal(jsonTextProblem('{"a":"amount","b":"amount"}'), undefined);
});

test("nesting is allowed up to the limit and refused past it, naming where", () => {
  const nest = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
  assert.equal(jsonTextProblem(nest(limits.jsonDepthMax)), undefined);
  assert.equal(jsonTextProblem(`{"a":${nest(limits.jsonDepthMax - 1)}}`), undefined);
  const deep = jsonTextProblem(`{"a":${nest(limits.jsonDepthMax)}}`);
  assert.equal(deep?.rule, "depth");
  assert.equal(deep?.field, `a${".0".repeat(limits.jsonDepthMax - 1)}`);
  assert.equal(jsonTextProblem(nest(100_000))?.rule, "depth");
});
