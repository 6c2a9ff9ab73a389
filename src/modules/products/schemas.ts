import { Type } from "typebox";
import { OrNull, PageQuery, PesosOrZero, Text, Uuid } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";

const CodeValue = Type.Object({ key: Type.String(), value: Type.String() });

/** Contract 2.6, plus what integrators need to use the product (code, BIN, commission). */
export const Product = Type.Object({
  id: Type.String({ format: "uuid" }),
  code: Type.String(),
  name: Type.String(),
  description: Type.String(),
  country: Type.Object({ code: Type.String(), description: OrNull(Type.String()) }),
  coin: Type.Object({ code: Type.String(), description: Type.String() }),
  type: CodeValue,
  status: CodeValue,
  affinity_group: Type.String(),
  stock_cards: Type.Integer(),
  allow_blank_curp: Type.Boolean(),
  allow_blank_rfc: Type.Boolean(),
  bin: Type.String(),
  transfer_commission: Type.Number({ description: "FLAT commission per SPEI transfer out, MXN, before IVA" }),
  card_validity_months: Type.Integer(),
});

export const ProductsData = Type.Object({
  products: Type.Object({ total: Type.Integer(), detail: Type.Array(Product) }),
});

export const CreateProductBody = Type.Object(
  {
    name: Text(1, 50),
    description: Text(1, 100),
    card_type: Type.Union([Type.Literal("PHYSICAL"), Type.Literal("VIRTUAL")]),
    bin: Type.String({ pattern: "^[0-9]{6,8}$", "x-message": "must be 6-8 digits" }),
    affinity_group: Text(1, 50),
    allow_blank_curp: Type.Optional(Type.Boolean({ default: false })),
    allow_blank_rfc: Type.Optional(Type.Boolean({ default: false })),
    transfer_commission: Type.Optional(
      PesosOrZero("FLAT commission per transfer out, MXN (default 0)", limits.amountCentsMax),
    ),
    card_validity_months: Type.Optional(Type.Integer({ minimum: 12, maximum: 120, default: 36 })),
  },
  { additionalProperties: false },
);

export const MintStockBody = Type.Object(
  { quantity: Type.Integer({ minimum: 1, maximum: limits.stockMintMax }) },
  { additionalProperties: false },
);

export const ProductParams = Type.Object({ id: Uuid() });
export const ProductClientParams = Type.Object({ id: Uuid(), client_id: Uuid() });
export const ProductListQuery = Type.Object(PageQuery({ cursor: false }), { additionalProperties: false });
