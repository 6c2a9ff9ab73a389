/**
 * The postal address as clients and cardholders store it (contract 4.2 and 4.4 share the fields),
 * and as a shipment resolves it.
 */
export const addressColumns = [
  "street",
  "ext_street_number",
  "int_street_number",
  "suburb",
  "township",
  "city",
  "state",
  "postal_code",
] as const;

export interface AddressFields {
  street: string;
  ext_street_number: string;
  int_street_number?: string | undefined;
  suburb: string;
  township: string;
  city: string;
  state: string;
  postal_code: string;
}

/** The address columns of a row from a validated body (an absent interior number is null). */
export function addressValues(body: AddressFields) {
  return {
    street: body.street,
    ext_street_number: body.ext_street_number,
    int_street_number: body.int_street_number ?? null,
    suburb: body.suburb,
    township: body.township,
    city: body.city,
    state: body.state,
    postal_code: body.postal_code,
  };
}
