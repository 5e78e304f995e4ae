import type { Kysely } from "kysely";
import type { AppConfig } from "../config/app-config.ts";
import { createKeySecretFile, keySecretCheck, keySecretFile, matchesKeySecretCheck, readKeySecret } from "./key-secret.ts";
import type { Database } from "./schema.ts";
import { StoreMetaRepo } from "./store-meta.repo.ts";
import { StoreStartError } from "./store-start-error.ts";

const checkName = "key_secret_check";

/**
 * The key secret, checked against the database: its check value is stored on first use, and a secret that does not
 * match it (a lost or replaced secret file, another MODELGATE_KEY_SECRET) refuses to start instead of turning every
 * key into a silent 401. A missing secret file is created only for a store that holds no keys and no check value.
 */
export async function loadCheckedKeySecret(config: AppConfig, db: Kysely<Database>, dialect: "sqlite" | "postgres"): Promise<Buffer> {
  if (dialect === "postgres" && !config.keySecret) {
    throw new StoreStartError(
      "with PostgreSQL, set keySecret (or MODELGATE_KEY_SECRET) to the same value on every replica and for the CLI: keys are hashed with it, " +
        "and a secret generated per node in <dataDir>/secret would make keys fail on the other nodes (generate one with: openssl rand -hex 32)",
    );
  }
  const meta = new StoreMetaRepo(db);
  const stored = await meta.get(checkName);
  const source = config.keySecret ? "keySecret (MODELGATE_KEY_SECRET)" : keySecretFile(config);
  let secret = readKeySecret(config);
  if (!secret) {
    const holdsKeys = (await db.selectFrom("api_keys").select("id").limit(1).executeTakeFirst()) !== undefined;
    if (stored !== null || holdsKeys) {
      throw new StoreStartError(
        `${source} is missing, but this database holds API keys hashed with a secret. Restore the file from a backup, or set MODELGATE_KEY_SECRET ` +
          "(keySecret) to the original secret. A new secret would make every existing key fail: keys hashed under another secret cannot be verified.",
      );
    }
    secret = createKeySecretFile(config);
  }
  const check = stored ?? (await meta.setOnce(checkName, keySecretCheck(secret)));
  if (!matchesKeySecretCheck(secret, check)) {
    throw new StoreStartError(
      `the key secret from ${source} is not the one this database's API keys are hashed with. Restore the original secret ` +
        "(set keySecret / MODELGATE_KEY_SECRET, or put the original <dataDir>/secret back). Keys hashed under another secret cannot be verified: " +
        "if the original is lost for good, every key has to be issued again (docs/security.md: API keys).",
    );
  }
  return secret;
}
