import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { ok } from "../../http/envelope.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { type CatalogName, catalogs } from "./data.ts";

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

/** GET /v1/catalogs/<name>: `data` holds one key named after the catalog, a list of {key, value}. */
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
}
