import { Type } from "typebox";
import { Latitude, Longitude, Pesos, Text } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { CardNumber } from "../cards/schemas.ts";

export const PaymentBody = Type.Object(
  {
    card_number: CardNumber,
    amount: Pesos("MXN, at most 2 decimals", limits.amountCentsMax),
    payment_description: Text(1, limits.cardMovementDescriptionLengthMax),
    latitude: Latitude,
    longitude: Longitude,
  },
  { additionalProperties: false },
);

export const PaymentData = Type.Object({
  operation: Type.Object({
    id: Type.String({ format: "uuid" }),
    authorization_code: Type.String({ description: "6 digits" }),
    amount: Type.Number(),
    payment_description: Type.String(),
  }),
  card: Type.Object({
    id: Type.String(),
    masked_card_number: Type.String(),
    type: Type.String(),
    status: Type.String(),
  }),
  account: Type.Object({ id: Type.String(), reference: Type.Number() }),
});
