import { randomUUID } from "node:crypto";
import type { Db, Tx } from "../../db/database.ts";
import type { ListingReads } from "../../db/listings.ts";
import { buildClabe } from "../../domain/clabe.ts";
import { maskCardNumbers } from "../../domain/luhn.ts";
import {
  daysBetween,
  newTrackingKey,
  numericCode,
  operationDateOf,
  returnCauseText,
} from "../../domain/spei.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { answered, type IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { systemAccounts } from "../../ledger/accounts.ts";
import { postEntry } from "../../ledger/ledger.ts";
import type { Cents } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { firstCharacters } from "../../text.ts";
import { transferInstitutions } from "../catalogs/data.ts";
import { emitEvent } from "../events/outbox.ts";
import { decodeCursor, encodeCursor, type Position, positionAt } from "./pagination.ts";
import * as repo from "./repository.ts";
import { renderOperation, type TransferOperationRecord } from "./views.ts";

/**
 * Collection accounts (CLABE), the incoming transfers (abonos) they receive, and their listing
 * (contract 2.8, 4.8).
 */

/** Plaza of Emisor's collection CLABEs (180: Mexico City, as STP's). */
export const collectionPlaza = "180";

/**
 * Creates a collection account with a new CLABE for a client, inside the caller's transaction
 * (client creation). The 11-digit account part comes from a sequence, so CLABEs never collide.
 */
export async function createCollectionAccount(
  tx: Tx,
  clientId: string,
  bankPrefix: string,
): Promise<{ id: string; clabe: string }> {
  const number = await repo.nextCollectionAccountNumber(tx);
  const clabe = buildClabe(bankPrefix, collectionPlaza, number);
  const id = randomUUID();
  await repo.insertCollectionAccount(tx, { id, clientId, clabe });
  return { id, clabe };
}

const accountStatusText = { ACTIVE: "Activo", BLOCKED: "Bloqueado", CANCELLED: "Cancelado" } as const;

function institutionOfPrefix(prefix: string) {
  return transferInstitutions.find((item) => item.clabe_prefix === prefix);
}

/** GET /v1/transfer/clabe/collection: the caller's own collection accounts. */
export async function listCollectionAccounts(db: Db, caller: Caller) {
  const rows = await repo.listCollectionAccountsOf(db, caller.clientId);
  return {
    collection_accounts: rows.map((row) => {
      const bank = institutionOfPrefix(row.clabe.slice(0, 3));
      return {
        id: row.id,
        clabe: row.clabe,
        client_id: row.client_id,
        bank: bank ? { key: bank.key, value: bank.value } : null,
        status: { key: row.status, value: accountStatusText[row.status] },
        created_at: row.created_at.toISOString(),
      };
    }),
  };
}

// ---- incoming transfers ----

/** An abono as the rail delivers it (domain-mx §6), normalized. */
export interface Abono {
  /** The rail's own id of the transfer, when it sends one. */
  transferId?: string | undefined;
  fechaOperacion: string;
  institucionOrdenante: string;
  institucionBeneficiaria: string;
  /** Upper case: the key's one spelling, as stored. */
  claveRastreo: string;
  /** As the rail sent it, when that differs: finds an abono stored before keys were upper-cased. */
  claveRastreoAsSent?: string | undefined;
  montoCents: Cents;
  nombreOrdenante: string;
  tipoCuentaOrdenante: string;
  cuentaOrdenante: string;
  rfcCurpOrdenante: string;
  nombreBeneficiario: string;
  tipoCuentaBeneficiario: string;
  cuentaBeneficiario: string;
  rfcCurpBeneficiario?: string | undefined;
  conceptoPago: string;
  referenciaNumerica: string;
  tsLiquidacion?: Date | undefined;
}

export type AbonoResult =
  | { mensaje: "confirmar"; duplicate: boolean; clabe: string; operation: TransferOperationRecord }
  | { mensaje: "devolver"; causa: string; descripcion: string };

