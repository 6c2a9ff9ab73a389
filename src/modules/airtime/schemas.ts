import { type Static, Type } from "typebox";
import { Digits, Email, Identifier, OrNull, Text } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";

const KeyValue = Type.Object({ key: Type.String(), value: Type.String() });
const NullableString = OrNull(Type.String());

/** Contract 2.6. */
export const Product = Type.Object({
  id: Type.String({ format: "uuid" }),
  name: Type.String(),
  description: Type.String(),
  country: Type.Object({ code: Type.String(), description: NullableString }),
  coin: Type.Object({ code: Type.String(), description: Type.String() }),
  type: KeyValue,
  status: KeyValue,
  affinity_group: Type.String(),
  stock_cards: Type.Integer(),
  allow_blank_curp: Type.Boolean(),
  allow_blank_rfc: Type.Boolean(),
});

export const ProductsData = Type.Object({
  products: Type.Object({ total: Type.Integer(), detail: Type.Array(Product) }),
});

export const Topup = Type.Object({
  id: Type.String({ format: "uuid" }),
  status: Type.Union([Type.Literal("PENDING"), Type.Literal("COMPLETED"), Type.Literal("FAILED")]),
  product_id: Type.String({ format: "uuid" }),
  phone_number: Type.String(),
  amount: Type.Number(),
  provider_reference: NullableString,
  external_id: NullableString,
  failure_reason: NullableString,
  created_at: Type.String(),
  completed_at: NullableString,
});

export const TopupData = Type.Object({ ...ProductsData.properties, topup: Topup });

const AdditionalData = Text(1, limits.airtimeAdditionalDataLengthMax, "Free text, 1-2048 characters");

export const TopupBody = Type.Object(
  {
    id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: limits.cipherTextLengthMax,
        description:
          "Paying card: its 16 digits ciphered under the system key, or its UUID. Omit to pay from your main balance.",
      }),
    ),
    product_id: Identifier(
      1,
      limits.airtimeProductIdLengthMax,
      "Airtime product: its id (UUID) or SKU (TELCEL_100)",
    ),
    phone_number: Digits(10, "The number receiving the airtime"),
    email: Email(),
    external_id: Type.Optional(
      Type.Union(
        [
          Type.String({ minLength: 1, maxLength: limits.airtimeExternalIdLengthMax }),
          Type.Number({ description: "A number is kept as its decimal text" }),
        ],
        { description: "Your reference: a string or a number, 1-128 characters" },
      ),
    ),
    additional_data: Type.Optional(AdditionalData),
    additional_date: Type.Optional({
      ...AdditionalData,
      description: "The contract's spelling of additional_data",
    }),
  },
  { additionalProperties: false },
);
export type TopupBodyType = Static<typeof TopupBody>;

export const TopupParams = Type.Object({
  id: Type.String({ format: "uuid", "x-message": "must be a UUID" }),
});
