import { Type } from "typebox";
import { CreatedWindowQuery, OrNull, Uuid } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { eventTypes, testEventType } from "./outbox.ts";

/** Schemas of GET /v1/events, and the event envelope a webhook delivers. */
export const EventSchema = Type.Object({
  id: Type.String({ format: "uuid", description: "Unique; also the webhook-id header" }),
  type: Type.String(),
  created_at: Type.String({ format: "date-time" }),
  client_id: Type.String({ format: "uuid", description: "The client that owns the resource" }),
  data: Type.Record(Type.String(), Type.Unknown(), { description: "Shaped like the API resource" }),
});

const typeName = [...eventTypes, testEventType].map((type) => type.replace(/\./g, "\\.")).join("|");

export const ListEventsQuery = Type.Object(
  {
    type: Type.Optional(
      Type.String({
        pattern: `^(${typeName})(,(${typeName}))*$`,
        "x-message": "must be event types separated by commas",
        description: "Only these types, separated by commas",
      }),
    ),
    client_id: Type.Optional(Uuid("Only this client's events (you or one of your sub-clients)")),
    ...CreatedWindowQuery,
    after: Type.Optional(
      Type.String({
        pattern: "^([0-9]{1,20}-)?[0-9]{1,18}$",
        "x-message": "must be a cursor returned as next_cursor",
        description: "Only events after this cursor (a next_cursor from an earlier page)",
      }),
    ),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: limits.pageSizeMax, default: limits.pageSizeDefault }),
    ),
  },
  { additionalProperties: false },
);

export const EventListData = Type.Object({
  events: Type.Array(EventSchema, { description: "In the order of the transactions that wrote them" }),
  has_more: Type.Boolean({ description: "More events match after this page" }),
  next_cursor: OrNull(Type.String(), {
    description:
      "Pass as `after` for the next page, or later for what came since; null when nothing was seen yet",
  }),
});
