import { type Static, Type } from "typebox";
import {
  CreatedWindowQuery,
  CursorQuery,
  Digits,
  DigitsBetween,
  Email,
  Identifier,
  NextCursor,
  OrNull,
  PageQuery,
  PerPage,
  Pesos,
  PesosOrZero,
  Text,
  Uuid,
  VisibleText,
} from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { CatalogKey } from "../catalogs/schemas.ts";

/** An address in a request (contract 4.2, 4.4): the street numbers are ext_/int_street_number. */
export const AddressFields = {
  street: Text(1, 20),
  ext_street_number: Text(1, 5),
  int_street_number: Type.Optional(Text(1, 5)),
  suburb: Text(1, 25),
  township: Text(1, 25),
  city: Text(1, 25),
  state: CatalogKey("state"),
  postal_code: Digits(5),
};

/**
 * POST /v1/clients (contract 4.4). The password's minimum length is configured
 * (EMISOR_API_KEY_PASSWORD_MIN_LENGTH), so the body schema is built with it.
 */
export function createClientBody(passwordMinLength: number) {
  return Type.Object(
    {
      name: Text(5, 30),
      // Invisible characters (a zero-width space, a direction mark) would make two aliases that
      // read alike differ.
      alias: VisibleText(
        3,
        10,
        "Unique among the clients of your organisation, ignoring case and Unicode's spelling variants (NFKC)",
      ),
      email: Email(),
      available: PesosOrZero(
        "Initial main balance, MXN, taken from yours; 0 is allowed",
        limits.fundingCentsMax,
      ),
      phone: Digits(10),
      mobile_phone: Digits(10),
      rfc: Identifier(10, 13, "The client's RFC (upper case; lower case is converted)"),
      ...AddressFields,
      contact_name: Text(1, 12),
      contact_second_name: Type.Optional(Text(1, 12)),
      contact_surname: Text(1, 12),
      contact_second_surname: Type.Optional(Text(1, 12)),
      contact_email: Email(),
      contact_telephone_country_code: DigitsBetween(2, 3),
      contact_telephone: Digits(10),
      contact_mobile_phone_country_code: DigitsBetween(2, 3),
      contact_mobile_phone: Digits(10),
      legal_representative_name: Type.Optional(Text(1, 12)),
      legal_representative_second_name: Type.Optional(Text(1, 12)),
      legal_representative_surname: Type.Optional(Text(1, 12)),
      legal_representative_second_surname: Type.Optional(Text(1, 12)),
      legal_representative_email: Type.Optional(Email()),
      legal_representative_telephone_country_code: Type.Optional(DigitsBetween(2, 3)),
      legal_representative_telephone: Type.Optional(Digits(10)),
      legal_representative_mobile_phone_country_code: Type.Optional(DigitsBetween(2, 3)),
      legal_representative_mobile_phone: Type.Optional(Digits(10)),
      api_key_name: Text(5, 30),
      api_key_description: Type.Optional(Text(1, 30)),
      api_key_password: Type.String({
        minLength: passwordMinLength,
        maxLength: limits.apiKeyPasswordLengthMax,
        description: `Password of the new API key, ${passwordMinLength}-${limits.apiKeyPasswordLengthMax} characters (the contract allows 1-30; Emisor requires at least ${passwordMinLength}). Never returned.`,
      }),
    },
    { additionalProperties: false },
  );
}

export type CreateClientBody = Static<ReturnType<typeof createClientBody>>;

/** Contract 2.7, plus `api_client.api_key`: the identifier to log in with, with the password sent. */
export const SubclientData = Type.Object({
  subclient: Type.Object({
    id: Type.String({ format: "uuid" }),
    code: Type.String(),
    name: Type.String(),
    available: Type.Number({ description: "The new client's main balance, MXN" }),
    rfc: Type.String(),
    api_client: Type.Object({
      id: Type.String({ format: "uuid" }),
      name: Type.String(),
      alias: Type.String(),
      description: Type.String({ description: "Empty when api_key_description was not sent" }),
      api_key: Type.String({ description: "Log in with this and api_key_password (POST /v1/auth/login)" }),
    }),
  }),
});

