import { availableParallelism } from "node:os";
/**
 * Every bound Emisor enforces, in one place. Units and qualifiers go last in the name.
 * Changing a number here changes behaviour everywhere it is used, and the documents quote them.
 */
export const limits = {
  /** Largest request body accepted, in bytes. */
  bodyBytesMax: 64 * 1024,
  /**
   * Bodies of the operations that need no token are smaller, so that an anonymous caller cannot
   * make Emisor parse and validate much more than a real call sends: a login (an API key of at most
   * 100 characters and a password of at most 128, each fitting even when every character is sent as
   * a \u escape), a rail callback (a SPEI message, whose fields the rail may add to), and any other
   * (health, metrics, the OpenAPI document: they read no body).
   */
  loginBodyBytesMax: 4 * 1024,
  railCallbackBodyBytesMax: 16 * 1024,
  anonymousBodyBytesMax: 1024,
  /** Failed rules a 1000 lists in data.details; data.total counts them all. */
  validationDetailsMax: 10,
  /** Time for a request's headers and body to arrive (ms): 64 KiB in 30 s is a 17 kbit/s link. */
  requestArrivalMs: 30_000,
  /** Deepest nesting of objects and arrays in a JSON body (the API's bodies use 3). */
  jsonDepthMax: 32,
  /** Largest amount of a single money movement, in centavos (10,000,000.00 MXN). */
  amountCentsMax: 1_000_000_000n,
  /** Largest balance a client may be funded with at creation, in centavos. */
  fundingCentsMax: 100_000_000_000n,
  /** A card movement's text: a payment's payment_description (contract 4.6), an unload's description. */
  cardMovementDescriptionLengthMax: 32,
  /** The free text of a transfer between two clients' main balances (POST /v1/clients/transfers). */
  clientTransferDescriptionLengthMax: 100,
  /** Levels of the client tree, the root included: a sub-client's lineage is at most this long. */
  clientDepthMax: 8,
  /** Largest monthly income a cardholder may declare, in centavos (100,000,000.00 MXN). */
  monthlyIncomeCentsMax: 10_000_000_000n,
  /** Oldest birthdate accepted for a cardholder, in years before today. */
  cardholderAgeYearsMax: 130,
  /** The new API key password of a sub-client; the minimum is configured (EMISOR_API_KEY_PASSWORD_MIN_LENGTH). */
  apiKeyPasswordLengthMax: 30,
  pageSizeDefault: 50,
  pageSizeMax: 100,
  /**
   * Rows a listing reaches by page number: page x per_page at most. A page starts (page - 1) x
   * per_page rows in, and most listings read every row before it; further on, a listing that has a
   * cursor is read by cursor.
   */
  pageWindowRowsMax: 10_000,
  /** GET /v1/events reads each client's own events when the caller's subtree has at most this many clients. */
  eventsPerClientScanMax: 64,
  /** The page number a cursor carries (a walk by cursor goes past the page window), at most. */
  pageNumberMax: 1_000_000,
  /** Failed logins from one IP address within the window before 429. */
  loginFailuresPerIpMax: 20,
  loginFailureWindowSeconds: 60,
  /**
   * Failed logins of one API key id (whether a key has it or not) before it is locked, and for how
   * long; a count is forgotten this long after its last failure.
   */
  loginFailuresPerKeyMax: 10,
  loginLockSeconds: 30 * 60,
  /**
   * Expired rows of failed logins (login_failures) each failed login deletes, at most: more than
   * the two it may add, so expired rows cannot pile up.
   */
  loginFailuresPurgeBatch: 100,
  /** Bearer tokens whose signature a process remembers having checked (the oldest is forgotten). */
  verifiedTokensMax: 10_000,
  /**
   * The embedded engine's buffer cache. PGlite's default (128MB) sits inside the service's own
   * memory; its data files are real files, so the operating system caches them anyway.
   */
  pgliteSharedBuffers: "32MB",
  /**
   * The embedded data directory's lock (src/db/dir-lock.ts): its owner touches it this often, and
   * where the owner cannot be looked up (another PID namespace, as in two containers sharing one
   * volume, or another host) the lock is held while its last touch is younger than the lease. The
   * touch runs on the event loop, which PGlite blocks while it runs a statement (PostgreSQL in
   * WebAssembly on the main thread, with no statement timeout), so the lease is 12 beats: a pause
   * of up to a minute does not hand the directory to a second process. It is also how long a start
   * waits, at most, before taking over a lock left by a crash in another namespace.
   */
  dirLockHeartbeatMs: 5_000,
  dirLockLeaseMs: 60_000,
  /** Transaction ids a start gives to bring this cluster's counter past events copied from another (events/xid-counter.ts). */
  eventXidCatchUpMax: 50_000_000,
  /**
   * Idempotency keys are kept this long (architecture: >= 24 h), then neither replayed nor
   * refused (4001): the key is free for a new request. The purge (workers.ts) deletes expired keys
   * in batches of `idempotencyPurgeBatch`, a full batch at once after the other, else once per
   * `idempotencyPurgeIntervalMs`.
   */
  idempotencyKeyTtlHours: 48,
  idempotencyPurgeBatch: 500,
  idempotencyPurgeIntervalMs: 60_000,
  idempotencyKeyLengthMax: 255,
  /** RSA keys: the minimum modulus a client may register. */
  rsaKeyBitsMin: 2048,
  rsaKeyBitsMax: 8192,
  /**
   * Worker threads that decipher RSA (ciphered card numbers and PINs): one more than the cores, at
   * most 8. Each is a V8 isolate with Node's worker bootstrap (about 8 MB of RSS, 16 for the first)
   * holding its own copy of the key; OpenSSL serialises decryptions that share one key object, so
   * copies are what let them run in parallel. On two cores three workers deciphered the most, and
   * fit the bench's 250 MB memory target (bench/NOTES.md has the figures).
   */
  rsaDecryptWorkers: Math.min(8, availableParallelism() + 1),
  /** Ciphertexts handed to a worker in one message, at most. */
  rsaDecryptBatchMax: 8,
  /** scrypt checks (login, PIN) computed at once, one per core; the rest wait in arrival order. */
  scryptInFlight: availableParallelism(),
  publicKeyPemLengthMax: 4096,
  /** Base64 text of a ciphered value (a 4096-bit ciphertext is 684 characters). */
  cipherTextLengthMax: 1024,
  /** How long a request may wait for a database connection before 503. */
  dbAcquireTimeoutMs: 5_000,
  /**
   * The part of a process's PostgreSQL connections one tenant may hold at once (at least one).
   * Past a few busy backends per core, more add only contention: a tenant with a quarter of the
   * default pool runs as fast as with all of it, and its burst leaves the other tenants'
   * statements their CPU (bench/NOTES.md).
   */
  dbTenantShareOfPool: 0.25,
  /**
   * A multi-host DATABASE_URL: how long each host may take to answer when the hosts are tried in
   * turn (after a failure), so one frozen host does not hold up finding the primary.
   */
  dbHostProbeTimeoutMs: 2_000,
  /**
   * A multi-host DATABASE_URL: how long a start waits for a host that is up and (when asked)
   * read-write, so a process restarted during a failover comes up on the promoted standby.
   */
  dbStartWaitMs: 60_000,
  /**
   * DATABASE_READ_URL: how long a listing waits for the replica to replay the writes committed
   * before it began; past this it reads the primary. Also the bound on how stale a listing can
   * be: never (it waits or moves), at the cost of this much latency at most.
   */
  listingReplicaWaitMs: 1_000,
  /** How often a waiting listing's replica is asked how far it has replayed. */
  listingReplicaPollMs: 5,
  /** How long one SQL statement may run before it is cancelled. */
  dbStatementTimeoutMs: 15_000,
  /**
   * PostgreSQL: how long a statement may go unanswered before its connection is dropped and the
   * request answered 503 (a frozen server; a stopped one is noticed at once). Default of
   * EMISOR_DB_QUERY_TIMEOUT_MS; above the statement timeout, so the server cancels first.
   */
  dbQueryTimeoutMs: 20_000,
  /**
   * PostgreSQL: distinct statement texts prepared (parsed and planned once per connection), default
   * of EMISOR_DB_PREPARED_STATEMENTS. Texts past this many are planned afresh on every run.
   */
  dbPreparedStatementsMax: 500,
  /** Cards minted by one stock request. */
  stockMintMax: 10_000,
  /** Wrong PINs in a row before a card's PIN is locked (a new PIN unlocks it). */
  pinAttemptsMax: 3,
  /** Payments of one payer applied in one transaction, at most. */
  paymentBatchMax: 256,
  /**
   * Payments: how long a batch waits to gather what its connections send back, when another
   * process pays from the same balance (a batch per turn of the payer's row lock), in ms.
   */
  paymentGatherMs: 5,
  /** Transfers out written by one statement, at most. */
  transferBatchMax: 64,
  /** Rail state changes (settlements, returns) applied by one transaction, at most. */
  stateChangeBatchMax: 64,
  /**
   * /metrics: the backlogs read from the database (db/backlogs.ts) are kept this long, so scrapes
   * from several Prometheus servers, or a dashboard refreshing, cost one read per interval; each
   * count stops at `backlogCountMax` rows (a gauge at that value means "at least").
   */
  backlogMetricsCacheMs: 5_000,
  backlogCountMax: 10_000,
  /**
   * The shared rate limit (http/rate-limit.ts): how long a process may spend tokens it leased from
   * an API key's bucket before they are dropped, and how many keys' leases it keeps at most.
   */
  rateLimitLeaseMs: 1_000,
  rateLimitSubjectsMax: 100_000,
  /** Graceful shutdown: how long in-flight requests get to finish. */
  shutdownGraceMs: 10_000,
  /** Webhook endpoints one client may register. */
  webhookEndpointsPerClientMax: 20,
  webhookUrlLengthMax: 2048,
  webhookDescriptionLengthMax: 100,
  /** Random bytes of a signing secret (Standard Webhooks allows 24-64). */
  webhookSecretBytes: 32,
  /** After a rotation the previous secret keeps signing (a second signature) this long. */
  webhookSecretRotationGraceHours: 24,
  /** Retired webhook secrets still signing at once (rotations within the grace period). */
  webhookRetiredSecretsMax: 3,
  /** One delivery attempt: connect, send and receive the status line within this. */
  webhookTimeoutMs: 10_000,
  /**
   * Attempts of one delivery, waiting base * 2^(n-1) (+ up to 10% jitter) after failure n:
   * 1, 2, 4 ... 256 minutes, so a delivery is retried for about 8.5 hours before it fails.
   */
  webhookAttemptsMax: 10,
  webhookBackoffBaseMs: 60_000,
  /** How often an idle delivery worker looks for due deliveries. */
  webhookPollIntervalMs: 1_000,
  /**
   * A claimed delivery is hidden from other workers for the timeout plus this margin; if its
   * worker dies, another retries it after that (with the same webhook-id).
   */
  webhookLeaseMarginMs: 30_000,
  /** Deliveries one process sends at the same time. */
  webhookConcurrencyMax: 16,
  /**
   * Of those, how many one client's endpoints may start in one claim, and at how many in flight its
   * endpoints get no new claim: one tenant's endpoints that hang cannot hold every slot while
   * another tenant's deliveries wait (at most 2 x 4 - 1 of the 16).
   */
  webhookConcurrencyPerClientMax: 4,
  /** Deliveries shown in GET /v1/webhooks/{id}, newest first. */
  webhookRecentDeliveriesMax: 20,
  /** Length of the error text kept for the owner to read (never a response body). */
  webhookErrorLengthMax: 200,

  /** Collection-account listing (4.8): the widest init_date..end_date range, in days (inclusive). */
  transferListRangeDaysMax: 366,
  /** Opaque listing cursor, in characters. */
  cursorLengthMax: 200,
  /** SPEI names and payment concepts (domain-mx §6), in characters. */
  speiNameLengthMax: 40,
  speiConceptLengthMax: 40,
  /** SPEI numeric reference (referencia numérica), in digits. */
  speiNumericReferenceDigitsMax: 7,
  /** RFC/CURP fields of SPEI messages, in characters (a CURP is 18). */
  speiRfcCurpLengthMax: 18,
  /** The largest incoming transfer credited, in centavos; a larger one is returned (cause 20). */
  speiIncomingCentsMax: 1_000_000_000n,
  /** Signed rail callbacks older or newer than this (clock skew) are refused, in seconds. */
  speiWebhookToleranceSeconds: 300,
  /** Free text a rail sends with a state change (Detalle) or a failure, as stored, in characters. */
  railDetailLengthMax: 200,
  /** The last error of a rail job, as stored for operators, in characters. */
  railErrorLengthMax: 500,
  /** Fresh tracking keys tried before giving up on a (vanishingly unlikely) collision run. */
  trackingKeyAttemptsMax: 5,

  /** Rail dispatch: rows one worker pass claims, per rail. */
  railBatchSize: 64,
  /** Rail dispatch: SPEI orders claimed together and handed over at once. */
  railDispatchConcurrency: 32,
  /**
   * SPEI orders a process hands to the rail right after their batch commits, at most, on their way
   * at once; the batches past it leave their orders to the dispatcher's passes.
   */
  speiHandOverMax: 256,
  /** How long the acceptances of handed-over orders gather before one statement records them, in ms. */
  speiAcceptedRecordMs: 20,
  /** Rail dispatch: how often a worker looks for due work when idle, in milliseconds. */
  railPollIntervalMs: 500,
  /** A claimed rail job is invisible to other workers this long (then re-sent: rails dedup), in seconds. */
  railLeaseSeconds: 30,
  /** A rail or provider call that has not answered within this is treated as unavailable, in ms. */
  railCallTimeoutMs: 10_000,
  /** An order still ENVIADA this long after it was sent is sent again (the rail dedups), in seconds. */
  speiSettlementCheckSeconds: 600,
  /** Backoff between attempts of a rail job: first and largest wait, in seconds. */
  railRetryBaseSeconds: 2,
  railRetryMaxSeconds: 300,

  /** Airtime (4.9) field bounds, in characters. */
  airtimeProductIdLengthMax: 40,
  airtimeExternalIdLengthMax: 128,
  airtimeAdditionalDataLengthMax: 2048,

  /** Card purchases: MCCs whose clearing may exceed the authorized amount by a tip (restaurants, bars). */
  tipToleranceMccs: ["5812", "5813", "5814"] as readonly string[],
  /** Card purchases: the tip a clearing may add on those MCCs, in percent of what was authorized. */
  tipTolerancePercent: 20,
  /**
   * The client's authorization decision endpoint: how long Emisor waits for its answer (DNS,
   * connect, request and answer included), by default and within which bounds a client may set
   * it. The network waits a few seconds for Emisor's own answer; 3 s leaves room for the rest.
   */
  authorizationDecisionTimeoutMsDefault: 1_500,
  /**
   * Beyond the longest call, before a decision still AWAITING is taken for abandoned (its process
   * stopped) and its stand-in applied.
   */
  authorizationDecisionGraceMs: 2_000,
  /** How often a repeated message waits for its first's decision to be recorded. */
  authorizationDecisionPollMs: 25,
  /** How long a process keeps a client's decision endpoint before reading it again. */
  authorizationEndpointMemoryMs: 1_000,
  /** Clients whose decision endpoint a process keeps. */
  authorizationEndpointMemoryClients: 10_000,
  authorizationDecisionTimeoutMsMin: 100,
  authorizationDecisionTimeoutMsMax: 3_000,
  /** The answer's body, in bytes: 20 metadata entries at their longest fit, with room for escapes. */
  authorizationDecisionAnswerBytesMax: 16 * 1024,
  /** An answer's webhook-timestamp may be this far from Emisor's clock, in seconds. */
  authorizationDecisionToleranceSeconds: 300,
  /** The client's own decline reason (^[A-Z0-9_]+$), in characters. */
  authorizationDecisionReasonLengthMax: 32,
  /** Metadata an answer may carry: entries, and the characters of a key and of a value. */
  authorizationDecisionMetadataEntriesMax: 20,
  authorizationDecisionMetadataKeyLengthMax: 40,
  authorizationDecisionMetadataValueLengthMax: 200,
  /** Why a call stood in, as kept for the client (never the answer's body), in characters. */
  authorizationDecisionDetailLengthMax: 200,
  /**
   * Connections kept open to one decision endpoint (host and port), at most; calls beyond them
   * wait for one within their own timeout. An idle connection is closed after this many ms,
   * below the 5 s after which common servers (Node's among them) close it themselves, so a call
   * rarely picks a connection the server is closing.
   */
  authorizationDecisionSocketsPerHostMax: 64,
  authorizationDecisionIdleSocketMs: 4_000,
  /** After a rotation the previous decision endpoint secret keeps signing this long, and at most this many at once. */
  authorizationEndpointSecretGraceHours: 24,
  authorizationEndpointRetiredSecretsMax: 3,
  /** Card purchases: authorizations written together in one statement, at most. */
  authorizationBatchMax: 64,
  /** Card purchases: wrong CVV2s in a row that raise the event card.cvv_failures. */
  cvvFailuresForEvent: 3,
  /** Spending controls on one product, client, cardholder or card, at most. */
  spendingControlsPerTargetMax: 50,
  /** Spending controls: codes or countries in one list, at most. */
  spendingControlListMax: 500,
  /** Spending controls: count_limit of a velocity limit, at most. */
  spendingControlCountMax: 1_000_000,
  /**
   * The per-process memories of cards, each forgetting its oldest entry past its size, are sized
   * together: full, they hold about 45 MB (about 1 KB a card in the card cache, the authorization
   * memory and the transfer memory; 100-200 bytes an entry in the others), a third of the 128 MB
   * heap `npm run serve` gives V8, so that the live heap stays well under it: a heap near its limit
   * spends its time collecting garbage. A card forgotten is read again; nothing else changes.
   */
  /** Spending controls: targets whose controls a process keeps for deciding authorizations. */
  spendingControlTargetMemory: 30_000,
  /** Card purchases: card states a process keeps for deciding its next batches (two keys a card). */
  authorizationCardMemory: 24_000,
  /** Payments: cards resolved for a caller (owner, account, reference), kept per process. */
  cardCacheEntries: 15_000,
  /** Payments: payers' balances and cards' statuses last seen, for deciding a batch at once. */
  paymentMemory: 20_000,
  /** Transfers out: cards sent from before, and those whose last check failed. */
  transferCardMemory: 10_000,
  /** Card purchases: answers to recent message ids a process keeps, for the network's repeats. */
  authorizationAnswerMemory: 4_096,
  /**
   * Card purchases: authorization batches in flight per process (a card always uses the same one).
   * One: a batch then holds what queued while the last one was written, twice what two lanes
   * share, and costs PostgreSQL a quarter less per authorization (bench/NOTES.md).
   */
  authorizationBatchLanes: 1,
  /** Card purchases: expired holds one pass of the expiry worker releases. */
  holdExpiryBatch: 64,
  /** A card network message's body, in bytes. */
  cardMessageBodyBytesMax: 16 * 1024,
  /** A clearing file: lines in one upload, and its body in bytes. */
  clearingFileLinesMax: 100_000,
  clearingFileBytesMax: 64 * 1024 * 1024,
  /**
   * A clearing file's lanes: chunks posted at once, each lane a set of cards' lines in file order.
   * Every chunk ends on the same CARD_HOLDS shards, so lanes beyond the cores only queue there,
   * and an authorization arriving meanwhile queues behind them (bench/NOTES.md: two lanes post
   * as fast as four, and halve its wait).
   */
  clearingFileLanes: 2,
  /**
   * A clearing file's lines posted per transaction (clearing-batch.ts): large enough that a line
   * costs a fraction of a statement, small enough that the cards and shards it locks are held
   * briefly (125 posts as fast as 250, with a fifth of an authorization's wait meanwhile at p99).
   */
  clearingFileChunkLines: 125,
  /** A clearing file's lines read (and card numbers deciphered) per turn of the event loop. */
  clearingFileParseBatch: 256,
} as const;
