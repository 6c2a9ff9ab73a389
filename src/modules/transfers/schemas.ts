import { type Static, type TSchema, Type } from "typebox";
import {
  isRealDate,
  mexicoCityInstant,
  numericCode,
  returnCauses,
  trackingKeyLengthMax,
} from "../../domain/spei.ts";
import { invalidField } from "../../errors.ts";
import {
  CreatedWindowQuery,
  CursorQuery,
  DateString,
  Digits,
  DigitsBetween,
  Identifier,
  instantOf,
  NextCursor,
  OrNull,
  PageQuery,
  PerPage,
  Pesos,
  Text,
  Uuid,
} from "../../http/schemas.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { firstCharacters } from "../../text.ts";
import type { Abono } from "./service.ts";

/** TypeBox schemas of the SPEI routes, and the normalization of the rail's payloads. */

const KeyValue = Type.Object({ key: Type.String(), value: Type.String() });

export const ClabeParams = Type.Object({ clabe: Digits(18, "The collection account's CLABE") });
export const OrderParams = Type.Object({
  id: Type.String({ format: "uuid", "x-message": "must be a UUID", description: "The transfer's id" }),
});

export const CollectionAccountsData = Type.Object({
  collection_accounts: Type.Array(
    Type.Object({
      id: Type.String({ format: "uuid" }),
      clabe: Type.String(),
      client_id: Type.String({ format: "uuid" }),
      bank: Type.Union([KeyValue, Type.Null()]),
      status: KeyValue,
      created_at: Type.String(),
    }),
  ),
});

export const OperationsQuery = Type.Object(
  {
    init_date: DateString("First operation date, YYYY-MM-DD (inclusive)"),
    end_date: DateString(
      `Last operation date, YYYY-MM-DD (inclusive); at most ${limits.transferListRangeDaysMax} days`,
    ),
    ...PageQuery({ cursor: true }),
    cursor: CursorQuery("next_cursor of the previous page; wins over page"),
  },
  { additionalProperties: false },
);
export type OperationsQueryType = Static<typeof OperationsQuery>;

/** Contract 2.8. */
export const TransferOperationRecord = Type.Object({
  id: Type.String(),
  transfer_id: Type.String(),
  fecha_operacion: Type.String({ description: "YYYY-MM-DD" }),
  institucion_ordenante: Type.String(),
  institucion_beneficiaria: Type.String(),
  clave_rastreo: Type.String(),
  monto: Type.Number(),
  nombre_beneficiario: Type.String(),
  tipo_cuenta_beneficiario: Type.String(),
  cuenta_beneficiario: Type.String(),
  rfc_curp_beneficiario: Type.String(),
  concepto_pago: Type.String(),
  referencia_numerica: Type.String(),
  nombre_ordenante: Type.String(),
  cuenta_ordenante: Type.String(),
  rfc_curp_ordenante: Type.String(),
  cambio_estado_detalle: Type.String(),
  cambio_estado_causa_devolucion: Type.String(),
  cambio_estado_estado: Type.String(),
  email_beneficiario: Type.String(),
  transfer_commission: Type.Number(),
  commission_charged: Type.Number(),
  iva_charged: Type.Number(),
  ts_liquidacion: Type.String({ description: "ISO 8601 UTC" }),
  created_at: Type.String({ description: "ISO 8601 UTC" }),
});

export const OperationsData = Type.Object({
  client: Type.Object({
    id: Type.String({ format: "uuid" }),
    name: Type.String(),
    alias: Type.String(),
    clabe: Type.String(),
    transfer_operations: Type.Object({
      items: Type.Array(TransferOperationRecord),
      page: Type.Integer(),
      per_page: Type.Integer(),
      pages: Type.Integer(),
      total: Type.Integer(),
      next_cursor: NextCursor("Pass as cursor for the next page; null on the last page"),
    }),
  }),
});

/** The states of a transfer out, in the order an order goes through them. */
export const speiOrderStatuses = ["PENDIENTE", "ENVIADA", "LIQUIDADA", "DEVUELTA", "CANCELADA"] as const;

