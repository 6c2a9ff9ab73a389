import { Type } from "typebox";
import {
  CursorQuery,
  Digits,
  Identifier,
  Latitude,
  Longitude,
  NextCursor,
  OrNull,
  PageQuery,
  PerPage,
  Pesos,
  Text,
  Uuid,
} from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { catalogKeys, type catalogs } from "../catalogs/data.ts";

export const CardNumber = Type.String({
  minLength: 1,
  maxLength: limits.cipherTextLengthMax,
  description:
    "The card's UUID, or its 16-digit number ciphered with RSA-OAEP-SHA256 under the system public key, Base64 or URL-safe Base64. A number in clear is refused (1301).",
});

const CatalogKey = (catalog: keyof typeof catalogs, description: string) =>
  Type.String({ enum: catalogKeys(catalog), description });

export const DeliveryAddress = Type.Object(
  {
    state: CatalogKey("state", "A key of the state catalog"),
    township: Text(1, 25),
    city: Text(1, 25),
    suburb: Text(1, 25),
    street: Text(1, 20),
    ext_street_number: Text(1, 5),
    int_street_number: Type.Optional(Type.Union([Text(1, 5), Type.Null()])),
    postal_code: Digits(5),
  },
  { additionalProperties: false },
);

export const AssignCardBody = Type.Object(
  {
    cardholder_id: Uuid(),
    product_id: Uuid(),
    document_type: CatalogKey("document_type", "A key of the document type catalog"),
    document_number: Identifier(1, 27),
    observations: Text(0, 100),
    shipping_method: Type.Union([Type.Literal("B2B"), Type.Literal("B2C"), Type.Literal("CUSTOM")]),
    delivery_type: Type.Union([Type.Literal("STANDARD"), Type.Literal("EXPRESS")]),
    // Required, as contract 4.5 lists it: null unless shipping_method is CUSTOM.
    delivery_address: Type.Union([DeliveryAddress, Type.Null()]),
  },
  { additionalProperties: false },
);

export const AssignCardData = Type.Object({
  cardholder: Type.Object({
    id: Type.String(),
    first_name: Type.String(),
    second_name: Type.String(),
    surname: Type.String(),
    second_surname: Type.String(),
    rfc: OrNull(Type.String(), { description: "null when blank (a product allowed it)" }),
    curp: OrNull(Type.String(), { description: "null when blank (a product allowed it)" }),
  }),
  card: Type.Object({
    id: Type.String(),
    type: Type.String(),
    status: Type.String(),
    last_four: Type.String(),
    assignation_timestamp: Type.String(),
  }),
  account: Type.Object({
    id: Type.String(),
    reference: OrNull(Type.String()),
    clabe: OrNull(Type.String()),
    assignation_timestamp: Type.String(),
  }),
  product: Type.Object({ id: Type.String(), code: Type.String(), name: Type.String() }),
});

export const CardSummary = Type.Object({
  id: Type.String(),
  type: Type.String(),
  status: Type.String(),
  masked_card_number: Type.String(),
  last_four: Type.String(),
});

export const ActivateBody = Type.Object(
  { card_number: CardNumber, latitude: Latitude, longitude: Longitude },
  { additionalProperties: false },
);

export const ChangeStatusBody = Type.Object(
  {
    card_number: CardNumber,
    status: Type.Union([
      Type.Literal("ACTIVE"),
      Type.Literal("TEMPORARY_INACTIVE"),
      Type.Literal("CANCELED"),
    ]),
    reason: Type.Optional(
      Text(1, 100, "Why: recorded with the change (e.g. LOST, STOLEN, CUSTOMER_REQUEST)"),
    ),
    latitude: Latitude,
    longitude: Longitude,
  },
  { additionalProperties: false },
);

export const SetPinBody = Type.Object(
  {
    card_number: CardNumber,
    pin: Type.String({
      minLength: 1,
      maxLength: limits.cipherTextLengthMax,
      description: "4-6 digits ciphered with RSA-OAEP-SHA256 under the system public key, Base64",
    }),
  },
  { additionalProperties: false },
);

export const CardParams = Type.Object({ id: Uuid() });
export const MovementsQuery = Type.Object(
  {
    ...PageQuery({ cursor: true }),
    cursor: CursorQuery("next_cursor of the previous page; wins over page"),
  },
  { additionalProperties: false },
);

export const SensitiveCardData = Type.Object({
  card: CardSummary,
  sensitive_data: Type.String({
    description:
      'Base64 RSA-OAEP-SHA256 under your registered public key of {"card_number","expiration","cvv"}',
  }),
});

