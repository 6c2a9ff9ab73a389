import { type Static, Type } from "typebox";
import { OrNull } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";

/** Request and response schemas of /v1/clients/authorization_endpoint. */
const Timestamp = (description?: string) =>
  Type.String({ format: "date-time", ...(description ? { description } : {}) });

const StandIn = (description: string) => Type.Enum(["APPROVE", "DECLINE"], { description });

export const PutEndpointBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: limits.webhookUrlLengthMax,
      description:
        "Where Emisor POSTs each authorization to decide: https (the webhooks' URL rules); in sandbox mode also http://localhost or http://127.0.0.1 with any port",
    }),
    timeout_ms: Type.Optional(
      Type.Integer({
        minimum: limits.authorizationDecisionTimeoutMsMin,
        maximum: limits.authorizationDecisionTimeoutMsMax,
        description: `How long Emisor waits for the signed answer, name lookup and connection included (default ${limits.authorizationDecisionTimeoutMsDefault})`,
      }),
    ),
    stand_in: Type.Optional(
      StandIn("What Emisor decides when no valid answer comes in time (default DECLINE)"),
    ),
  },
  { additionalProperties: false },
);
export type PutEndpointBodyType = Static<typeof PutEndpointBody>;

const EndpointSchema = Type.Object({
  client_id: Type.String({
    format: "uuid",
    description: "The owner: you, or the ancestor you inherit it from",
  }),
  inherited: Type.Boolean({ description: "true: the endpoint is an ancestor's, used because you have none" }),
  url: OrNull(Type.String(), { description: "null when inherited: the address is the owner's" }),
  timeout_ms: Type.Integer(),
  stand_in: StandIn("Applied on a timeout (WEBHOOK_TIMEOUT) or an error (WEBHOOK_ERROR)"),
  created_at: Timestamp(),
  updated_at: Timestamp(),
});

const example = {
  client_id: "0b6e9a52-6a41-4c1e-9d3b-1f2a3b4c5d6e",
  inherited: false,
  url: "https://decide.example.mx/emisor/authorizations",
  timeout_ms: 1500,
  stand_in: "DECLINE",
  created_at: "2026-05-01T17:03:12.481Z",
  updated_at: "2026-05-01T17:03:12.481Z",
};
// The examples show no secret: a secret-looking value in the served document would read, to the
// suite's scan for leaked secrets, as one handed out by a route that hands none out.
const exampleSecret = null;

export const PutEndpointData = Type.Object(
  {
    authorization_endpoint: Type.Object({
      ...EndpointSchema.properties,
      secret: OrNull(Type.String(), {
        description:
          "The signing secret (whsec_...), shown only in the answer that registered the endpoint; null when it replaced one (the secret is kept) and in an Idempotency-Key replay",
      }),
    }),
  },
  { examples: [{ authorization_endpoint: { ...example, secret: exampleSecret } }] },
);

export const EndpointData = Type.Object(
  { authorization_endpoint: EndpointSchema },
  {
    examples: [
      {
        authorization_endpoint: {
          ...example,
          client_id: "5d2c7e10-3b8f-4a6d-8e21-7c9b0a1f2e3d",
          inherited: true,
          url: null,
        },
      },
    ],
  },
);

export const DeletedEndpointData = Type.Object(
  {
    authorization_endpoint: Type.Object({
      client_id: Type.String({ format: "uuid" }),
      deleted: Type.Boolean(),
    }),
  },
  { examples: [{ authorization_endpoint: { client_id: example.client_id, deleted: true } }] },
);

export const RotatedEndpointSecretData = Type.Object(
  {
    authorization_endpoint: EndpointSchema,
    secret: OrNull(Type.String(), {
      description:
        "The new signing secret, shown only in this answer; null in an Idempotency-Key replay (the rotation happened once)",
    }),
    previous_secret_expires_at: Timestamp(
      "Until then the secret this one replaced also signs every request and is accepted on answers",
    ),
  },
  {
    examples: [
      {
        authorization_endpoint: example,
        secret: exampleSecret,
        previous_secret_expires_at: "2026-05-02T17:03:12.481Z",
      },
    ],
  },
);