const SpeiOrder = Type.Object({
  id: Type.String({ format: "uuid" }),
  card_id: OrNull(Type.String()),
  tracking_key: Type.String(),
  operation_date: Type.String(),
  reference_operation: Type.String({ format: "uuid" }),
  amount: Type.Number(),
  commission: Type.Number(),
  commission_type: Type.Literal("FLAT"),
  iva: Type.Number(),
  total: Type.Number({ description: "amount + commission + iva: what the payer was charged" }),
  status: Type.Union(speiOrderStatuses.map((s) => Type.Literal(s))),
  status_detail: OrNull(Type.String()),
  return_cause: Type.Union([Type.Object({ code: Type.String(), description: Type.String() }), Type.Null()]),
  ts_liquidacion: OrNull(Type.String()),
  returned_at: OrNull(Type.String()),
  beneficiary: Type.Object({
    account: Type.String(),
    account_type: Type.String(),
    institution: KeyValue,
    name: Type.String(),
    rfc_curp: Type.String(),
    email: Type.String(),
  }),
  payment_concept: Type.String(),
  numeric_reference: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
});

export const SpeiOrderData = Type.Object({ transfer: SpeiOrder });

const statusList = speiOrderStatuses.join("|");

export const TransferListQuery = Type.Object(
  {
    status: Type.Optional(
      Type.String({
        maxLength: 200,
        pattern: `^(${statusList})(,(${statusList}))*$`,
        "x-message": `must be states separated by commas: ${speiOrderStatuses.join(", ")}`,
        description: "Only transfers in these states, separated by commas",
      }),
    ),
    client_id: Type.Optional(Uuid("Only this client's transfers (you or one of your sub-clients)")),
    card_id: Type.Optional(Uuid("Only the transfers this card paid (yours or a sub-client's)")),
    ...CreatedWindowQuery,
    per_page: PerPage,
    cursor: CursorQuery("next_cursor of the previous page, with the same filters and per_page"),
  },
  { additionalProperties: false },
);
export type TransferListQueryType = Static<typeof TransferListQuery>;

export const TransferListData = Type.Object({
  transfers: Type.Array(SpeiOrder, { description: "Newest first (creation time, then id)" }),
  per_page: Type.Integer(),
  next_cursor: NextCursor(),
});

export const AbonoResultData = Type.Object({
  mensaje: Type.Union([Type.Literal("confirmar"), Type.Literal("devolver")]),
  duplicate: Type.Optional(Type.Boolean({ description: "true when this abono had been received before" })),
  transfer_operation: Type.Optional(TransferOperationRecord),
  causa_devolucion: Type.Optional(
    Type.String({ description: "Banxico return cause when mensaje is devolver" }),
  ),
  descripcion: Type.Optional(Type.String()),
});

// ---- the rail's payloads (STP-style field names, domain-mx §6) ----

const Code = (description: string) =>
  Type.Union(
    [Type.String({ pattern: "^[0-9]{1,10}$", "x-message": "must be digits" }), Type.Integer({ minimum: 0 })],
    {
      description,
    },
  );
const RailDate = Type.Union(
  [
    Type.String({ pattern: "^[0-9]{4}-?[0-9]{2}-?[0-9]{2}$", "x-message": "must be YYYY-MM-DD or YYYYMMDD" }),
    Type.Integer({ minimum: 19000101, maximum: 99991231 }),
  ],
  { description: "Operation date: YYYY-MM-DD, YYYYMMDD or the integer yyyymmdd" },
);
const RailTimestamp = Type.Union([Type.Integer({ minimum: 0 }), Type.String()], {
  description:
    "Epoch milliseconds or ISO 8601 (without a zone: Mexico City time); one that names no instant is ignored, not refused",
});
/** An optional field a rail may also send as null: null is absent (a 400 would bounce money). */
const RailOptional = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));
const TrackingKey = Type.String({
  pattern: `^[0-9A-Za-z]{1,${trackingKeyLengthMax}}$`,
  "x-message": `must be 1-${trackingKeyLengthMax} letters and digits`,
});

/**
 * Text as a rail sends it: bounded, but a name or concept of spaces is stored as sent rather
 * than refused (refusing it would bounce money the sender's bank already debited).
 */
const RailText = (min: number, max: number) => Type.String({ minLength: min, maxLength: max });

/**
 * An incoming transfer (abono). Unknown fields are accepted and ignored: a rail adding a field
 * must not make Emisor bounce money.
 */
