import { createHmac, randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { AppConfig } from "../config/app-config.ts";

/**
 * The HMAC secret for key hashes: config `keySecret`, or `<dataDir>/secret` (created 0600 on first use).
 * Replicas sharing a PostgreSQL database must share the secret (same keySecret or the same secret file).
 */
export function loadKeySecret(config: AppConfig): Buffer {
  if (config.keySecret) return Buffer.from(config.keySecret, "utf8");
  const file = path.join(config.dataDir, "secret");
  try {
    return Buffer.from(readFileSync(file, "utf8").trim(), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  mkdirSync(config.dataDir, { recursive: true });
  // Written whole to a temp file, then linked into place: a concurrent reader never sees a partial secret,
  // and when another process wins the race we use theirs.
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
