import { type Static, Type } from "typebox";
import { Digits, NextCursor, OrNull, Pesos, Uuid, VisibleText } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { CardNumber } from "../cards/schemas.ts";

/**
 * The card network's messages, as the processor sends them: Lithic's names for the types, each one
 * an ISO 8583 message (0100 authorization, 0120 advice, 0400 reversal, clearing, return). Amounts
 * are integers in the currency's minor units, as networks send them.
 */
export const messageTypes = [
  "AUTHORIZATION",
  "AUTHORIZATION_ADVICE",
  "AUTHORIZATION_REVERSAL",
  "CLEARING",
  "RETURN",
  "RETURN_REVERSAL",
  "BALANCE_INQUIRY",
] as const;
export type MessageType = (typeof messageTypes)[number];

export const channels = ["POS_CHIP", "CONTACTLESS", "ECOMMERCE", "ATM", "MANUAL"] as const;

export const MessageId = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: "^[\\x21-\\x7e]+$",
  "x-message": "must be 1-64 visible ASCII characters",
  description: "The network's own id of the message: a repeat answers the first answer again",
});

const MinorUnits = (description: string) =>
  Type.Integer({ minimum: 0, maximum: Number(limits.amountCentsMax), description });

export const Merchant = Type.Object(
  {
    name: VisibleText(1, 64, "The merchant's name as the network gives it"),
    city: Type.Optional(VisibleText(0, 64)),
    country: Type.Optional(
      Type.String({ pattern: "^[A-Z]{2,3}$|^[0-9]{3}$", "x-message": "must be an ISO 3166 code" }),
    ),
    mcc: Digits(4, "ISO 18245 merchant category code"),
    acceptor_id: Type.Optional(VisibleText(0, 32, "The card acceptor's id")),
  },
  { additionalProperties: false },
);
export type MerchantType = Static<typeof Merchant>;

export const CardMessageBody = Type.Object(
  {
    message_id: MessageId,
    type: Type.Enum([...messageTypes], { description: "What the message is" }),
    card_id: Type.Optional(Uuid("The card, by its Emisor id (or give card_number)")),
    card_number: Type.Optional(CardNumber),
    authorization_id: Type.Optional(Uuid("The authorization a follow-up message is about")),
    original_message_id: Type.Optional(MessageId),
    amount: Type.Optional(MinorUnits("In the currency's minor units")),
    currency: Type.Optional(Digits(3, "ISO 4217 numeric; 484 (MXN) when absent")),
    billing_amount: Type.Optional(MinorUnits("MXN centavos: required when currency is not 484")),
    merchant: Type.Optional(Merchant),
    channel: Type.Optional(Type.Enum([...channels])),
    partial_allowed: Type.Optional(Type.Boolean()),
    is_final: Type.Optional(
      Type.Boolean({
        description: "CLEARING: false keeps the rest of the hold for a later clearing (split shipment)",
      }),
    ),
    expiration: Type.Optional(
      Type.String({
        pattern: "^(0[1-9]|1[0-2])[0-9]{2}$",
        "x-message": "must be MMYY",
        description:
          "AUTHORIZATION: the card's expiry as the cardholder gave it, MMYY (card-not-present networks send it), checked when sent",
      }),
    ),
    cvv2: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: limits.cipherTextLengthMax,
        description:
          "AUTHORIZATION, card not present: the CVV2 ciphered with RSA-OAEP-SHA256 under the system public key",
      }),
    ),
    pin: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: limits.cipherTextLengthMax,
        description:
          "AUTHORIZATION at a terminal: the PIN ciphered with RSA-OAEP-SHA256 under the system public key",
      }),
    ),
  },
  { additionalProperties: false },
);
export type CardMessageBodyType = Static<typeof CardMessageBody>;

const Balances = Type.Object({
  available: Type.Integer({ description: "MXN centavos the card can spend" }),
  held: Type.Integer({ description: "MXN centavos held by pending authorizations" }),
  owed: Type.Integer({ description: "MXN centavos the card owes" }),
});