/** A concurrent delivery of the same abono committed first; the transaction must roll back. */
class AbonoRaced extends Error {}

const refuse = (causa: string): AbonoResult => ({
  mensaje: "devolver",
  causa,
  descripcion: returnCauseText(causa),
});

/**
 * Receives an abono in its own transaction (the rail's webhook). A redelivery answers
 * "confirmar" again and credits nothing.
 */
export async function receiveAbono(db: Db, abono: Abono): Promise<AbonoResult> {
  try {
    return await db.transaction().execute((tx) => receiveAbonoTx(tx, abono));
  } catch (error) {
    if (error instanceof AbonoRaced) return answerDuplicate(db, abono);
    throw error;
  }
}

/**
 * Credits an abono to the client owning its CLABE: the 2.8 record, the day counter, one balanced
 * ledger entry SPEI_IN -> main balance, and the event, all in `tx`. Refused (credit nothing)
 * with a Banxico cause: 01 unknown CLABE, 06 addressed to another participant (the receiving
 * institution is not the catalog's participant of the CLABE's bank prefix), 17 not a CLABE account
 * type, 02 blocked (or client disabled), 03 cancelled, 14 no numeric reference (0: SPEI's is
 * 1-7 digits, greater than 0), 20 above the credit limit; 30 when the tracking key was used that
 * day for a different transfer. Returned, not answered 400: a 400 would make the rail retry a
 * transfer Emisor will never take. For the same reason a card number in the abono's names or
 * concept is masked to its last four, not refused: it is stored, listed and sent in events.
 * Throws AbonoRaced when a concurrent copy committed first (see receiveAbono).
 */
export async function receiveAbonoTx(tx: Tx, abono: Abono): Promise<AbonoResult> {
  const existing = await repo.findAbono(tx, abonoKey(abono));
  if (existing) return compareWithStored(existing, abono);
  const account = await repo.findCollectionAccountByClabe(tx, abono.cuentaBeneficiario);
  if (!account) return refuse("01");
  if (abono.institucionBeneficiaria !== institutionOfPrefix(account.clabe.slice(0, 3))?.key)
    return refuse("06");
  if (abono.tipoCuentaBeneficiario !== "40") return refuse("17");
  if (account.status === "CANCELLED") return refuse("03");
  if (account.status === "BLOCKED" || account.client_status !== "ACTIVE") return refuse("02");
  if (/^0+$/.test(abono.referenciaNumerica)) return refuse("14");
  if (abono.montoCents > limits.speiIncomingCentsMax) return refuse("20");

  const daySeq = await repo.bumpDayCounter(tx, account.id, abono.fechaOperacion);
  const entryId = await postEntry(tx, {
    kind: "SPEI_IN",
    description: "Incoming SPEI transfer",
    clientId: account.client_id,
    metadata: { clave_rastreo: abono.claveRastreo, fecha_operacion: abono.fechaOperacion },
    postings: [
      { accountId: systemAccounts.speiIn, amountCents: -abono.montoCents },
      { accountId: account.client_id, amountCents: abono.montoCents },
    ],
  });
  const id = randomUUID();
  const now = new Date();
  const inserted = await repo.insertTransferOperation(tx, {
    id,
    collection_account_id: account.id,
    client_id: account.client_id,
    transfer_id: abono.transferId ?? id,
    fecha_operacion: abono.fechaOperacion,
    day_seq: daySeq,
    institucion_ordenante: abono.institucionOrdenante,
    institucion_beneficiaria: abono.institucionBeneficiaria,
    clave_rastreo: abono.claveRastreo,
    monto_cents: abono.montoCents,
    nombre_beneficiario: maskCardNumbers(abono.nombreBeneficiario),
    tipo_cuenta_beneficiario: abono.tipoCuentaBeneficiario,
    cuenta_beneficiario: abono.cuentaBeneficiario,
    rfc_curp_beneficiario: abono.rfcCurpBeneficiario ?? "",
    concepto_pago: maskCardNumbers(abono.conceptoPago),
    referencia_numerica: abono.referenciaNumerica,
    nombre_ordenante: maskCardNumbers(abono.nombreOrdenante),
    tipo_cuenta_ordenante: abono.tipoCuentaOrdenante,
    cuenta_ordenante: abono.cuentaOrdenante,
    rfc_curp_ordenante: abono.rfcCurpOrdenante,
    cambio_estado_detalle: "Abono acreditado",
    cambio_estado_causa_devolucion: "",
    cambio_estado_estado: "LIQUIDACION",
    email_beneficiario: "",
    ts_liquidacion: abono.tsLiquidacion ?? now,
    entry_id: entryId,
    created_at: now,
  });
  if (!inserted) throw new AbonoRaced();
  const stored = await repo.findAbono(tx, abonoKey(abono));
  if (!stored) throw new Error("the abono just inserted is missing");
  const operation = renderOperation(stored);
  await emitEvent(tx, {
    type: "transfer.in.received",
    clientId: account.client_id,
    data: { clabe: account.clabe, ...operation },
  });
  return { mensaje: "confirmar", duplicate: false, clabe: account.clabe, operation };
}

