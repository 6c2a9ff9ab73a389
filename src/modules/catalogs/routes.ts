import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { ok } from "../../http/envelope.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { type CatalogName, catalogs, mccGroupItems, mccItems } from "./data.ts";

/** The operationId of each catalog's route, as a generated client names its method. */
const operationIds: Record<CatalogName, string> = {
  state: "listStates",
  gender: "listGenders",
  marital_status: "listMaritalStatuses",
  document_type: "listDocumentTypes",
  card_status: "listCardStatuses",
  transfer_institutions: "listTransferInstitutions",
};

const Item = Type.Object({ key: Type.String(), value: Type.String() }, { additionalProperties: true });

const McCode = (description: string) => Type.String({ pattern: "^[0-9]{4}$", description });

const MccItem = Type.Object({
  key: Type.String({ description: 'The code, or "first-last" for a range of brand-specific codes' }),
  value: Type.String({ description: "What the code (every code of the range) is" }),
  first: McCode("The first code covered (the code itself for a single code)"),
  last: McCode("The last code covered, inclusive"),
  groups: Type.Array(Type.String(), {
    description: "The keys of the groups its codes are in (GET /v1/catalogs/mcc_groups)",
  }),
});

const MccData = Type.Object(
  { mcc: Type.Array(MccItem) },
  {
    examples: [
      {
        mcc: [
          {
            key: "3000-3299",
            value: mccItems.find((i) => i.key === "3000-3299")?.value,
            first: "3000",
            last: "3299",
            groups: ["airlines", "travel"],
          },
          {
            key: "5812",
            value: "Eating places and restaurants",
            first: "5812",
            last: "5812",
            groups: ["restaurants"],
          },
        ],
      },
    ],
  },
);

const MccGroupItem = Type.Object({
  key: Type.String({ description: "What a spending control names" }),
  value: Type.String({ description: "What the group holds" }),
  codes: Type.Array(McCode("A code of the group")),
  ranges: Type.Array(
    Type.Object({ first: McCode("First code, inclusive"), last: McCode("Last code, inclusive") }),
    { description: "Ranges of codes in the group, every code of a range included" },
  ),
});

const MccGroupData = Type.Object(
  { mcc_groups: Type.Array(MccGroupItem) },
  {
    examples: [
      {
        mcc_groups: [
          {
            key: "cash",
            value: mccGroupItems.find((g) => g.key === "cash")?.value,
            codes: ["6010", "6011"],
            ranges: [],
          },
          {
            key: "digital_goods",
            value: mccGroupItems.find((g) => g.key === "digital_goods")?.value,
            codes: [],
            ranges: [{ first: "5815", last: "5818" }],
          },
        ],
      },
    ],
  },
);

// The answers are constant: built once, as the other catalogs' are.
const mccData = { mcc: mccItems };
const mccGroupData = { mcc_groups: mccGroupItems };

const listMccsRoute = (app: FastifyInstance) => {
  app.get(
    "/v1/catalogs/mcc",
    {
      schema: {
        tags: ["catalogs"],
        operationId: "listMerchantCategoryCodes",
        summary: "The ISO 18245 merchant category codes",
        description:
          "Each code with its description and the groups it is in. The brand-specific codes of airlines (3000-3299), car rental agencies (3351-3441) and lodging (3501-3999) are one entry per range: every code of the range takes its description and groups.",
        security: bearerAuth,
        response: responses(MccData),
      },
    },
    async () => ok(mccData),
  );
};

const listMccGroupsRoute = (app: FastifyInstance) => {
  app.get(
    "/v1/catalogs/mcc_groups",
    {
      schema: {
        tags: ["catalogs"],
        operationId: "listMerchantCategoryGroups",
        summary: "The named groups of merchant category codes spending controls use",
        description:
          "Each group's key, description, single codes and ranges (inclusive). A range covers every code in it, whether the MCC catalog lists it or not; a code may be in several groups.",
        security: bearerAuth,
        response: responses(MccGroupData),
      },
    },
    async () => ok(mccGroupData),
  );
};

/**
 * GET /v1/catalogs/<name>: `data` holds one key named after the catalog, a list of {key, value}
 * (the MCC catalogs add fields to each item).
 */
export function registerCatalogRoutes(app: FastifyInstance): void {
  for (const name of Object.keys(catalogs) as CatalogName[]) {
    const items = catalogs[name];
    const data = { [name]: items };
    app.get(
      `/v1/catalogs/${name}`,
      {
        schema: {
          tags: ["catalogs"],
          operationId: operationIds[name],
          summary: `The ${name.replace(/_/g, " ")} catalog`,
          security: bearerAuth,
          response: responses(Type.Object({ [name]: Type.Array(Item) })),
        },
      },
      async () => ok(data),
    );
  }
  listMccsRoute(app);
  listMccGroupsRoute(app);
}
