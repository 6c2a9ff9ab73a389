import type { FastifyInstance } from "fastify";
import { sql } from "kysely";
import { errors } from "../../src/errors.ts";
import type { TestApp } from "./harness.ts";

/**
 * The app's own list of routes, read from its OpenAPI document, so that the fuzzer and the
 * isolation matrix cover a new route without anyone remembering to add it.
 */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  default?: unknown;
  "x-decimals"?: number;
}

export interface Parameter {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  schema: JsonSchema;
}

export interface RouteInfo {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** OpenAPI form, e.g. /v1/cards/{id}. */
  path: string;
  /** "METHOD /path", the key used in lists of routes. */
  key: string;
  protected: boolean;
  pathParams: Parameter[];
  queryParams: Parameter[];
  body: JsonSchema | undefined;
}

interface OpenApiOperation {
  security?: unknown[];
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
}

export async function documentedRoutes(app: FastifyInstance): Promise<RouteInfo[]> {
  const spec = (await app.inject({ url: "/openapi.json" })).json() as {
    paths: Record<string, Record<string, OpenApiOperation>>;
  };
  const routes: RouteInfo[] = [];
  for (const [path, operations] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const upper = method.toUpperCase() as RouteInfo["method"];
      const parameters = operation.parameters ?? [];
      routes.push({
        method: upper,
        path,
        key: `${upper} ${path}`,
        protected: (operation.security?.length ?? 0) > 0,
        pathParams: parameters.filter((p) => p.in === "path"),
        queryParams: parameters.filter((p) => p.in === "query"),
        body: operation.requestBody?.content?.["application/json"]?.schema,
      });
    }
  }
  return routes;
}

/**
 * Every path the app registered, documented or not, read from Fastify's route tree
 * (printRoutes), in OpenAPI form (/v1/cards/{id}). Each line of the tree is a node whose label
 * extends its parent's path; the depth is the column of its branch marker.
 */
export function registeredPaths(app: FastifyInstance): string[] {
  const stack: string[] = [];
  const paths = new Set<string>();
  for (const line of app.printRoutes({ commonPrefix: false }).split("\n")) {
    const marker = line.search(/[├└]── /);
    if (marker < 0) continue;
    const depth = Math.floor(marker / 4);
    const label = line.slice(marker + 4).replace(/ \([A-Z, ]+\)$/, "");
    const path = `${stack[depth - 1] ?? ""}${label}`;
    stack[depth] = path;
    stack.length = depth + 1;
    if (/\([A-Z, ]+\)$/.test(line)) paths.add(path.replace(/:([A-Za-z_]+)/g, "{$1}"));
  }
  return [...paths];
}

/** Fills a route's path template, e.g. fillPath("/v1/cards/{id}", { id }) (values URL-encoded). */
export function fillPath(template: string, values: Record<string, string>, encode = true): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for {${name}} of ${template}`);
    return encode ? encodeURIComponent(value) : value;
  });
}

/** code -> HTTP status of every catalog entry. */
export const catalog: ReadonlyMap<number, number> = new Map(
  Object.values(errors).map((def) => [def.code, def.status]),
);

/**
 * What a request may change, in one query: a digest of every row of every table of the public
 * schema (so an UPDATE is caught as well as an INSERT or DELETE), the number of ledger entries
 * and the money they moved (postings always sum to zero, so their absolute values). `exclude` names tables a caller knows change legitimately.
 */
export interface StateSnapshot {
  tables: Record<string, string>;
  journalEntries: number;
  postingsSum: string;
}

export async function tablesOf(t: TestApp): Promise<string[]> {
  const rows = await sql<{ table_name: string }>`
    select table_name from information_schema.tables
    where table_schema = 'public' and table_type = 'BASE TABLE' order by table_name`.execute(t.ctx.db);
  return rows.rows.map((row) => row.table_name);
}

export async function snapshot(t: TestApp, tables: readonly string[]): Promise<StateSnapshot> {
  const digests = tables.map(
    (table) =>
      sql`(select count(*) || ':' || coalesce(md5(string_agg(x::text, '|' order by x::text)), '') from ${sql.table(table)} x) as ${sql.ref(table)}`,
  );
  const row = await sql<Record<string, string>>`
    select ${sql.join(digests)},
      (select count(*) from journal_entries)::int as "#entries",
      (select coalesce(sum(abs(amount_cents)), 0)::text from postings) as "#postings"`.execute(t.ctx.db);
  const first = row.rows[0];
  if (!first) throw new Error("snapshot returned no row");
  const { "#entries": entries, "#postings": postings, ...tableDigests } = first;
  return { tables: tableDigests, journalEntries: Number(entries), postingsSum: String(postings) };
}

/** The names of the tables whose digest differs, plus the ledger totals if they moved. */
export function changesBetween(before: StateSnapshot, after: StateSnapshot): string[] {
  const changed = Object.keys(before.tables).filter((table) => before.tables[table] !== after.tables[table]);
  if (before.journalEntries !== after.journalEntries) changed.push("journal entry count");
  if (before.postingsSum !== after.postingsSum) changed.push("sum of postings");
  return changed;
}
