import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { AppConfig } from "../config/app-config.ts";

/** The file the secret is kept in when no keySecret is configured (SQLite only). */
export function keySecretFile(config: AppConfig): string {
  return path.join(config.dataDir, "secret");
}

/** The configured keySecret, else `<dataDir>/secret`; null when neither exists. */
export function readKeySecret(config: AppConfig): Buffer | null {
  if (config.keySecret) return Buffer.from(config.keySecret, "utf8");
  try {
    return Buffer.from(readFileSync(keySecretFile(config), "utf8").trim(), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    return null;
  }
}

/**
 * Creates `<dataDir>/secret` (0600) with 32 random bytes. Only for a store that holds no keys yet: the caller checks.
 * Written whole to a temp file, then linked into place: a concurrent reader never sees a partial secret, and when
 * another process wins the race we use theirs.
 */
export function createKeySecretFile(config: AppConfig): Buffer {
  const file = keySecretFile(config);
  mkdirSync(config.dataDir, { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
  writeFileSync(tmp, `${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    unlinkSync(tmp);
  }
  return Buffer.from(readFileSync(file, "utf8").trim(), "utf8");
}

/** What the store keeps instead of the key: HMAC-SHA-256 under the server secret, hex. */
export function hashKey(secret: Buffer, key: string): string {
  return createHmac("sha256", secret).update(key).digest("hex");
}

/**
 * The value the database keeps to recognise the secret its keys are hashed with: an HMAC of a fixed label, which
 * tells nothing of the secret that a stored key hash does not already.
 */
export function keySecretCheck(secret: Buffer): string {
  return createHmac("sha256", secret).update("modelgate key-secret check v1").digest("hex");
}

export function matchesKeySecretCheck(secret: Buffer, stored: string): boolean {
  const expected = Buffer.from(keySecretCheck(secret), "hex");
  const actual = Buffer.from(stored, "hex");
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