export const IncomingBody = Type.Object(
  {
    Id: RailOptional(
      Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Integer({ minimum: 0 })]),
    ),
    FechaOperacion: RailDate,
    InstitucionOrdenante: Code("Banxico code of the sender"),
    InstitucionBeneficiaria: Code("Banxico code of the receiver"),
    ClaveRastreo: TrackingKey,
    Monto: Pesos("Amount, MXN"),
    NombreOrdenante: RailText(1, limits.speiNameLengthMax),
    TipoCuentaOrdenante: Code("40 CLABE, 3 card, 10 phone"),
    CuentaOrdenante: DigitsBetween(10, 20),
    RFCCurpOrdenante: RailText(1, limits.speiRfcCurpLengthMax),
    NombreBeneficiario: RailText(1, limits.speiNameLengthMax),
    TipoCuentaBeneficiario: Code("40 for a CLABE"),
    CuentaBeneficiario: DigitsBetween(10, 20),
    RFCCurpBeneficiario: RailOptional(RailText(0, limits.speiRfcCurpLengthMax)),
    ConceptoPago: RailText(1, limits.speiConceptLengthMax),
    ReferenciaNumerica: Type.Union([
      Type.String({ pattern: "^[0-9]{1,7}$", "x-message": "must be 1-7 digits" }),
      Type.Integer({ minimum: 0, maximum: 9_999_999 }),
    ]),
    TsLiquidacion: RailOptional(RailTimestamp),
  },
  { additionalProperties: true },
);
export type IncomingBodyType = Static<typeof IncomingBody>;

export const OrderStateBody = Type.Object(
  {
    ClaveRastreo: TrackingKey,
    FechaOperacion: RailDate,
    Estado: Type.Union([
      Type.Literal("LIQUIDACION"),
      Type.Literal("DEVOLUCION"),
      Type.Literal("CANCELACION"),
    ]),
    // Nothing about the optional fields refuses a state change: a 400 leaves a returned payer
    // debited while the rail retries a callback Emisor will never take. The detail is kept to its
    // first 200 characters, the cause as sent (a number read as one), the timestamp is read for
    // LIQUIDACION only.
    Detalle: RailOptional(Type.String({ description: "Kept to its first 200 characters" })),
    CausaDevolucion: RailOptional(
      Type.Union([Type.String(), Type.Number()], {
        description:
          'Banxico return cause, with DEVOLUCION: 3, "3" and "03" are cause 03; any other value is kept as sent (its first 16 characters) and described as unknown',
      }),
    ),
    TsLiquidacion: RailOptional(
      Type.Union([Type.Integer({ minimum: 0 }), Type.String()], {
        description: "Epoch milliseconds or ISO 8601, read with LIQUIDACION only",
      }),
    ),
  },
  { additionalProperties: true },
);
export type OrderStateBodyType = Static<typeof OrderStateBody>;

export const OrderStateData = Type.Object({
  applied: Type.Boolean({ description: "false when the order was already in a final state" }),
  ...SpeiOrderData.properties,
});

export function railDate(value: string | number, field: string): string {
  const digits = String(value).replace(/-/g, "");
  const date = `${digits.slice(0, 4)}-${digits.slice(4, 6)}-${digits.slice(6, 8)}`;
  if (digits.length !== 8 || !isRealDate(date)) throw invalidField(field, "format", "must be a real date");
  return date;
}

