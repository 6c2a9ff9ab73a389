import { encryptFor, parsePublicKey, type SystemKey } from "../../crypto/rsa.ts";
import type { Db } from "../../db/database.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";

/** The test constant of contract 4.1: deciphering `sensitive_data` must yield exactly this. */
export const sensitiveDataConstant = "All your base are belong to us...";

async function keyWithClient(db: Db, caller: Caller) {
  return db
    .selectFrom("api_keys as k")
    .innerJoin("clients as c", "c.id", "k.client_id")
    .select(["c.id as client_id", "c.name", "c.alias as client_alias", "k.id", "k.alias", "k.public_key_pem"])
    .where("k.id", "=", caller.apiKeyId)
    .executeTakeFirstOrThrow();
}

/** Registers (or replaces) the calling API key's RSA public key. */
export async function registerPublicKey(db: Db, caller: Caller, pem: string) {
  const key = parsePublicKey(pem);
  await db
    .updateTable("api_keys")
    .set({ public_key_pem: key.pem, public_key_registered_at: new Date(), updated_at: new Date() })
    .where("id", "=", caller.apiKeyId)
    .execute();
  const row = await keyWithClient(db, caller);
  return {
    client: { id: row.client_id, name: row.name, alias: row.client_alias },
    api_key: { id: row.id, alias: row.alias, public_key: key.pem },
  };
}

/** Contract 4.1: both public keys and the test constant ciphered under the client's key. */
export async function getPublicKeys(db: Db, systemKey: SystemKey, caller: Caller) {
  const row = await keyWithClient(db, caller);
  const publicKey = orNotRegistered(row.public_key_pem);
  return {
    client: { id: row.client_id, name: row.name, alias: row.client_alias },
    api_key: { id: row.id, alias: row.alias, public_key: publicKey },
    system: { public_key: systemKey.publicKeyPem },
    sensitive_data: encryptFor(publicKey, sensitiveDataConstant),
  };
}

/** The public key the calling API key registered, which responses cipher secrets under (5101 without one). */
export async function registeredPublicKey(db: Db, caller: Caller): Promise<string> {
  const row = await db
    .selectFrom("api_keys")
    .select("public_key_pem")
    .where("id", "=", caller.apiKeyId)
    .executeTakeFirstOrThrow();
  return orNotRegistered(row.public_key_pem);
}

function orNotRegistered(pem: string | null): string {
  if (!pem) throw new AppError(errors.publicKeyNotRegistered);
  return pem;
}
