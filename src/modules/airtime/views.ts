import { currencyCode, currencyDescription, toPesos } from "../../ledger/money.ts";
import type { AirtimeProductRow, TopupRow } from "./repository.ts";

/** An airtime product in the contract's Product shape (2.6), with type AIRTIME. */
export function renderProduct(product: AirtimeProductRow) {
  return {
    id: product.id,
    name: product.name,
    description: product.description,
    country: { code: "484", description: "México" },
    coin: { code: currencyCode, description: currencyDescription },
    type: { key: "AIRTIME", value: "Tiempo aire" },
    status:
      product.status === "ACTIVE"
        ? { key: "ACTIVE", value: "Activo" }
        : { key: "INACTIVE", value: "Inactivo" },
    // Airtime has no card stock, needs no cardholder data; the carrier is its group.
    affinity_group: product.carrier,
    stock_cards: 0,
    allow_blank_curp: true,
    allow_blank_rfc: true,
  };
}

export function renderTopup(topup: TopupRow) {
  return {
    id: topup.id,
    status: topup.status,
    product_id: topup.product_id,
    phone_number: topup.phone_number,
    amount: toPesos(BigInt(topup.amount_cents)),
    provider_reference: topup.provider_reference,
    external_id: topup.external_id,
    failure_reason: topup.failure_reason,
    created_at: new Date(topup.created_at).toISOString(),
    completed_at: topup.completed_at ? new Date(topup.completed_at).toISOString() : null,
  };
}

/** The response of 4.9: the product query's structure plus the top-up. */
export function renderTopupResponse(topup: TopupRow, product: AirtimeProductRow) {
  return { products: { total: 1, detail: [renderProduct(product)] }, topup: renderTopup(topup) };
}