/** A client as GET /v1/clients and GET /v1/clients/{id} show it. */
export const ClientView = Type.Object({
  id: Type.String({ format: "uuid" }),
  parent_id: OrNull(Type.String({ format: "uuid" })),
  code: Type.String(),
  name: Type.String(),
  alias: Type.String(),
  rfc: OrNull(Type.String()),
  email: OrNull(Type.String()),
  status: Type.String(),
  available: Type.Number({ description: "Main balance, MXN" }),
  min_balance: Type.Number({
    description: "Commercial floor of the main balance when funding sub-clients, MXN",
  }),
  created_at: Type.String({ format: "date-time" }),
});

export const BalanceData = Type.Object({
  balance: Type.Object({
    client_id: Type.String({ format: "uuid" }),
    available: Type.Number({ description: "Main balance, MXN" }),
    min_balance: Type.Number({ description: "What sub-client funding may not go below, MXN" }),
    currency: Type.Object({ code: Type.String(), description: Type.String() }),
  }),
});

export const ClientListQuery = Type.Object(PageQuery({ cursor: false }), { additionalProperties: false });
export const ClientParams = Type.Object({ id: Uuid() });
export const ClientListData = Type.Object({
  clients: Type.Object({
    items: Type.Array(ClientView),
    page: Type.Integer(),
    pages: Type.Integer(),
    total: Type.Integer(),
  }),
});
export const ClientData = Type.Object({ client: ClientView });

export const ClientStatusBody = Type.Object(
  {
    status: Type.Union([Type.Literal("ACTIVE"), Type.Literal("DISABLED")], {
      description: "DISABLED: the client and every client below it can no longer log in or call",
    }),
  },
  { additionalProperties: false },
);

export const ClientStatusData = Type.Object({
  client: ClientView,
  previous_status: Type.String(),
});

/** POST /v1/clients/transfers: money between the main balances of two clients of your subtree. */
export const ClientTransferBody = Type.Object(
  {
    from_client_id: Uuid(
      "The client that pays, from its main balance: you or a client below you (a disabled one too)",
    ),
    to_client_id: Uuid(
      "The client that receives, on its main balance: you or a client below you, not disabled; not from_client_id",
    ),
    amount: Pesos(
      "MXN, at most 2 decimals; the paying client's balance may not fall below its minimum balance",
      limits.fundingCentsMax,
    ),
    description: Type.Optional(
      Text(
        1,
        limits.clientTransferDescriptionLengthMax,
        "Your reference, shown in the listing and the event",
      ),
    ),
  },
  { additionalProperties: false },
);
export type ClientTransferBodyType = Static<typeof ClientTransferBody>;

const ClientIdSeen = (description: string) =>
  OrNull(Type.String({ format: "uuid" }), {
    description: `${description}; null in a listing when that client is outside your subtree`,
  });

/** A transfer between two clients' main balances, as its answer, its event and the listing show it. */
export const ClientTransferView = Type.Object({
  id: Type.String({ format: "uuid", description: "Also the id of its ledger entry" }),
  from_client_id: ClientIdSeen("The client that paid"),
  to_client_id: ClientIdSeen("The client that received"),
  created_by_client_id: ClientIdSeen("The client whose API key made the transfer"),
  amount: Type.Number({ description: "MXN" }),
  description: OrNull(Type.String(), { description: "null when none was sent" }),
  created_at: Type.String({ format: "date-time" }),
});

export const ClientTransferData = Type.Object({
  transfer: ClientTransferView,
  from_available: Type.Number({ description: "The paying client's main balance right after, MXN" }),
  to_available: Type.Number({ description: "The receiving client's main balance right after, MXN" }),
});

export const ClientTransferListQuery = Type.Object(
  {
    client_id: Type.Optional(
      Uuid("Only the transfers this client paid or received (you or a client below you)"),
    ),
    ...CreatedWindowQuery,
    per_page: PerPage,
    cursor: CursorQuery("next_cursor of the previous page, with the same filters and per_page"),
  },
  { additionalProperties: false },
);
export type ClientTransferListQueryType = Static<typeof ClientTransferListQuery>;

export const ClientTransferListData = Type.Object({
  transfers: Type.Array(ClientTransferView, { description: "Newest first (creation time, then id)" }),
  per_page: Type.Integer(),
  next_cursor: NextCursor(),
});
