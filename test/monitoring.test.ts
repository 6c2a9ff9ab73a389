// Proves that the example alert rules and Grafana dashboard in docs/monitoring name only metrics
// that a running app serves on /metrics.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { startTestApp } from "./helpers/harness.ts";

const read = (file: string) => readFileSync(new URL(`../docs/monitoring/${file}`, import.meta.url), "utf8");

/** The metric families a text names: histogram series (_bucket, _sum, _count) by their family. */
function metricsNamed(text: string): Set<string> {
  const names = new Set<string>();
  for (const [name] of text.matchAll(/emisor_[a-z0-9_]+/g)) names.add(name);
  return names;
}

test("every metric in the example alerts and dashboard is on /metrics", async () => {
  const dashboard = JSON.parse(read("grafana-dashboard.json")) as { panels: unknown[] };
  assert.ok(dashboard.panels.length > 0);
  const named = new Set([...metricsNamed(read("alerts.yml")), ...metricsNamed(JSON.stringify(dashboard))]);
  assert.ok(named.size >= 10, `only ${named.size} metrics named`);
  const t = await startTestApp();
  try {
    const scrape = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    const families = new Set([...scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => m[1]));
    const histograms = new Set([...scrape.matchAll(/^# TYPE (\S+) histogram$/gm)].map((m) => m[1] ?? ""));
    for (const name of named) {
      const family = name.replace(/_(bucket|sum|count)$/, "");
      const found = families.has(name) || (family !== name && histograms.has(family));
      assert.ok(found, `${name} is named in docs/monitoring but not on /metrics`);
    }
  } finally {
    await t.close();
  }
});
