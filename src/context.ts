import type { FastifyBaseLogger } from "fastify";
import type { Config } from "./config.ts";
import { deriveKeyRing, type KeyRing, loadMasterKey } from "./crypto/keys.ts";
import { loadOrCreateSystemKey, type SystemKey } from "./crypto/rsa.ts";
import type { Database, Db } from "./db/database.ts";
import { type ListingReads, primaryListings, ReplicaListings } from "./db/listings.ts";
import { limits } from "./limits.ts";
import { AuthService } from "./modules/auth/service.ts";
import { CardholderLookups } from "./modules/cardholders/lookups.ts";
import { CardCache } from "./modules/cards/card-cache.ts";
import { alignTransactionCounter } from "./modules/events/xid-counter.ts";
import { PaymentBatcher } from "./modules/payments/batcher.ts";
import { countBatches, type PaymentCounters, paymentCounters } from "./modules/payments/metrics.ts";
import { CardMessages } from "./modules/purchases/processor.ts";
import { TransferBatcher } from "./modules/transfers/batcher.ts";
import { sealStoredBeneficiaryCards } from "./modules/transfers/beneficiary-card.ts";
import { KnownCards } from "./modules/transfers/known-cards.ts";
import { SpeiStateChanges } from "./modules/transfers/state-changes.ts";
import { type WebhookAttemptCounter, webhookAttemptCounter } from "./modules/webhooks/metrics.ts";
import { createRails, type Rails } from "./rails/index.ts";

/** What every module is built from: configuration, the database and the keys. */
export interface AppContext {
  config: Config;
  database: Database;
  db: Db;
  keys: KeyRing;
  systemKey: SystemKey;
  auth: AuthService;
  /** SPEI and airtime adapters (simulators by default); closed with the app. */
  rails: Rails;
  /** Transfers out of this process, written in batches. */
  transferBatcher: TransferBatcher;
  /** The cards this process last sent transfers from, as last read. */
  knownCards: KnownCards;
  /** Cardholder lookups by id, shared by concurrent requests for the same one. */
  cardholderLookups: CardholderLookups;
  /** The SPEI rail's state changes (callbacks, or the simulator's), applied in batches. */
  speiStateChanges: SpeiStateChanges;
  /** Payments of this process, applied in batches. */
  paymentBatcher: PaymentBatcher;
  /** The cards this process was last asked to pay, as last read. */
  cardCache: CardCache;
  /** The payment batcher's counters, which the app's /metrics shows. */
  paymentCounters: PaymentCounters;
  /** The card network's messages; authorizations are decided in batches. */
  cardMessages: CardMessages;
  /** Where the heavy listings read: the replica of DATABASE_READ_URL once caught up, or `db`. */
  listings: ListingReads;
  /** The webhook worker's attempts by outcome, which the app's /metrics shows. */
  webhookAttempts: WebhookAttemptCounter;
}

export async function createContext(
  config: Config,
  database: Database,
  warn: FastifyBaseLogger["warn"] | ((message: string) => void),
  replica?: Database,
): Promise<AppContext> {
  const master = loadMasterKey({
    masterKey: config.masterKey,
    dataDir: config.dataDir,
    sandbox: config.sandbox,
    warn: (message) => (warn as (message: string) => void)(message),
  });
  const keys = deriveKeyRing(master);
  const systemKey = await loadOrCreateSystemKey(database.db, keys.wrap);
  await alignTransactionCounter(database.db, (message) => (warn as (message: string) => void)(message));
  // Orders to cards stored before migration 0013 kept the card number in clear: sealed once here.
  const sealed = await sealStoredBeneficiaryCards(database.db, keys.vault);
  if (sealed > 0)
    (warn as (message: string) => void)(
      `sealed the beneficiary card numbers of ${sealed} stored transfer orders`,
    );
  const auth = new AuthService({
    db: database.db,
    tokenKey: keys.token,
    tokenTtlSeconds: config.tokenTtlSeconds,
    authCacheSeconds: config.authCacheSeconds,
  });
  const rails = createRails(config);
  // The rail's asynchronous state changes (settled, returned) go through the order state machine.
  const speiStateChanges = new SpeiStateChanges(database.db);
  rails.spei.onStateChange(async (change) => {
    await speiStateChanges.apply(change);
  });
  const transferBatcher = new TransferBatcher(database.db);
  const counters = paymentCounters();
  return {
    config,
    database,
    db: database.db,
    keys,
    systemKey,
    auth,
    rails,
    transferBatcher,
    knownCards: new KnownCards(),
    speiStateChanges,
    paymentBatcher: new PaymentBatcher(database.db, countBatches(counters)),
    cardCache: new CardCache(),
    paymentCounters: counters,
    cardholderLookups: new CardholderLookups(database.db),
    listings: replica
      ? new ReplicaListings(database, replica, {
          waitMs: limits.listingReplicaWaitMs,
          pollMs: limits.listingReplicaPollMs,
        })
      : primaryListings(database),
    cardMessages: new CardMessages(
      { db: database.db, keys, systemKey, sandbox: config.sandbox },
      {
        holdDays: config.holdDays,
        lodgingHoldDays: config.lodgingHoldDays,
      },
    ),
    webhookAttempts: webhookAttemptCounter(),
  };
}
