/**
 * The closed error catalog. Every failure a client or a rail can cause is one of these entries;
 * what only a bug can cause is an assertion that becomes a logged 500 (internalError).
 *
 * Codes have four digits: the first is the class (1 request, 2 authentication, 3 not found,
 * 4 conflict, 5 business rule, 6 dependency, 9 internal), the second the area (0 common,
 * 1 clients/keys, 2 cardholders, 3 products/cards, 4 payments, 5 SPEI, 6 airtime, 7 events).
 * docs/reference/errors.md lists every entry; test/docs.test.ts keeps the two in step.
 */
export interface ErrorDef {
  readonly code: number;
  readonly status: number;
  readonly message: string;
  /** True when the same request may succeed if retried unchanged (503, timeouts). */
  readonly transient: boolean;
}

function def(code: number, status: number, message: string, transient = false): ErrorDef {
  return { code, status, message, transient };
}

export const errors = {
  // 1xxx: the request itself is wrong.
  validationFailed: def(1000, 400, "The request is invalid"),
  malformedJson: def(1001, 400, "The body is not valid JSON"),
  bodyTooLarge: def(1002, 413, "The body is larger than the limit"),
  unsupportedMediaType: def(1003, 415, "Content-Type must be application/json"),
  bodyRequired: def(1004, 400, "A JSON body is required"),
  invalidCiphertext: def(1005, 400, "A ciphered value could not be deciphered"),
  invalidIdempotencyKey: def(1006, 400, "Idempotency-Key must be 1-255 visible ASCII characters"),
  headersTooLarge: def(1007, 431, "The request line and headers are larger than 16 KiB"),
  requestTimeout: def(1008, 408, "The request did not arrive in time", true),
  cardNumberInText: def(1010, 400, "Free text must not contain a card number"),
  invalidPublicKey: def(1101, 400, "The public key must be an RSA SPKI PEM of at least 2048 bits"),
  panInClear: def(
    1301,
    400,
    "card_number must be the card's UUID or its 16-digit number ciphered under the system key",
  ),

  // 2xxx: who is calling.
  tokenMissing: def(2001, 401, "Authorization: Bearer <token> is required"),
  tokenInvalid: def(2002, 401, "The token is invalid"),
  tokenExpired: def(2003, 401, "The token has expired; log in again"),
  tokenRevoked: def(2004, 401, "The token has been revoked; log in again"),
  invalidCredentials: def(2005, 401, "Invalid API key or password"),
  apiKeyDisabled: def(2006, 401, "The API key is disabled"),
  loginRateLimited: def(2007, 429, "Too many failed logins; retry later", true),
  apiKeyLocked: def(2008, 429, "The API key is locked after repeated failed logins; retry later", true),
  rateLimited: def(2009, 429, "Too many requests; retry later", true),
  speiSignatureInvalid: def(2501, 401, "The SPEI callback signature is missing, stale or wrong"),
  cardNetworkSignatureInvalid: def(2801, 401, "The card network's signature is missing, stale or wrong"),

  // 3xxx: not found, or not yours (never revealed as different).
  routeNotFound: def(3000, 404, "No such route"),
  clientNotFound: def(3101, 404, "Client not found"),
  cardholderNotFound: def(3201, 404, "Cardholder not found"),
  productNotFound: def(3301, 404, "Product not found"),
  cardNotFound: def(3302, 404, "Card not found"),
  collectionAccountNotFound: def(3501, 404, "Collection account (CLABE) not found"),
  speiOrderNotFound: def(3502, 404, "Transfer not found"),
  airtimeProductNotFound: def(3601, 404, "Airtime product not found"),
  airtimeTopupNotFound: def(3602, 404, "Airtime top-up not found"),
  webhookNotFound: def(3701, 404, "Webhook endpoint not found"),
  eventNotFound: def(3702, 404, "Event not found"),
  authorizationNotFound: def(3801, 404, "Authorization not found"),
  networkMessageNotFound: def(3802, 404, "The original message is not known"),
  spendingControlNotFound: def(3803, 404, "Spending control not found"),
  authorizationEndpointNotFound: def(
    3810,
    404,
    "No authorization decision endpoint: you have none of your own and inherit none",
  ),
  ownAuthorizationEndpointNotFound: def(
    3811,
    404,
    "You have no authorization decision endpoint of your own; one you inherit is your ancestor's to change",
  ),

  // 4xxx: conflicts.
  idempotencyKeyReused: def(4001, 409, "This Idempotency-Key was used with a different request"),
  clientAliasTaken: def(4101, 409, "Another client of your organisation already has this alias"),
  cardholderRfcTaken: def(4201, 409, "A cardholder with this rfc already exists"),
  cardholderCurpTaken: def(4202, 409, "A cardholder with this curp already exists"),
  cardholderEmailTaken: def(4203, 409, "A cardholder with this email already exists"),
  cardholderMobilePhoneTaken: def(4204, 409, "A cardholder with this mobile_phone already exists"),
  returnAlreadyReversed: def(4801, 409, "The return was reversed already"),
  clearingFileReused: def(4802, 409, "This file_id was processed with other lines"),

  // 5xxx: business rules.
  insufficientFunds: def(5001, 422, "Insufficient balance"),
  publicKeyNotRegistered: def(
    5101,
    422,
    "No public key is registered for this API key; register one with POST /v1/clients/api_key/public_key",
  ),
  subclientFundingInsufficient: def(
    5102,
    422,
    "Your available balance above your minimum balance does not cover the new client's available amount",
  ),
  clientDepthExceeded: def(
    5103,
    422,
    "The client tree is at its maximum depth; no deeper sub-client can be created",
  ),
  clientStatusOwn: def(5104, 422, "A client cannot change its own status; its parent (or an ancestor) does"),
  clientEnableNotAllowed: def(
    5107,
    422,
    "The client was disabled by a client above you: only that client, or one above it, enables it again",
  ),
  clientTransferInsufficient: def(
    5105,
    422,
    "The paying client's available balance above its minimum balance does not cover the amount",
  ),
  clientTransferToDisabled: def(
    5106,
    422,
    "The receiving client, or a client above it, is disabled; enable it first or send the money elsewhere",
  ),
  cardholderLookupAmbiguous: def(5201, 422, "Several cardholders match; add another filter"),

  productInactive: def(5301, 422, "The product is not active"),
  stockEmpty: def(5302, 422, "The product has no cards in stock"),
  cardAlreadyActive: def(5303, 422, "The card is already active; activation happens once"),
  cardCanceled: def(5304, 422, "The card is canceled; a canceled card cannot change"),
  cardTransitionNotAllowed: def(5305, 422, "The card cannot move from its status to the one requested"),
  cardStatusUnchanged: def(5306, 422, "The card already has that status"),
  cardNotActive: def(5307, 422, "The card must be ACTIVE for this operation"),
  pinLocked: def(5308, 422, "The card's PIN is locked after repeated wrong PINs; set a new PIN"),
  pinIncorrect: def(5309, 422, "The PIN is incorrect"),
  clientAddressMissing: def(5310, 422, "B2C delivery needs the client's address, and the client has none"),
  productNotOwned: def(5311, 422, "Only the client that created a product can mint its stock or assign it"),
  pinNotSet: def(5312, 422, "The card has no PIN; set one with PUT /v1/cards/pin"),
  cardholderIdentityMissing: def(
    5313,
    422,
    "The product requires the cardholder's rfc or curp, which is blank; use a product that allows it",
  ),
  cardExpired: def(5314, 422, "The card is past its expiry date (the end of its expiry month)"),
  binExhausted: def(
    5315,
    422,
    "Too few unused card numbers are left under the product's BIN for this quantity; mint fewer, or use a product with another BIN",
  ),
  paymentInsufficientBalance: def(5401, 422, "Your main balance is not enough for this payment"),
  cardNotPayable: def(
    5402,
    422,
    "The card cannot receive payments in its status (only NEED_ACTIVATION or ACTIVE)",
  ),
  cardUnloadExceedsBalance: def(5403, 422, "The amount to unload is more than the card's balance"),
  cardBalanceEmpty: def(5404, 422, "The card's balance is 0.00: there is nothing to unload"),
  cardClientDisabled: def(
    5405,
    422,
    "The card's client, or a client above it, is disabled: its cards receive no payments until it is enabled again",
  ),
  speiInsufficientFunds: def(
    5501,
    422,
    "Insufficient balance for the transfer amount plus its commission and IVA",
  ),
  speiOrderNotReturnable: def(5502, 422, "The transfer can no longer be returned"),
  authorizationOfAnotherCard: def(5801, 422, "The authorization belongs to another card"),
  originalNotAReturn: def(5802, 422, "A RETURN_REVERSAL must name a RETURN"),
  spendingControlsLimitReached: def(5803, 422, "The target has as many spending controls as it may have"),
  spendingControlTypeFixed: def(5804, 422, "A spending control keeps its type; delete it and create another"),
  airtimeInsufficientFunds: def(5601, 422, "Insufficient balance for the airtime top-up"),
  airtimeProductInactive: def(5603, 422, "The airtime product is not active"),
  airtimeNumberRejected: def(5604, 422, "The carrier refused the phone number; nothing was charged"),
  webhookLimitReached: def(
    5701,
    422,
    "This client has the maximum number of webhook endpoints; delete one first",
  ),
  webhookDisabled: def(
    5702,
    422,
    "The webhook endpoint is disabled; enable it with POST /v1/webhooks/{id}/enable first",
  ),

  // 6xxx: dependencies.
  databaseUnavailable: def(6001, 503, "The database is unavailable; retry later", true),
  shuttingDown: def(
    6002,
    503,
    "The service is shutting down and did not run this request; retry it (on another instance)",
    true,
  ),
  databaseOutcomeUnknown: def(
    6003,
    504,
    "The database stopped answering while this request was being committed: it may have taken effect. Retry it with the same Idempotency-Key, which answers its outcome; without a key, read the state before retrying",
    true,
  ),
  speiWebhookNotConfigured: def(
    6501,
    503,
    "The SPEI callback secret is not configured (EMISOR_SPEI_WEBHOOK_SECRET); retry later",
    true,
  ),
  cardNetworkNotConfigured: def(
    6801,
    503,
    "The card network secret is not configured (EMISOR_CARD_NETWORK_SECRET); retry later",
    true,
  ),
  airtimeProviderFailed: def(
    6601,
    502,
    "The airtime provider could not complete the top-up; nothing was charged",
    true,
  ),

  // 9xxx: bugs.
  internalError: def(9000, 500, "Internal error"),
} as const satisfies Record<string, ErrorDef>;

