import { Type } from "typebox";
import { OrNull } from "../../http/schemas.ts";

export const LoginBody = Type.Object(
  {
    api_client: Type.Object(
      {
        api_key: Type.String({ minLength: 1, maxLength: 100, description: "The API key identifier" }),
        password: Type.String({ minLength: 1, maxLength: 128, description: "The API key's password" }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const ClientSummary = Type.Object({
  id: Type.String({ format: "uuid" }),
  code: Type.String(),
  name: Type.String(),
  alias: Type.String(),
  email: OrNull(Type.String()),
  available: Type.Number({ description: "Main balance, MXN" }),
  balance: Type.Number({
    description: "Equal to available: Emisor holds no pending amounts on a main balance",
  }),
  timezone: Type.String(),
  status: Type.String(),
  created_at: Type.String({ format: "date-time" }),
  updated_at: Type.String({ format: "date-time" }),
});

export const LoginData = Type.Object({
  token: Type.String(),
  token_type: Type.Literal("Bearer"),
  expires_in: Type.Integer({ description: "Seconds until the token expires" }),
  client: Type.Object({
    ...ClientSummary.properties,
    token: Type.String({ description: "The token again, where the origin API's SDK reads it" }),
  }),
});