const isoDateTime =
  /^([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?)([Zz]|[+-][0-9]{2}:[0-9]{2})?$/;

/**
 * A rail's optional timestamp (TsLiquidacion): epoch milliseconds or ISO 8601, a time without a
 * zone read as Mexico City's clock (SPEI's). One that names no instant in years 0001-9999 is
 * absent, never a refusal: a 400 would bounce an abono, or leave a settlement unapplied, over a
 * field nothing depends on.
 */
export function railTimestamp(value: string | number | null | undefined, field: string): Date | undefined {
  if (value === undefined || value === null) return undefined;
  let instant: Date | undefined;
  if (typeof value === "number") instant = new Date(value);
  else {
    const found = isoDateTime.exec(value);
    if (!found) return undefined;
    instant = found[4] ? new Date(value) : mexicoCityInstant(`${found[1]}T${found[2]}`);
  }
  try {
    return instant && instantOf(instant.getTime(), field);
  } catch {
    return undefined;
  }
}

// From 2^53 up every double is a whole number (and String writes those from 1e21 in exponent form).
const wholePesosFrom = 2 ** 53;

/**
 * An abono's amount, the rail's or the sandbox's: any finite positive amount with at most 2
 * decimals reads, however large, and one above the credit limit is returned with cause 20 rather
 * than refused (a 400 would make the rail retry a transfer Emisor will never take). An amount
 * from 2^53 pesos up is a whole number, read exactly as its BigInt (below that a double still
 * holds every centavo).
 */
export function abonoAmountCents(value: number, field: string): bigint {
  if (Number.isFinite(value) && value >= wholePesosFrom) return BigInt(value) * 100n;
  return parsePesos(value, field, { maxCents: BigInt(wholePesosFrom) * 100n });
}

export function abonoOf(body: IncomingBodyType): Abono {
  return {
    transferId: body.Id === undefined || body.Id === null ? undefined : String(body.Id),
    fechaOperacion: railDate(body.FechaOperacion, "FechaOperacion"),
    institucionOrdenante: numericCode(body.InstitucionOrdenante),
    institucionBeneficiaria: numericCode(body.InstitucionBeneficiaria),
    // One transfer whatever the letter case a (re)delivery spells its key in: stored upper case,
    // so the unique key of abonos holds across spellings. Rows stored before as sent are still
    // found by the spelling they were stored in.
    claveRastreo: body.ClaveRastreo.toUpperCase(),
    claveRastreoAsSent: body.ClaveRastreo,
    montoCents: abonoAmountCents(body.Monto, "Monto"),
    nombreOrdenante: body.NombreOrdenante,
    tipoCuentaOrdenante: numericCode(body.TipoCuentaOrdenante),
    cuentaOrdenante: body.CuentaOrdenante,
    rfcCurpOrdenante: body.RFCCurpOrdenante,
    nombreBeneficiario: body.NombreBeneficiario,
    tipoCuentaBeneficiario: numericCode(body.TipoCuentaBeneficiario),
    cuentaBeneficiario: body.CuentaBeneficiario,
    rfcCurpBeneficiario: body.RFCCurpBeneficiario ?? undefined,
    conceptoPago: body.ConceptoPago,
    referenciaNumerica: numericCode(body.ReferenciaNumerica),
    tsLiquidacion: railTimestamp(body.TsLiquidacion, "TsLiquidacion"),
  };
}

// ---- sandbox ----

/**
 * The sandbox's abono text takes what the rail's may hold: a card number in it is masked when
 * stored (receiveAbonoTx), not refused, so a client sees what Emisor does with the rail's.
 */
const SandboxRailText = (min: number, max: number) =>
  Type.String({ ...Text(min, max), "x-no-card-number": false });

export const SandboxIncomingBody = Type.Object(
  {
    clabe: Digits(18, "One of your collection CLABEs (or a sub-client's)"),
    amount: Pesos("Amount, MXN; above 10,000,000.00 the abono is returned with cause 20, as the rail's is"),
    tracking_key: Type.Optional(TrackingKey),
    operation_date: Type.Optional(DateString("Defaults to today (Mexico City)")),
    payer_name: Type.Optional(SandboxRailText(1, limits.speiNameLengthMax)),
    payer_account: Type.Optional(DigitsBetween(10, 18)),
    payer_institution: Type.Optional(
      Type.String({ pattern: "^[0-9]{4,5}$", "x-message": "must be a Banxico code" }),
    ),
    payer_rfc_curp: Type.Optional(Identifier(2, limits.speiRfcCurpLengthMax)),
    payment_concept: Type.Optional(SandboxRailText(1, limits.speiConceptLengthMax)),
    numeric_reference: Type.Optional(
      Type.String({
        pattern: "^[0-9]{1,7}$",
        "x-message": "must be 1-7 digits",
        description: "Read as its number, as the rail's is: 0 is returned with cause 14",
      }),
    ),
  },
  { additionalProperties: false },
);
export type SandboxIncomingBodyType = Static<typeof SandboxIncomingBody>;

export const SandboxReturnBody = Type.Object(
  {
    cause: Type.Optional(
      Type.String({
        pattern: `^(${Object.keys(returnCauses).sort().join("|")})$`,
        "x-message": `must be a Banxico return cause: ${Object.keys(returnCauses).sort().join(", ")}`,
        description: "Banxico return cause (default 01)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type SandboxReturnBodyType = Static<typeof SandboxReturnBody>;

/**
 * A Banxico return cause in its two-digit form, however the rail wrote its number; anything else
 * as sent (without control characters, its first 16 characters); blank is no cause.
 */
export function returnCause(value: string | number | null | undefined): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = String(value)
    .replace(/[\p{Cc}\p{Cf}]/gu, "")
    .trim();
  if (text === "") return undefined;
  return firstCharacters(/^[0-9]+$/.test(text) ? numericCode(text).padStart(2, "0") : text, 16);
}
