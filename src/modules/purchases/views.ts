import { toPesos } from "../../ledger/money.ts";
import type { AuthorizationRow } from "./repository.ts";

/** An authorization as the API and its events show it: amounts in MXN, the hold as it is now. */
export function renderAuthorization(row: AuthorizationRow) {
  return {
    id: row.id,
    card_id: row.card_id,
    client_id: row.client_id,
    status: row.status,
    force_post: row.force_post,
    amount: toPesos(row.requested_cents),
    currency: row.currency,
    merchant_amount: Number(row.merchant_amount),
    authorized: toPesos(row.authorized_cents),
    held: toPesos(row.held_cents),
    cleared: toPesos(row.cleared_cents),
    authorization_code: row.authorization_code,
    decline_reason: row.decline_reason,
    channel: row.channel,
    merchant: row.merchant,
    expires_at: row.expires_at?.toISOString() ?? null,
    decision: row.decision === null ? null : { status: row.decision, metadata: row.decision_metadata ?? {} },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** One message of an authorization's history, in MXN. */
export function renderAuthorizationMessage(row: {
  message_id: string;
  type: string;
  amount_cents: bigint | null;
  response: unknown;
  created_at: Date;
}) {
  const answer = row.response as { result?: string } | null;
  return {
    message_id: row.message_id,
    type: row.type,
    amount: toPesos(row.amount_cents ?? 0n),
    result: answer?.result ?? "",
    created_at: row.created_at.toISOString(),
  };
}
