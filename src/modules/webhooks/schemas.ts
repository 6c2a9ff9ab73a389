import { Type } from "typebox";
import { OrNull, PageQuery, Text, Uuid } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { eventTypes } from "../events/outbox.ts";
import { EventSchema } from "../events/schemas.ts";

/** Request and response schemas of /v1/webhooks. */
const Timestamp = (description?: string) =>
  Type.String({ format: "date-time", ...(description ? { description } : {}) });
const NullableTimestamp = (description: string) => OrNull(Timestamp(), { description });

export const CreateWebhookBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: limits.webhookUrlLengthMax,
      description:
        "Where events are POSTed: https; in sandbox mode also http://localhost or http://127.0.0.1 with any port",
    }),
    event_types: Type.Optional(
      Type.Array(Type.Enum(["*", ...eventTypes]), {
        minItems: 1,
        maxItems: eventTypes.length,
        uniqueItems: true,
        description: 'The event types to receive; ["*"] (the default) is every type, including future ones',
      }),
    ),
    description: Type.Optional(Text(1, limits.webhookDescriptionLengthMax)),
    include_subclients: Type.Optional(
      Type.Boolean({
        description: "Also receive the events of every client below the owner (default false)",
      }),
    ),
    client_id: Type.Optional(Uuid("The owning client, you or one of your sub-clients; you when omitted")),
  },
  { additionalProperties: false },
);

export const ReplayBody = Type.Object(
  { event_id: Uuid("An event the endpoint's owner may see (its own or its sub-clients')") },
  { additionalProperties: false },
);

export const WebhookParams = Type.Object({ id: Uuid() });

export const ListWebhooksQuery = Type.Object(
  { client_id: Type.Optional(Uuid("Only this client's endpoints")), ...PageQuery({ cursor: false }) },
  { additionalProperties: false },
);

export const WebhookSchema = Type.Object({
  id: Type.String({ format: "uuid" }),
  client_id: Type.String({ format: "uuid", description: "The owner" }),
  url: Type.String(),
  description: OrNull(Type.String()),
  event_types: Type.Array(Type.String(), { description: '["*"]: every type' }),
  include_subclients: Type.Boolean(),
  status: Type.Enum(["ENABLED", "DISABLED"]),
  disabled_reason: OrNull(Type.String(), { description: "Why it was disabled" }),
  disabled_at: NullableTimestamp("When it was disabled"),
  failure_streak: Type.Integer({ description: "Failed attempts since the last successful delivery" }),
  last_success_at: NullableTimestamp("Last successful delivery"),
  last_failure_at: NullableTimestamp("Last failed attempt"),
  last_error: OrNull(Type.String(), { description: "What the last failed attempt met" }),
  created_at: Timestamp(),
  updated_at: Timestamp(),
});

export const DeliverySchema = Type.Object({
  id: Type.String({ format: "uuid" }),
  event_id: Type.String({ format: "uuid", description: "Also the webhook-id header of every attempt" }),
  event_type: Type.String(),
  kind: Type.Enum(["EVENT", "TEST", "REPLAY"]),
  status: Type.Enum(["PENDING", "DELIVERED", "FAILED"]),
  attempts: Type.Integer(),
  next_attempt_at: NullableTimestamp("When PENDING: the next attempt"),
  last_attempt_at: NullableTimestamp("The last attempt"),
  last_status_code: OrNull(Type.Integer()),
  last_error: OrNull(Type.String()),
  delivered_at: NullableTimestamp("When the receiver answered 2xx"),
  created_at: Timestamp(),
});

export const CreatedWebhookData = Type.Object({
  webhook: Type.Object({
    ...WebhookSchema.properties,
    secret: OrNull(Type.String(), {
      description:
        "The signing secret (whsec_...), shown only in this response; null in an Idempotency-Key replay",
    }),
  }),
});

export const WebhookData = Type.Object({ webhook: WebhookSchema });

export const WebhookStateData = Type.Object({
  webhook: WebhookSchema,
  recent_deliveries: Type.Array(DeliverySchema, {
    description: `The latest ${limits.webhookRecentDeliveriesMax} deliveries, newest first`,
  }),
});

export const WebhookListData = Type.Object({
  webhooks: Type.Array(WebhookSchema),
  page: Type.Integer(),
  pages: Type.Integer(),
  total: Type.Integer(),
});

export const DeletedWebhookData = Type.Object({
  webhook: Type.Object({ id: Type.String({ format: "uuid" }), deleted: Type.Boolean() }),
});

export const RotatedSecretData = Type.Object({
  webhook: WebhookSchema,
  secret: OrNull(Type.String(), {
    description:
      "The new signing secret, shown only in this response; null in an Idempotency-Key replay (the rotation happened once)",
  }),
  previous_secret_expires_at: Timestamp(
    "Until then the secret this one replaced also signs every attempt (secrets retired by earlier rotations keep their own expiry)",
  ),
});

export const TestEventData = Type.Object({ event: EventSchema, delivery: DeliverySchema });
export const ReplayData = Type.Object({ delivery: DeliverySchema });
