import type { ColumnType, Generated } from "kysely";

/**
 * The database as Kysely sees it. One interface per table, kept in step with migrations/.
 * int8 columns are bigint (see database.ts); timestamps are Date.
 */
/** A timestamptz with a default: optional on insert. */
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** A nullable timestamptz. */
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json = ColumnType<unknown, string | undefined, string>;

/** A webhook signing secret replaced by a rotation: sealed, and signing until `expires_at`. */
export interface RetiredSecret {
  sealed: string;
  /** ISO 8601. */
  expires_at: string;
}

export interface ClientsTable {
  id: string;
  parent_id: string | null;
  root_id: string;
  lineage: string[];
  code: Generated<string>;
  name: string;
  alias: string;
  email: string | null;
  phone: string | null;
  mobile_phone: string | null;
  rfc: string | null;
  street: string | null;
  ext_street_number: string | null;
  int_street_number: string | null;
  suburb: string | null;
  township: string | null;
  city: string | null;
  state: string | null;
  postal_code: string | null;
  country: Generated<string>;
  contact: Json | null;
  legal_representative: Json | null;
  status: Generated<"ACTIVE" | "DISABLED">;
  /** The client that disabled it (migration 0018); null when active or disabled before 0018. */
  disabled_by_client_id: Generated<string | null>;
  min_balance_cents: Generated<bigint>;
  timezone: Generated<string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  client_id: string;
  key: string;
  name: string;
  alias: string;
  description: string | null;
  password_hash: string;
  status: Generated<"ACTIVE" | "DISABLED">;
  public_key_pem: string | null;
  public_key_registered_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** Failed logins of an address or a key id (migration 0014). */
export interface LoginFailuresTable {
  kind: "address" | "key";
  subject: string;
  failures: number;
  expires_at: Timestamp;
}

export interface RevokedTokensTable {
  jti: string;
  api_key_id: string;
  expires_at: Timestamp;
}

export type LedgerAccountKind = "CLIENT_MAIN" | "CARD" | "SYSTEM" | "CARD_OWED";

export interface LedgerAccountsTable {
  id: string;
  kind: LedgerAccountKind;
  code: string | null;
  client_id: string | null;
  balance_cents: Generated<bigint>;
  allow_negative: Generated<boolean>;
  /** The card a CARD_OWED account records the debt of (migration 0024). */
  card_id: string | null;
  created_at: Timestamp;
}

export interface JournalEntriesTable {
  id: string;
  kind: string;
  description: string | null;
  client_id: string | null;
  reverses_id: string | null;
  metadata: Json | null;
  created_at: Timestamp;
}

export interface PostingsTable {
  id: Generated<bigint>;
  entry_id: string;
  account_id: string;
  amount_cents: bigint;
  created_at: Timestamp;
}

/** Money moved between two clients' main balances (migration 0019); the id is its journal entry's. */
export interface ClientTransfersTable {
  id: string;
  from_client_id: string;
  to_client_id: string;
  created_by_client_id: string;
  amount_cents: bigint;
  description: string | null;
  created_at: Timestamp;
}

export interface IdempotencyKeysTable {
  api_key_id: string;
  key: string;
  request_hash: string;
  response_status: number;
  response_body: Json;
  created_at: Timestamp;
}

export interface SystemKeysTable {
  id: string;
  public_key_pem: string;
  private_key_sealed: string;
  created_at: Timestamp;
}

export interface EventsTable {
  id: string;
  seq: Generated<bigint>;
  /** The writing transaction's id (xid8), as text. */
  xid: Generated<string>;
  type: string;
  client_id: string;
  data: Json;
  created_at: Timestamp;
}

export interface CardholdersTable {
  id: string;
  client_id: string;
  first_name: string;
  second_name: string | null;
  third_name: string | null;
  surname: string;
  second_surname: string | null;
  work_area: string | null;
  rfc: string | null;
  curp: string | null;
  email: string;
  primary_phone: string;
  mobile_phone: string;
  street: string;
  ext_street_number: string;
  int_street_number: string | null;
  suburb: string;
  township: string;
  city: string;
  state: string;
  postal_code: string;
  country: Generated<string>;
  /** A calendar date; read back as Date at UTC midnight. */
  birthdate: ColumnType<Date, string, string>;
  gender: string;
  marital_status: string;
  has_kids: boolean;
  gross_monthly_income_cents: bigint | null;
  net_monthly_income_cents: bigint | null;
  observations: string | null;
  external_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type CardType = "PHYSICAL" | "VIRTUAL";
export type CardStatus = "NOT_ASSIGNED" | "NEED_ACTIVATION" | "ACTIVE" | "TEMPORARY_INACTIVE" | "CANCELED";

export interface ProductsTable {
  id: string;
  owner_client_id: string;
  code: Generated<string>;
  name: string;
  description: string;
  card_type: CardType;
  bin: string;
  affinity_group: string;
  allow_blank_curp: Generated<boolean>;
  allow_blank_rfc: Generated<boolean>;
  transfer_commission_cents: Generated<bigint>;
  card_validity_months: Generated<number>;
  country_code: Generated<string>;
  currency_code: Generated<string>;
  status: Generated<"ACTIVE" | "INACTIVE">;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ProductClientsTable {
  product_id: string;
  client_id: string;
  assigned_by_client_id: string;
  created_at: Timestamp;
}

export interface AccountsTable {
  id: string;
  account_number: Generated<bigint>;
  cardholder_id: string;
  client_id: string;
  product_id: string;
  status: Generated<"ACTIVE" | "CANCELED">;
  document_type: string;
  document_number: string;
  observations: Generated<string>;
  assigned_by_api_key_id: string;
  reference: Generated<string>;
  clabe: string | null;
  activation_date: NullableTimestamp;
  created_at: Timestamp;
}

export interface CardsTable {
  id: string;
  product_id: string;
  pan_sealed: string;
  pan_fingerprint: string;
  last_four: string;
  expires_on: ColumnType<Date, string, string>;
  status: Generated<CardStatus>;
  client_id: string | null;
  cardholder_id: string | null;
  account_id: string | null;
  assigned_at: NullableTimestamp;
  activated_at: NullableTimestamp;
  canceled_at: NullableTimestamp;
  status_reason: string | null;
  pin_hash: string | null;
  pin_failed_attempts: Generated<number>;
  pin_locked: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CardShipmentsTable {
  id: string;
  card_id: string;
  shipping_method: "B2B" | "B2C" | "CUSTOM";
  delivery_type: "STANDARD" | "EXPRESS";
  address: Json;
  status: Generated<string>;
  created_at: Timestamp;
}

export interface CardStatusHistoryTable {
  id: Generated<bigint>;
  card_id: string;
  from_status: string;
  to_status: string;
  reason: string | null;
  latitude: number | null;
  longitude: number | null;
  api_key_id: string | null;
  created_at: Timestamp;
}

export type WebhookStatus = "ENABLED" | "DISABLED";
export type DeliveryKind = "EVENT" | "TEST" | "REPLAY";
export type DeliveryStatus = "PENDING" | "DELIVERED" | "FAILED";

export interface WebhookEndpointsTable {
  id: string;
  client_id: string;
  url: string;
  description: string | null;
  /** null: every event type. */
  event_types: string[] | null;
  include_subclients: Generated<boolean>;
  secret_sealed: string;
  /** Secrets replaced by a rotation that still sign until their expiry, newest last. */
  retired_secrets: ColumnType<RetiredSecret[], string | undefined, string>;
  status: Generated<WebhookStatus>;
  disabled_reason: string | null;
  disabled_at: NullableTimestamp;
  failure_streak: Generated<number>;
  last_success_at: NullableTimestamp;
  last_failure_at: NullableTimestamp;
  last_error: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type StandIn = "APPROVE" | "DECLINE";

/** One client's authorization decision endpoint (migration 0028); sub-clients inherit it. */
export interface AuthorizationEndpointsTable {
  client_id: string;
  url: string;
  timeout_ms: number;
  stand_in: StandIn;
  secret_sealed: string;
  /** Secrets replaced by a rotation that still sign until their expiry, newest last. */
  retired_secrets: ColumnType<RetiredSecret[], string | undefined, string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface WebhookDeliveriesTable {
  id: string;
  event_id: string;
  endpoint_id: string;
  kind: DeliveryKind;
  status: Generated<DeliveryStatus>;
  attempts: Generated<number>;
  next_attempt_at: Timestamp;
  last_attempt_at: NullableTimestamp;
  last_status_code: number | null;
  last_error: string | null;
  delivered_at: NullableTimestamp;
  created_at: Timestamp;
}

/** A calendar date column, written as YYYY-MM-DD; select it as text (`col::text`). */
type DateColumn = ColumnType<Date, string, string>;

export interface CollectionAccountsTable {
  id: string;
  client_id: string;
  clabe: string;
  status: Generated<"ACTIVE" | "BLOCKED" | "CANCELLED">;
  created_at: Timestamp;
}

export interface TransferOperationsTable {
  id: string;
  collection_account_id: string;
  client_id: string;
  transfer_id: string;
  fecha_operacion: DateColumn;
  day_seq: bigint;
  institucion_ordenante: string;
  institucion_beneficiaria: string;
  clave_rastreo: string;
  monto_cents: bigint;
  nombre_beneficiario: string;
  tipo_cuenta_beneficiario: string;
  cuenta_beneficiario: string;
  rfc_curp_beneficiario: string;
  concepto_pago: string;
  referencia_numerica: string;
  nombre_ordenante: string;
  tipo_cuenta_ordenante: string;
  cuenta_ordenante: string;
  rfc_curp_ordenante: string;
  cambio_estado_detalle: string;
  cambio_estado_causa_devolucion: string;
  cambio_estado_estado: string;
  email_beneficiario: string;
  transfer_commission_cents: Generated<bigint>;
  commission_charged_cents: Generated<bigint>;
  iva_charged_cents: Generated<bigint>;
  ts_liquidacion: ColumnType<Date, Date | string, Date | string>;
  entry_id: string;
  created_at: Timestamp;
}

export interface TransferOperationDaysTable {
  collection_account_id: string;
  fecha_operacion: DateColumn;
  operations: bigint;
}

export type SpeiOrderStatus = "PENDIENTE" | "ENVIADA" | "LIQUIDADA" | "DEVUELTA" | "CANCELADA";
export type SpeiAccountType = "PHONE" | "CARD" | "CLABE";

export interface SpeiOrdersTable {
  id: string;
  client_id: string;
  payer_account_id: string;
  card_id: string | null;
  tracking_key: string;
  operation_date: DateColumn;
  amount_cents: bigint;
  commission_cents: bigint;
  iva_cents: bigint;
  /** A card's is masked (its number is in beneficiary_card_sealed); a CLABE or phone as sent. */
  beneficiary_account: string;
  beneficiary_card_sealed: string | null;
  beneficiary_account_type: SpeiAccountType;
  beneficiary_institution: string;
  beneficiary_name: string;
  beneficiary_rfc_curp: string;
  beneficiary_email: string;
  payment_concept: string;
  numeric_reference: string;
  status: Generated<SpeiOrderStatus>;
  rail_reference: string | null;
  state_detail: string | null;
  return_cause: string | null;
  entry_id: string;
  reversal_entry_id: string | null;
  sent_at: NullableTimestamp;
  settled_at: NullableTimestamp;
  returned_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type Rail = "SPEI" | "AIRTIME";

export interface RailOutboxTable {
  id: Generated<bigint>;
  rail: Rail;
  ref_id: string;
  attempts: Generated<number>;
  next_attempt_at: Timestamp;
  last_error: string | null;
  created_at: Timestamp;
}

export interface AirtimeProductsTable {
  id: string;
  sku: string;
  carrier: string;
  name: string;
  description: string;
  amount_cents: bigint;
  status: Generated<"ACTIVE" | "INACTIVE">;
  created_at: Timestamp;
}

export type AirtimeTopupStatus = "PENDING" | "COMPLETED" | "FAILED";

export interface AirtimeTopupsTable {
  id: string;
  client_id: string;
  payer_account_id: string;
  card_id: string | null;
  product_id: string;
  phone_number: string;
  email: string;
  external_id: string | null;
  additional_data: string | null;
  amount_cents: bigint;
  status: Generated<AirtimeTopupStatus>;
  provider_reference: string | null;
  failure_reason: string | null;
  entry_id: string;
  reversal_entry_id: string | null;
  api_key_id: string | null;
  idempotency_key: string | null;
  completed_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type AuthorizationStatus = "PENDING" | "SETTLED" | "VOIDED" | "EXPIRED" | "DECLINED";

/** An authorization and its hold, or a force post (migration 0024). */
export interface CardAuthorizationsTable {
  id: string;
  card_id: string;
  client_id: string;
  status: AuthorizationStatus;
  force_post: Generated<boolean>;
  currency: string;
  merchant_amount: bigint;
  requested_cents: bigint;
  authorized_cents: Generated<bigint>;
  held_cents: Generated<bigint>;
  cleared_cents: Generated<bigint>;
  authorization_code: string | null;
  decline_reason: string | null;
  channel: string;
  partial_allowed: Generated<boolean>;
  merchant: Json;
  mcc: string;
  hold_account_id: string | null;
  expires_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** The client's real-time decision (migration 0027): null when no endpoint was asked. */
  decision: ColumnType<
    AuthorizationDecision | null,
    AuthorizationDecision | null | undefined,
    AuthorizationDecision | null
  >;
  decision_metadata: ColumnType<unknown, string | null | undefined, string | null>;
}

export type AuthorizationDecision = "AWAITING" | "ANSWERED" | "STOOD_IN";

/** A processor's message (or an expiry), with the answer it was given (migration 0024). */
export interface CardNetworkMessagesTable {
  message_id: string;
  seq: Generated<bigint>;
  type: string;
  card_id: string | null;
  client_id: string | null;
  authorization_id: string | null;
  amount_cents: bigint | null;
  entry_id: string | null;
  reverses_message_id: string | null;
  file_id: string | null;
  merchant: Json | null;
  response: Json | null;
  created_at: Timestamp;
}

export interface CardClearingFilesTable {
  file_id: string;
  lines: number;
  report: Json;
  created_at: Timestamp;
}

export interface Schema {
  clients: ClientsTable;
  api_keys: ApiKeysTable;
  revoked_tokens: RevokedTokensTable;
  login_failures: LoginFailuresTable;
  ledger_accounts: LedgerAccountsTable;
  journal_entries: JournalEntriesTable;
  postings: PostingsTable;
  client_transfers: ClientTransfersTable;
  idempotency_keys: IdempotencyKeysTable;
  system_keys: SystemKeysTable;
  events: EventsTable;
  cardholders: CardholdersTable;
  products: ProductsTable;
  product_clients: ProductClientsTable;
  accounts: AccountsTable;
  cards: CardsTable;
  card_shipments: CardShipmentsTable;
  card_status_history: CardStatusHistoryTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  authorization_endpoints: AuthorizationEndpointsTable;
  collection_accounts: CollectionAccountsTable;
  transfer_operations: TransferOperationsTable;
  transfer_operation_days: TransferOperationDaysTable;
  spei_orders: SpeiOrdersTable;
  rail_outbox: RailOutboxTable;
  airtime_products: AirtimeProductsTable;
  airtime_topups: AirtimeTopupsTable;
  card_authorizations: CardAuthorizationsTable;
  card_network_messages: CardNetworkMessagesTable;
  card_clearing_files: CardClearingFilesTable;
}