export type ErrorName = keyof typeof errors;

/** One failed rule of one field, as returned in `data.details` of a 1000 error. */
export interface ValidationDetail {
  field: string;
  rule: string;
  message: string;
}

export class AppError extends Error {
  readonly def: ErrorDef;
  readonly details: ValidationDetail[] | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    def: ErrorDef,
    options: { message?: string; details?: ValidationDetail[]; headers?: Record<string, string> } = {},
  ) {
    super(options.message ?? def.message);
    this.name = "AppError";
    this.def = def;
    this.details = options.details;
    this.headers = options.headers;
  }
}

/** The rule of a validation detail that found a card number in free text. */
export const cardNumberRule = "card_number";

/**
 * The error for failed rules, each a detail (of `total` that failed): 1010 when one found a card
 * number in free text, so a client can tell that refusal from other mistakes and find where its
 * card numbers leak from; otherwise 1000. The message names the first such rule's field, and how
 * many more failed.
 */
export function validationError(details: ValidationDetail[], total = details.length): AppError {
  const cardNumber = details.find((detail) => detail.rule === cardNumberRule);
  const def = cardNumber ? errors.cardNumberInText : errors.validationFailed;
  const first = cardNumber ?? details[0];
  const more = total > 1 ? ` (and ${total - 1} more)` : "";
  const message = first ? `${first.field}: ${first.message}${more}` : def.message;
  return new AppError(def, { message, details });
}

/** A validation failure of one field, the most common error a service raises by hand. */
export function invalidField(field: string, rule: string, message: string): AppError {
  return new AppError(errors.validationFailed, {
    message: `${field}: ${message}`,
    details: [{ field, rule, message }],
  });
}
