import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Which tenant (root client) the work in progress is for, so that the database's turns can be
 * shared fairly between tenants (fair-gate.ts) without passing a tenant through every call.
 * Work outside a request (the background workers) and before authentication shares the empty key.
 */
const scope = new AsyncLocalStorage<string>();

export function runAsTenant<T>(tenant: string, work: () => T): T {
  return scope.run(tenant, work);
}

export function currentTenant(): string {
  return scope.getStore() ?? "";
}