export const MessageAnswerData = Type.Object({
  message_id: Type.String(),
  type: Type.String(),
  result: Type.String({ description: "APPROVED, DECLINED, POSTED, RELEASED or ANSWERED" }),
  authorization_id: OrNull(Type.String()),
  authorization_code: OrNull(Type.String()),
  decline_reason: OrNull(Type.String()),
  amount: Type.Integer({ description: "MXN centavos approved, posted or released" }),
  partial: Type.Boolean({ description: "Approved for less than asked (partial approval)" }),
  over_tolerance: Type.Boolean({ description: "A clearing beyond the authorized amount and its tip rule" }),
  balance: OrNull(Balances),
});

export const Money = Type.Number({ description: "MXN" });

export const AuthorizationMessage = Type.Object({
  message_id: Type.String(),
  type: Type.String(),
  amount: Type.Number({ description: "MXN moved or asked for" }),
  result: Type.String(),
  created_at: Type.String(),
});

export const Authorization = Type.Object({
  id: Type.String(),
  card_id: Type.String(),
  client_id: Type.String(),
  status: Type.String({ description: "PENDING, SETTLED, VOIDED, EXPIRED or DECLINED" }),
  force_post: Type.Boolean(),
  amount: Money,
  currency: Type.String(),
  merchant_amount: Type.Integer({ description: "In the merchant currency's minor units" }),
  authorized: Money,
  held: Money,
  cleared: Money,
  authorization_code: OrNull(Type.String()),
  decline_reason: OrNull(Type.String()),
  channel: Type.String(),
  merchant: Type.Unknown(),
  expires_at: OrNull(Type.String()),
  decision: OrNull(
    Type.Object({
      status: Type.String({
        description:
          "AWAITING (the client's endpoint is deciding), ANSWERED, or STOOD_IN (its stand-in applied: no answer in time, or a bad one)",
      }),
      metadata: Type.Unknown({
        description: "What the client's answer returned; for a stand-in, {stand_in_reason, detail}",
      }),
    }),
    { description: "The client's real-time decision; null when no endpoint was asked" },
  ),
  created_at: Type.String(),
  updated_at: Type.String(),
  messages: Type.Optional(Type.Array(AuthorizationMessage)),
});

export const AuthorizationData = Type.Object({ authorization: Authorization });
export const AuthorizationListData = Type.Object({
  authorizations: Type.Array(Authorization),
  next_cursor: NextCursor("Pass as `cursor` for the next page (older authorizations)"),
});

const SandboxMerchant = Type.Object(
  {
    name: VisibleText(1, 64),
    mcc: Digits(4),
    country: Type.Optional(Type.String({ pattern: "^[A-Z]{2,3}$|^[0-9]{3}$" })),
    city: Type.Optional(VisibleText(0, 64)),
  },
  { additionalProperties: false },
);

export const SandboxAuthorizationBody = Type.Object(
  {
    card_id: Uuid(),
    amount: Pesos("MXN", limits.amountCentsMax),
    merchant: SandboxMerchant,
    channel: Type.Optional(Type.Enum([...channels])),
    partial_allowed: Type.Optional(Type.Boolean()),
    expiration: Type.Optional(
      Type.String({
        pattern: "^(0[1-9]|1[0-2])[0-9]{2}$",
        "x-message": "must be MMYY",
        description: "MMYY as the cardholder gave it; card not present, the card's own when absent",
      }),
    ),
    cvv2: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: limits.cipherTextLengthMax,
        description: "Ciphered under the system key",
      }),
    ),
    pin: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: limits.cipherTextLengthMax,
        description: "Ciphered under the system key",
      }),
    ),
  },
  { additionalProperties: false },
);
export const SandboxAmountBody = Type.Object(
  { amount: Pesos("MXN", limits.amountCentsMax) },
  { additionalProperties: false },
);
export const SandboxOptionalAmountBody = Type.Object(
  {
    amount: Type.Optional(Pesos("MXN; absent: all of what is held", limits.amountCentsMax)),
    is_final: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export const SandboxPostBody = Type.Object(
  {
    card_id: Uuid(),
    amount: Pesos("MXN", limits.amountCentsMax),
    merchant: SandboxMerchant,
    authorization_id: Type.Optional(Uuid()),
  },
  { additionalProperties: false },
);
export const AuthorizationParams = Type.Object({ id: Uuid() });
export const CardAuthorizationsQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
  },
  { additionalProperties: false },
);
