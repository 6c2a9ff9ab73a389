import { randomUUID } from "node:crypto";
import type { Db, Queryable, Tx } from "../../db/database.ts";
import { violatedUniqueConstraint } from "../../db/unique.ts";
import { curpProblem } from "../../domain/curp.ts";
import { isPersonRfc } from "../../domain/rfc.ts";
import { mexicoCityToday } from "../../domain/spei.ts";
import { AppError, type ErrorDef, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { type Cents, parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { type AccountWithCards, groupAccounts } from "../cards/repository.ts";
import { findClientInScope } from "../clients/repository.ts";
import { emitEvent } from "../events/outbox.ts";
import { blankIdentityAllowance } from "../products/repository.ts";
import { addressValues } from "../shared/address.ts";
import type { CardholderLookups } from "./lookups.ts";
import * as repo from "./repository.ts";
import type { Account, Cardholder, CardholderQuery, CreateCardholderBody } from "./schemas.ts";

/** Each unique index of the cardholders table and the 409 that names its field. */
const duplicateErrors: Record<string, ErrorDef> = {
  cardholders_rfc_uq: errors.cardholderRfcTaken,
  cardholders_curp_uq: errors.cardholderCurpTaken,
  cardholders_email_uq: errors.cardholderEmailTaken,
  cardholders_mobile_phone_uq: errors.cardholderMobilePhoneTaken,
};

const curpMessages = {
  format: "must be 4 letters, 6 digits, H/M/X, 5 letters, a letter or digit and a digit",
  state: "has an unknown state code in positions 12-13",
  date: "has an impossible date in positions 5-10",
  check_digit: "has a wrong check digit",
} as const;

/**
 * Registers a cardholder (contract 4.2) for the caller or one of its sub-clients, with the
 * cardholder.created event, in one transaction. rfc and curp are required unless a product
 * allows them blank; duplicates of rfc, curp, email or mobile_phone are refused by the database.
 */
export async function createCardholder(
  db: Db,
  caller: Caller,
  body: CreateCardholderBody,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const values = cardholderValues(body, body.client_id ?? caller.clientId);
  return runIdempotent(db, idempotency, async (tx) => {
    if (body.client_id !== undefined && !(await findClientInScope(tx, caller.clientId, body.client_id))) {
      throw new AppError(errors.clientNotFound);
    }
    await requireIdentity(tx, values.client_id, values.rfc, values.curp);
    const cardholder = renderCardholder(await insertOrExplain(tx, values));
    await emitEvent(tx, { type: "cardholder.created", clientId: cardholder.client_id, data: cardholder });
    return { cardholder };
  });
}

/**
 * The one cardholder of the caller's subtree that matches every filter (contract 4.3), with its
 * accounts and cards. Several matches (primary_phone is not unique) are refused rather than one
 * picked: an arbitrary person's data is worse than a request to narrow the search.
 */
export async function findCardholder(
  db: Db,
  lookups: CardholderLookups,
  caller: Caller,
  query: CardholderQuery,
): Promise<{ cardholder: Cardholder & { accounts: Account[] } }> {
  // By id alone (the common lookup), lookups arriving together share one statement.
  const byIdAlone =
    query.id !== undefined && Object.values(query).filter((v) => v !== undefined).length === 1;
  const rows = byIdAlone
    ? [await lookups.byId(caller.clientId, query.id ?? "")].flatMap((row) => (row ? [row] : []))
    : await repo.findCardholders(
        db,
        caller.clientId,
        { ...query, rfc: query.rfc?.toUpperCase(), curp: query.curp?.toUpperCase() },
        2,
      );
  const [row] = rows;
  if (!row) throw new AppError(errors.cardholderNotFound);
  if (rows.length > 1) throw new AppError(errors.cardholderLookupAmbiguous);
  return {
    cardholder: { ...renderCardholder(row), accounts: renderAccounts(groupAccounts(row.account_rows)) },
  };
}

/** Validates what the schema cannot (rfc, curp, birthdate, incomes) and builds the row. */
function cardholderValues(body: CreateCardholderBody, clientId: string): repo.NewCardholder {
  const rfc = body.rfc?.toUpperCase();
  if (rfc !== undefined && !isPersonRfc(rfc)) {
    throw invalidField(
      "rfc",
      "rfc",
      "must be a person's RFC: 4 letters, a real date YYMMDD, and an optional 3-character homoclave",
    );
  }
  const curp = body.curp?.toUpperCase();
  const problem = curp === undefined ? undefined : curpProblem(curp);
  if (problem) throw invalidField("curp", "curp", curpMessages[problem]);
  checkBirthdate(body.birthdate);
  return {
    id: randomUUID(),
    client_id: clientId,
    first_name: body.first_name,
    second_name: body.second_name,
    third_name: body.third_name ?? null,
    surname: body.surname,
    second_surname: body.second_surname,
    work_area: body.work_area ?? null,
    rfc: rfc ?? null,
    curp: curp ?? null,
    email: body.email,
    primary_phone: body.primary_phone,
    mobile_phone: body.mobile_phone,
    ...addressValues(body),
    birthdate: body.birthdate,
    gender: body.gender,
    marital_status: body.marital_status,
    has_kids: body.has_kids,
    gross_monthly_income_cents: incomeCents(body.gross_monthly_income, "gross_monthly_income"),
    net_monthly_income_cents: incomeCents(body.net_monthly_income, "net_monthly_income"),
    observations: body.observations ?? null,
    external_id: body.external_id ?? null,
  };
}

function incomeCents(value: number | undefined, field: string): Cents | null {
  if (value === undefined) return null;
  return parsePesos(value, field, { maxCents: limits.monthlyIncomeCentsMax, allowZero: true });
}

/**
 * A birthdate is not in the future and at most cardholderAgeYearsMax years ago, by Mexico City's
 * calendar, as every other date of the service (UTC's is already tomorrow from 18:00 there).
 */
function checkBirthdate(birthdate: string): void {
  const today = mexicoCityToday();
  if (birthdate > today) throw invalidField("birthdate", "birthdate", "must not be in the future");
  const earliest = `${String(Number(today.slice(0, 4)) - limits.cardholderAgeYearsMax).padStart(4, "0")}${today.slice(4)}`;
  if (birthdate < earliest) {
    throw invalidField(
      "birthdate",
      "birthdate",
      `must be within the last ${limits.cardholderAgeYearsMax} years`,
    );
  }
}

/** A missing rfc or curp is refused unless a product of the client (or an ancestor) allows it. */
async function requireIdentity(
  db: Queryable,
  clientId: string,
  rfc: string | null | undefined,
  curp: string | null | undefined,
): Promise<void> {
  if (rfc && curp) return;
  const allowance = await blankIdentityAllowance(db, clientId);
  for (const [field, given, allowed] of [
    ["rfc", rfc, allowance.rfc],
    ["curp", curp, allowance.curp],
  ] as const) {
    if (!given && !allowed) {
      throw invalidField(
        field,
        "required",
        `is required: no active product of this client allows a blank ${field}`,
      );
    }
  }
}

async function insertOrExplain(tx: Tx, values: repo.NewCardholder): Promise<repo.CardholderRow> {
  try {
    return await repo.insertCardholder(tx, values);
  } catch (error) {
    const duplicate = duplicateErrors[violatedUniqueConstraint(error) ?? ""];
    throw duplicate ? new AppError(duplicate) : error;
  }
}

/** Contract 2.3 without accounts: nested address, incomes as pesos. */
function renderCardholder(row: repo.CardholderRow): Cardholder {
  return {
    id: row.id,
    first_name: row.first_name,
    second_name: row.second_name ?? "",
    third_name: row.third_name,
    surname: row.surname,
    second_surname: row.second_surname ?? "",
    work_area: row.work_area,
    rfc: row.rfc,
    curp: row.curp,
    email: row.email,
    primary_phone: row.primary_phone,
    mobile_phone: row.mobile_phone,
    address: {
      street: row.street,
      external_street_number: row.ext_street_number,
      internal_street_number: row.int_street_number,
      suburb: row.suburb,
      township: row.township,
      city: row.city,
      state: row.state,
      postal_code: row.postal_code,
      country: row.country,
    },
    birthdate: row.birthdate,
    gender: row.gender,
    marital_status: row.marital_status,
    has_kids: row.has_kids,
    gross_monthly_income:
      row.gross_monthly_income_cents === null ? null : toPesos(row.gross_monthly_income_cents),
    net_monthly_income: row.net_monthly_income_cents === null ? null : toPesos(row.net_monthly_income_cents),
    observations: row.observations,
    external_id: row.external_id,
    client_id: row.client_id,
  };
}

/** A cardholder's accounts and cards as a lookup shows them (contract 2.4, 2.5). */
function renderAccounts(accounts: AccountWithCards[]): Account[] {
  return accounts.map((account) => ({
    id: account.id,
    account_number: Number(account.account_number),
    creation_date: account.creation_date.toISOString(),
    activation_date: account.activation_date?.toISOString() ?? null,
    assigned_by: account.assigned_by,
    status: account.status,
    document: { type: account.document_type, number: account.document_number },
    cards: account.cards.map((card) => ({ ...card, assignation_date: card.assignation_date.toISOString() })),
  }));
}