export const CardDetail = Type.Object({
  card: Type.Object({
    ...CardSummary.properties,
    expiration: Type.String({ description: "MM/YY" }),
    balance: Type.Number({ description: "Its account plus its holds less what it owes" }),
    available: Type.Number({ description: "What the card can spend now" }),
    held: Type.Number({ description: "Held by pending authorizations" }),
    owed: Type.Number({ description: "What the card owes (a clearing it could not cover)" }),
    product: Type.Object({ id: Type.String(), code: Type.String(), name: Type.String() }),
    cardholder_id: Type.String(),
    account: Type.Object({ id: Type.String(), reference: Type.String() }),
    assignation_date: Type.String(),
    activation_date: OrNull(Type.String()),
    cancellation_timestamp: OrNull(Type.String()),
    status_reason: OrNull(Type.String()),
    pin_set: Type.Boolean(),
    pin_locked: Type.Boolean(),
  }),
});

export const MovementsData = Type.Object({
  card: CardSummary,
  movements: Type.Object({
    items: Type.Array(
      Type.Object({
        id: Type.String(),
        entry_id: Type.String(),
        type: Type.String({ description: "CREDIT or DEBIT" }),
        kind: Type.String(),
        amount: Type.Number(),
        description: OrNull(Type.String()),
        created_at: Type.String(),
      }),
    ),
    page: Type.Integer(),
    per_page: Type.Integer(),
    pages: Type.Integer(),
    total: Type.Integer(),
    next_cursor: NextCursor(
      "Pass as cursor (same card and per_page) for the next page; null on the last page",
    ),
  }),
});

const listedStatus = "NEED_ACTIVATION|ACTIVE|TEMPORARY_INACTIVE|CANCELED";

export const ListCardsQuery = Type.Object(
  {
    status: Type.Optional(
      Type.String({
        pattern: `^(${listedStatus})(,(${listedStatus}))*$`,
        "x-message":
          "must be card statuses (NEED_ACTIVATION, ACTIVE, TEMPORARY_INACTIVE, CANCELED) separated by commas",
        description: "Only cards in one of these statuses, separated by commas",
      }),
    ),
    cardholder_id: Type.Optional(Uuid("Only this cardholder's cards (one of your subtree)")),
    product_id: Type.Optional(Uuid("Only cards of this product")),
    client_id: Type.Optional(Uuid("Only this client's cards (you or one of your sub-clients)")),
    per_page: PerPage,
    cursor: CursorQuery("next_cursor of the previous page, with the same filters and per_page"),
  },
  { additionalProperties: false },
);

export const CardListData = Type.Object({
  cards: Type.Object({
    items: Type.Array(
      Type.Object({
        ...CardSummary.properties,
        expiration: Type.String({ description: "MM/YY" }),
        balance: Type.Number({ description: "Its account plus its holds less what it owes" }),
        available: Type.Number(),
        held: Type.Number(),
        owed: Type.Number(),
        product: Type.Object({ id: Type.String(), code: Type.String(), name: Type.String() }),
        cardholder_id: Type.String(),
        client_id: Type.String({ description: "The client the card belongs to (its cardholder's)" }),
        account: Type.Object({ id: Type.String(), reference: Type.String() }),
        assignation_date: Type.String(),
        activation_date: OrNull(Type.String()),
      }),
      { description: "Newest assignment first" },
    ),
    per_page: Type.Integer(),
    next_cursor: NextCursor(),
  }),
});

export const UnloadBody = Type.Object(
  {
    card_number: CardNumber,
    amount: Type.Optional(
      Pesos(
        "MXN, at most 2 decimals, as a payment's amount; absent: the card's whole balance",
        limits.amountCentsMax,
      ),
    ),
    description: Type.Optional(
      Text(
        1,
        limits.cardMovementDescriptionLengthMax,
        "Shown in the card's movements; as a payment's payment_description",
      ),
    ),
  },
  { additionalProperties: false },
);

export const UnloadData = Type.Object({
  operation: Type.Object({
    id: Type.String({ format: "uuid", description: "The ledger entry (entry_id in the card's movements)" }),
    kind: Type.Literal("CARD_UNLOAD"),
    amount: Type.Number({ description: "What moved from the card to the client's main balance" }),
    description: OrNull(Type.String()),
  }),
  card: Type.Object({
    ...CardSummary.properties,
    balance: Type.Number({ description: "The card's balance after the unload" }),
  }),
  client: Type.Object({
    id: Type.String({ description: "The card's client, whose main balance was credited" }),
    available: Type.Number({ description: "That client's main balance after the unload" }),
  }),
});