function abonoKey(abono: Abono) {
  return {
    fecha: abono.fechaOperacion,
    institucionOrdenante: abono.institucionOrdenante,
    claveRastreo: abono.claveRastreo,
    spellings: [abono.claveRastreo, abono.claveRastreoAsSent ?? abono.claveRastreo],
  };
}

/** A redelivery confirms again; the same key on a different transfer is a duplicate key (cause 30). */
function compareWithStored(stored: repo.TransferOperationRow & { clabe: string }, abono: Abono): AbonoResult {
  const same = stored.clabe === abono.cuentaBeneficiario && BigInt(stored.monto_cents) === abono.montoCents;
  if (!same) return refuse("30");
  return { mensaje: "confirmar", duplicate: true, clabe: stored.clabe, operation: renderOperation(stored) };
}

async function answerDuplicate(db: Db, abono: Abono): Promise<AbonoResult> {
  const stored = await repo.findAbono(db, abonoKey(abono));
  if (!stored) throw new Error("an abono that raced is not stored");
  return compareWithStored(stored, abono);
}

/** The HTTP shape of an abono's outcome (the rail webhook and the sandbox answer alike). */
export function renderAbonoResult(result: AbonoResult) {
  return result.mensaje === "confirmar"
    ? { mensaje: result.mensaje, duplicate: result.duplicate, transfer_operation: result.operation }
    : { mensaje: result.mensaje, causa_devolucion: result.causa, descripcion: result.descripcion };
}

// ---- sandbox ----

export interface SandboxIncoming {
  clabe: string;
  amountCents: Cents;
  trackingKey?: string | undefined;
  operationDate?: string | undefined;
  payerName?: string | undefined;
  payerAccount?: string | undefined;
  payerInstitution?: string | undefined;
  payerRfcCurp?: string | undefined;
  paymentConcept?: string | undefined;
  numericReference?: string | undefined;
}

/**
 * POST /v1/sandbox/spei/incoming: an abono to one of the caller's CLABEs (or a descendant's),
 * through the same receiveAbonoTx as the rail's webhook. A CLABE outside the subtree is 404.
 */
export async function simulateIncoming(
  db: Db,
  caller: Caller,
  input: SandboxIncoming,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const account = await repo.findCollectionAccountInScope(db, caller.clientId, input.clabe);
  if (!account) throw new AppError(errors.collectionAccountNotFound);
  const abono = sandboxAbono(input, account.name);
  try {
    return await runIdempotent(db, idempotency, async (tx) =>
      renderAbonoResult(await receiveAbonoTx(tx, abono)),
    );
  } catch (error) {
    if (!(error instanceof AbonoRaced)) throw error;
    return answered(renderAbonoResult(await answerDuplicate(db, abono)));
  }
}

