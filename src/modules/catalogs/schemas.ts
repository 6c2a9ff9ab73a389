import { Type } from "typebox";
import { type CatalogName, catalogKeys } from "./data.ts";

/** A request field typed "catalog value": one of the catalog's keys (GET /v1/catalogs/<name>). */
export const CatalogKey = (name: CatalogName) =>
  Type.Enum(catalogKeys(name), {
    "x-message": `must be a key of the ${name} catalog (GET /v1/catalogs/${name})`,
    description: `A key of the ${name} catalog (GET /v1/catalogs/${name})`,
  });
