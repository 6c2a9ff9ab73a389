import { randomUUID } from "node:crypto";
import type { FastifyInstance, InjectOptions } from "fastify";
import type { Envelope } from "../../src/http/envelope.ts";
import { createRootClient } from "../../src/modules/clients/service.ts";
import type { TestApp } from "./harness.ts";
import { subclientBody } from "./people.ts";

/** Calls the app through its front door and parses the envelope. */
export interface Response<T = unknown> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: Envelope<T>;
}

export async function call<T = unknown>(
  app: FastifyInstance,
  method: InjectOptions["method"],
  url: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string>; raw?: string } = {},
): Promise<Response<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined || options.raw !== undefined) headers["content-type"] ??= "application/json";
  const response = await app.inject({
    method,
    url,
    headers,
    ...(options.raw !== undefined ? { payload: options.raw } : {}),
    ...(options.body !== undefined ? { payload: JSON.stringify(options.body) } : {}),
  });
  return { status: response.statusCode, headers: response.headers, body: response.json() as Envelope<T> };
}

export interface Tenant {
  clientId: string;
  apiKeyId: string;
  apiKey: string;
  password: string;
  token: string;
  /** The tenant's collection account, created with it. */
  clabe: string;
}

let counter = 0;

/** A new root client with an API key, funded with `available` pesos, already logged in. */
export async function createTenant(
  t: TestApp,
  options: { available?: number; name?: string } = {},
): Promise<Tenant> {
  counter += 1;
  const created = await createRootClient(t.ctx.db, {
    name: options.name ?? `Tenant ${counter}`,
    alias: `T${counter}`.padEnd(3, "X"),
    availableCents: BigInt(Math.round((options.available ?? 0) * 100)),
    clabeBankPrefix: t.config.clabeBankPrefix,
  });
  const token = await login(t.app, created.apiKey.key, created.apiKey.password);
  return {
    clientId: created.clientId,
    apiKeyId: created.apiKey.id,
    apiKey: created.apiKey.key,
    password: created.apiKey.password,
    token,
    clabe: created.clabe,
  };
}

export async function login(app: FastifyInstance, apiKey: string, password: string): Promise<string> {
  const response = await call<{ token: string }>(app, "POST", "/v1/auth/login", {
    body: { api_client: { api_key: apiKey, password } },
  });
  if (response.status !== 200) throw new Error(`login failed: ${JSON.stringify(response.body)}`);
  return response.body.data.token;
}

/** Asserts a failure envelope with the given catalog code, returning it for further checks. */
export function expectError(response: Response, code: number, status?: number): Response {
  const { body } = response;
  if (body.success !== false || body.code !== code || (status !== undefined && response.status !== status)) {
    throw new Error(
      `expected error ${code}${status ? ` (HTTP ${status})` : ""}, got HTTP ${response.status} ${JSON.stringify(body)}`,
    );
  }
  return response;
}

export function expectOk<T>(response: Response<T>): T {
  if (response.status !== 200 || response.body.success !== true || response.body.code !== 0) {
    throw new Error(`expected success, got HTTP ${response.status} ${JSON.stringify(response.body)}`);
  }
  return response.body.data;
}

/** A sub-client of `parent` with its own API key, created and logged in through the API. */
export async function createSubClient(
  t: TestApp,
  parent: Tenant,
  available = 0,
  overrides: Record<string, unknown> = {},
): Promise<Tenant> {
  const password = `pw-${randomUUID()}`.slice(0, 30);
  const data = expectOk(
    await call<{ subclient: { id: string; api_client: { id: string; api_key: string } } }>(
      t.app,
      "POST",
      "/v1/clients",
      {
        token: parent.token,
        body: subclientBody({ ...overrides, available, api_key_password: password }),
      },
    ),
  );
  const { id, api_client } = data.subclient;
  const token = await login(t.app, api_client.api_key, password);
  const collection = expectOk(
    await call<{ collection_accounts: Array<{ clabe: string }> }>(
      t.app,
      "GET",
      "/v1/transfer/clabe/collection",
      { token },
    ),
  );
  return {
    clientId: id,
    apiKeyId: api_client.id,
    apiKey: api_client.api_key,
    password,
    clabe: collection.collection_accounts[0]?.clabe ?? "",
    token,
  };
}
