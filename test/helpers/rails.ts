import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { systemAccounts } from "../../src/ledger/accounts.ts";
import { checkInvariants, createAccount, postEntry } from "../../src/ledger/ledger.ts";
import { cardNetworkSignatureHeader } from "../../src/modules/rails/routes.ts";
import { signSpeiCallback, speiSignatureHeader } from "../../src/modules/transfers/signature.ts";
import { AirtimeSimulator } from "../../src/rails/airtime/simulator.ts";
import { SpeiSimulator } from "../../src/rails/spei/simulator.ts";
import { call, type Response } from "./api.ts";
import type { TestApp } from "./harness.ts";

/** Test helpers for the rails: simulators, signed rail callbacks, card-like payer accounts. */

export function speiSimulator(t: TestApp): SpeiSimulator {
  const rail = t.ctx.rails.spei;
  assert.ok(rail instanceof SpeiSimulator);
  return rail;
}

export function airtimeSimulator(t: TestApp): AirtimeSimulator {
  const provider = t.ctx.rails.airtime;
  assert.ok(provider instanceof AirtimeSimulator);
  return provider;
}

let sequence = 0;

/** An STP-style abono to `clabe` (fields of domain-mx §6); override any field. */
export function abono(clabe: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  sequence += 1;
  return {
    Id: 900000 + sequence,
    FechaOperacion: 20250115,
    InstitucionOrdenante: 40012,
    InstitucionBeneficiaria: 90646,
    ClaveRastreo: `MBAN0100${String(sequence).padStart(10, "0")}`,
    Monto: 150.25,
    NombreOrdenante: "JUAN PEREZ LOPEZ",
    TipoCuentaOrdenante: 40,
    CuentaOrdenante: "032180000118359719",
    RFCCurpOrdenante: "PELJ800101AB1",
    NombreBeneficiario: "EMPRESA DE PRUEBA",
    TipoCuentaBeneficiario: 40,
    CuentaBeneficiario: clabe,
    RFCCurpBeneficiario: "ND",
    ConceptoPago: "Pago factura 123",
    ReferenciaNumerica: 1234567,
    ...overrides,
  };
}

/** POSTs a rail callback signed with `secret` (or with a given header, or unsigned). */
export async function postSigned(
  t: TestApp,
  url: string,
  body: unknown,
  options: { secret?: string; timestamp?: number; header?: string | null; raw?: string } = {},
): Promise<Response> {
  const raw = options.raw ?? JSON.stringify(body);
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const header =
    options.header === undefined
      ? signSpeiCallback(options.secret ?? t.config.speiWebhookSecret ?? "", raw, timestamp)
      : options.header;
  return call(t.app, "POST", url, { raw, headers: header === null ? {} : { [speiSignatureHeader]: header } });
}

/** A CARD ledger account of `clientId` funded with `cents`, as the cards module will create one. */
export async function fundedCardAccount(t: TestApp, clientId: string, cents: bigint): Promise<string> {
  return t.ctx.db.transaction().execute(async (tx) => {
    const id = await createAccount(tx, { id: randomUUID(), kind: "CARD", clientId });
    if (cents > 0n) {
      await postEntry(tx, {
        kind: "TEST_CARD_FUNDING",
        clientId,
        postings: [
          { accountId: systemAccounts.sandboxFunding, amountCents: -cents },
          { accountId: id, amountCents: cents },
        ],
      });
    }
    return id;
  });
}

export async function assertLedgerBalanced(t: TestApp): Promise<void> {
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
}

/** Events of a type for a client, oldest first. */
export async function eventsOf(
  t: TestApp,
  clientId: string,
  type: string,
): Promise<Array<Record<string, unknown>>> {
  const rows = await t.ctx.db
    .selectFrom("events")
    .select("data")
    .where("client_id", "=", clientId)
    .where("type", "=", type)
    .orderBy("seq")
    .execute();
  return rows.map((row) => row.data as Record<string, unknown>);
}

/** Makes every queued rail job due now, as if its lease had run out. */
export async function expireRailLeases(t: TestApp): Promise<void> {
  await sql`update rail_outbox set next_attempt_at = now() - interval '1 second'`.execute(t.ctx.db);
}

let cardMessageSequence = 0;

/** A fresh network message id. */
export function messageId(): string {
  cardMessageSequence += 1;
  return `NET-${process.pid}-${Date.now()}-${cardMessageSequence}`;
}

/** POSTs a card network message signed with the configured secret (or `secret`, or unsigned). */
export async function postCardMessage(
  t: TestApp,
  body: Record<string, unknown>,
  options: { secret?: string; header?: string | null } = {},
): Promise<Response> {
  const raw = JSON.stringify({ message_id: messageId(), ...body });
  const timestamp = Math.floor(Date.now() / 1000);
  const header =
    options.header === undefined
      ? signSpeiCallback(options.secret ?? t.config.cardNetworkSecret ?? "", raw, timestamp)
      : options.header;
  return call(t.app, "POST", "/v1/rails/cards/messages", {
    raw,
    headers: header === null ? {} : { [cardNetworkSignatureHeader]: header },
  });
}
