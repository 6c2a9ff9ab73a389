import { type Static, Type } from "typebox";
import {
  DateString,
  Digits,
  Email,
  Identifier,
  OrNull,
  PesosOrZero,
  Text,
  Uuid,
} from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { CatalogKey } from "../catalogs/schemas.ts";
import { AddressFields } from "../clients/schemas.ts";

/** POST /v1/cardholders (contract 4.2). */
export const CreateCardholderBody = Type.Object(
  {
    first_name: Text(1, 12),
    second_name: Text(1, 12),
    third_name: Type.Optional(Text(1, 12)),
    surname: Text(1, 12),
    second_surname: Text(1, 12),
    work_area: Type.Optional(Text(1, 50)),
    rfc: Type.Optional(
      Identifier(
        10,
        13,
        "A person's RFC (lower case is converted). Required unless an active product of the client or an ancestor allows a blank rfc",
      ),
    ),
    curp: Type.Optional(
      Identifier(
        18,
        18,
        "CURP (lower case is converted). Required unless an active product of the client or an ancestor allows a blank curp",
      ),
    ),
    email: Email("Unique among cardholders, ignoring case"),
    primary_phone: Digits(10, "Local or mobile number"),
    mobile_phone: Digits(10, "Unique among cardholders"),
    ...AddressFields,
    birthdate: DateString("YYYY-MM-DD, not in the future"),
    gender: CatalogKey("gender"),
    marital_status: CatalogKey("marital_status"),
    has_kids: Type.Boolean(),
    gross_monthly_income: Type.Optional(PesosOrZero("MXN, at most 2 decimals", limits.monthlyIncomeCentsMax)),
    net_monthly_income: Type.Optional(PesosOrZero("MXN, at most 2 decimals", limits.monthlyIncomeCentsMax)),
    observations: Type.Optional(Text(0, 100)),
    external_id: Type.Optional(Identifier(0, 40, "Your own reference for the cardholder")),
    client_id: Type.Optional(Uuid("Yours or one of your sub-clients'; when omitted, yours")),
  },
  { additionalProperties: false },
);
export type CreateCardholderBody = Static<typeof CreateCardholderBody>;

/** GET /v1/cardholders (contract 4.3): at least one filter; several are combined with AND. */
export const CardholderQuery = Type.Object(
  {
    id: Type.Optional(Uuid()),
    rfc: Type.Optional(Identifier(10, 13)),
    curp: Type.Optional(Identifier(18, 18)),
    email: Type.Optional(Identifier(5, 100, "Compared ignoring case")),
    primary_phone: Type.Optional(Digits(10)),
    mobile_phone: Type.Optional(Digits(10)),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    "x-message": "give at least one of id, rfc, curp, email, primary_phone, mobile_phone",
  },
);
export type CardholderQuery = Static<typeof CardholderQuery>;

const NullableString = OrNull(Type.String());
const NullableNumber = OrNull(Type.Number());

/** Contract 2.2, in its response spelling (external_/internal_street_number). */
const Address = Type.Object({
  street: Type.String(),
  external_street_number: Type.String(),
  internal_street_number: NullableString,
  suburb: Type.String(),
  township: Type.String(),
  city: Type.String(),
  state: Type.String(),
  postal_code: Type.String(),
  country: Type.String({ description: "ISO 3166 numeric (484 = Mexico)" }),
});

/** Contract 2.3 without `accounts` (the creation response and the cardholder.created event). */
export const Cardholder = Type.Object({
  id: Type.String({ format: "uuid" }),
  first_name: Type.String(),
  second_name: Type.String(),
  third_name: NullableString,
  surname: Type.String(),
  second_surname: Type.String(),
  work_area: NullableString,
  rfc: OrNull(Type.String({ description: "null only when a product allowed it blank" })),
  curp: OrNull(Type.String({ description: "null only when a product allowed it blank" })),
  email: Type.String(),
  primary_phone: Type.String(),
  mobile_phone: Type.String(),
  address: Address,
  birthdate: Type.String({ format: "date" }),
  gender: Type.String(),
  marital_status: Type.String(),
  has_kids: Type.Boolean(),
  gross_monthly_income: NullableNumber,
  net_monthly_income: NullableNumber,
  observations: NullableString,
  external_id: NullableString,
  client_id: Type.String({ format: "uuid", description: "The client the cardholder belongs to" }),
});
export type Cardholder = Static<typeof Cardholder>;

/** Contract 2.5, as a cardholder lookup shows a card. */
export const AccountCard = Type.Object({
  id: Type.String({ format: "uuid" }),
  last_four: Type.String({ pattern: "^[0-9]{4}$" }),
  assignation_date: Type.String({ format: "date-time" }),
  status: Type.String(),
  assigned_by: Type.Object({
    id: Type.String({ format: "uuid" }),
    alias: Type.String(),
    name: Type.String(),
    description: Type.String(),
  }),
});

/** Contract 2.4. */
export const Account = Type.Object({
  id: Type.String({ format: "uuid" }),
  account_number: Type.Number(),
  creation_date: Type.String({ format: "date-time" }),
  activation_date: OrNull(Type.String({ format: "date-time" })),
  assigned_by: Type.String({ format: "uuid" }),
  status: Type.String(),
  document: Type.Object({ type: Type.String(), number: Type.String() }),
  cards: Type.Array(AccountCard),
});
export type Account = Static<typeof Account>;

export const CreatedCardholderData = Type.Object({ cardholder: Cardholder });
export const FoundCardholderData = Type.Object({
  cardholder: Type.Object({ ...Cardholder.properties, accounts: Type.Array(Account) }),
});