function sandboxAbono(input: SandboxIncoming, clientName: string): Abono {
  const fecha = input.operationDate ?? operationDateOf(new Date());
  const receiver = institutionOfPrefix(input.clabe.slice(0, 3));
  return {
    fechaOperacion: fecha,
    institucionOrdenante: numericCode(input.payerInstitution ?? "40012"),
    institucionBeneficiaria: receiver?.key ?? numericCode(input.clabe.slice(0, 3)),
    claveRastreo: input.trackingKey ?? newTrackingKey(fecha).replace(/^EMS/, "SBX"),
    montoCents: input.amountCents,
    nombreOrdenante: input.payerName ?? "ORDENANTE DE PRUEBA",
    tipoCuentaOrdenante: "40",
    cuentaOrdenante: input.payerAccount ?? buildClabe("012", "180", 1n),
    rfcCurpOrdenante: input.payerRfcCurp ?? "ND",
    nombreBeneficiario: firstCharacters(clientName, limits.speiNameLengthMax),
    tipoCuentaBeneficiario: "40",
    cuentaBeneficiario: input.clabe,
    rfcCurpBeneficiario: "ND",
    conceptoPago: input.paymentConcept ?? "Abono de prueba",
    referenciaNumerica: numericCode(input.numericReference ?? "1"),
  };
}

// ---- listing (4.8) ----

export interface OperationsQuery {
  initDate: string;
  endDate: string;
  page: number;
  perPage: number;
  cursor?: string | undefined;
}

/**
 * GET /v1/transfer/clabe/collection/{clabe}/operations: newest first, paged without OFFSET and
 * counted without count(*) (see pagination.ts). `cursor`, when given, wins over `page`. Counters
 * and rows are read in one repeatable-read snapshot, so total, pages and items agree.
 */
export async function listTransferOperations(
  db: Db,
  caller: Caller,
  clabe: string,
  query: OperationsQuery,
  listings: ListingReads,
) {
  checkRange(query.initDate, query.endDate);
  const listing = { clabe, initDate: query.initDate, endDate: query.endDate, perPage: query.perPage };
  const cursor = query.cursor !== undefined ? decodeCursor(query.cursor, listing) : undefined;
  const account = await repo.findCollectionAccountInScope(db, caller.clientId, clabe);
  if (!account) throw new AppError(errors.collectionAccountNotFound);
  const bounds = { initDate: query.initDate, endDate: query.endDate };
  const reads = await listings.reader();
  return reads
    .transaction()
    .setIsolationLevel("repeatable read")
    .execute(async (tx) => {
      const days = await repo.dayCounts(tx, account.id, query.initDate, query.endDate);
      const total = days.reduce((sum, day) => sum + day.operations, 0n);
      const page = cursor ? cursor.page + 1 : query.page;
      const from: Position | undefined = cursor ?? positionAt(days, BigInt(page - 1) * BigInt(query.perPage));
      const rows = from
        ? await repo.operationsFrom(tx, account.id, bounds, from, cursor === undefined, query.perPage + 1)
        : [];
      const items = rows.slice(0, query.perPage);
      const last = items.at(-1);
      const nextCursor =
        rows.length > query.perPage && last
          ? encodeCursor({ fecha: last.fecha_operacion, seq: BigInt(last.day_seq), page }, listing)
          : null;
      return {
        client: {
          id: account.client_id,
          name: account.name,
          alias: account.alias,
          clabe: account.clabe,
          transfer_operations: {
            items: items.map(renderOperation),
            page,
            per_page: query.perPage,
            pages: Number((total + BigInt(query.perPage) - 1n) / BigInt(query.perPage)),
            total: Number(total),
            next_cursor: nextCursor,
          },
        },
      };
    });
}

function checkRange(initDate: string, endDate: string): void {
  if (initDate > endDate) throw invalidField("init_date", "range", "must not be after end_date");
  if (daysBetween(initDate, endDate) + 1 > limits.transferListRangeDaysMax) {
    throw invalidField(
      "end_date",
      "range",
      `must be at most ${limits.transferListRangeDaysMax} days from init_date (inclusive)`,
    );
  }
}
