import { Type } from "typebox";
import { CursorQuery, NextCursor, OrNull, Pesos, Text, Uuid } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { controlScopes, controlTypes } from "./rules.ts";
import { velocityWindows } from "./windows.ts";

/**
 * Spending controls: one body for every type, whose fields depend on `type` (the service says
 * which are required and which belong to another type).
 */
const list = <T extends ReturnType<typeof Type.String>>(item: T, description: string) =>
  Type.Optional(
    Type.Array(item, { maxItems: limits.spendingControlListMax, uniqueItems: true, description }),
  );

const RuleFields = {
  type: Type.Enum([...controlTypes], {
    description:
      "VELOCITY_LIMIT (window, amount_limit and/or count_limit), MCC (mode, mccs and/or mcc_groups), MERCHANT_COUNTRY (mode, countries), CHANNEL (ecommerce, atm, contactless, international) or MAX_AMOUNT (amount)",
  }),
  window: Type.Optional(
    Type.Enum([...velocityWindows], {
      description: "VELOCITY_LIMIT: calendar windows in Mexico City time; weeks start on Monday",
    }),
  ),
  amount_limit: Type.Optional(
    Pesos("VELOCITY_LIMIT: MXN the window's approvals may reach", limits.amountCentsMax),
  ),
  count_limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: limits.spendingControlCountMax,
      description: "VELOCITY_LIMIT: approvals the window may count",
    }),
  ),
  mode: Type.Optional(
    Type.Enum(["ALLOW", "BLOCK"], { description: "MCC, MERCHANT_COUNTRY: only these, or all but these" }),
  ),
  mccs: list(
    Type.String({ pattern: "^[0-9]{4}$", "x-message": "must be 4 digits" }),
    "MCC: ISO 18245 codes (GET /v1/catalogs/mcc)",
  ),
  mcc_groups: list(
    Type.String({ pattern: "^[a-z_]{1,32}$", "x-message": "must be a group's key" }),
    "MCC: group keys (GET /v1/catalogs/mcc_groups)",
  ),
  countries: list(
    Type.String({ pattern: "^[A-Z]{2,3}$|^[0-9]{3}$", "x-message": "must be an ISO 3166 code" }),
    "MERCHANT_COUNTRY: ISO 3166-1 codes, alpha-2, alpha-3 or numeric",
  ),
  ecommerce: Type.Optional(Type.Boolean({ description: "CHANNEL: card-not-present (ECOMMERCE, MANUAL)" })),
  atm: Type.Optional(Type.Boolean({ description: "CHANNEL: ATM withdrawals" })),
  contactless: Type.Optional(Type.Boolean({ description: "CHANNEL: contactless" })),
  international: Type.Optional(Type.Boolean({ description: "CHANNEL: merchants outside Mexico" })),
  amount: Type.Optional(Pesos("MAX_AMOUNT: the most one purchase may be, MXN", limits.amountCentsMax)),
  description: Type.Optional(Text(0, 140, "Your note")),
};

export const CreateSpendingControlBody = Type.Object(
  {
    scope: Type.Enum([...controlScopes], {
      description:
        "PRODUCT (its cards), CLIENT (its cards and its sub-clients'), CARDHOLDER (their cards) or CARD; only cards of your subtree",
    }),
    target_id: Uuid("The product, client, cardholder or card"),
    ...RuleFields,
  },
  { additionalProperties: false },
);

export const UpdateSpendingControlBody = Type.Object(RuleFields, { additionalProperties: false });

export const SpendingControlParams = Type.Object({ id: Uuid() });

export const ListSpendingControlsQuery = Type.Object(
  {
    scope: Type.Optional(Type.Enum([...controlScopes])),
    target_id: Type.Optional(Uuid("Only the controls on this target")),
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
    cursor: CursorQuery("The previous page's next_cursor (same filters and per_page)"),
  },
  { additionalProperties: false },
);

const Money = Type.Number({ description: "MXN" });

export const SpendingControl = Type.Object({
  id: Type.String({ format: "uuid" }),
  owner_client_id: Type.String({ format: "uuid", description: "The client that set it" }),
  scope: Type.String(),
  target_id: Type.String({ format: "uuid" }),
  type: Type.String(),
  window: Type.Optional(Type.String()),
  amount_limit: Type.Optional(OrNull(Money)),
  count_limit: Type.Optional(OrNull(Type.Integer())),
  mode: Type.Optional(Type.String()),
  mccs: Type.Optional(Type.Array(Type.String())),
  mcc_groups: Type.Optional(Type.Array(Type.String())),
  countries: Type.Optional(Type.Array(Type.String(), { description: "ISO 3166-1 alpha-3" })),
  ecommerce: Type.Optional(Type.Boolean()),
  atm: Type.Optional(Type.Boolean()),
  contactless: Type.Optional(Type.Boolean()),
  international: Type.Optional(Type.Boolean()),
  amount: Type.Optional(Money),
  description: OrNull(Type.String()),
  created_at: Type.String(),
  updated_at: Type.String(),
});

export const SpendingControlData = Type.Object({ spending_control: SpendingControl });
export const DeletedSpendingControlData = Type.Object({ deleted: Type.Boolean(), id: Type.String() });
export const SpendingControlListData = Type.Object({
  spending_controls: Type.Array(SpendingControl),
  next_cursor: NextCursor(),
});

const Usage = Type.Object({
  window: Type.String(),
  used_amount: Money,
  used_count: Type.Integer(),
  remaining_amount: OrNull(Money),
  remaining_count: OrNull(Type.Integer()),
});

export const CardSpendingControlsData = Type.Object({
  card_id: Type.String(),
  rules: Type.Array(
    Type.Object({
      control: SpendingControl,
      usage: OrNull(Usage, { description: "VELOCITY_LIMIT over a window: what the card spent in it" }),
    }),
  ),
  effective: Type.Object(
    {
      max_amount: OrNull(Money),
      velocity: Type.Array(
        Type.Object({
          window: Type.String(),
          amount_limit: OrNull(Money),
          count_limit: OrNull(Type.Integer()),
          used_amount: Money,
          used_count: Type.Integer(),
          remaining_amount: OrNull(Money),
          remaining_count: OrNull(Type.Integer()),
        }),
      ),
      channels: Type.Object({
        ecommerce: Type.Boolean(),
        atm: Type.Boolean(),
        contactless: Type.Boolean(),
        international: Type.Boolean(),
      }),
      allowed_countries: OrNull(Type.Array(Type.String()), {
        description: "Null: any country not blocked",
      }),
      blocked_countries: Type.Array(Type.String()),
      mcc_allow_lists: Type.Array(
        Type.Object({ mccs: Type.Array(Type.String()), mcc_groups: Type.Array(Type.String()) }),
        { description: "A purchase must be in every one" },
      ),
      blocked_mccs: Type.Array(Type.String()),
      blocked_mcc_groups: Type.Array(Type.String()),
    },
    { description: "The strictest of every rule in scope" },
  ),
});
