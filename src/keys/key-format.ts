import { createHash, randomBytes } from "node:crypto";

/**
 * API key format: `mg_` + 43 base62 characters (32 random bytes) + 6 base62 characters of checksum
 * (the first 4 bytes of SHA-256 over the body). The checksum lets a malformed or mistyped key be
 * refused without a database read.
 */
export const keyPrefix = "mg_";
const bodyLength = 43;
const checksumLength = 6;
export const keyLength = keyPrefix.length + bodyLength + checksumLength;
const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const keyPattern = new RegExp(`^${keyPrefix}[0-9A-Za-z]{${bodyLength + checksumLength}}$`);

/** Big-endian bytes -> base62, left-padded with "0" to `width`. */
export function base62(bytes: Buffer, width: number): string {
  let n = BigInt(`0x${bytes.toString("hex") || "0"}`);
  let out = "";
  while (n > 0n) {
    out = alphabet[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out.padStart(width, "0");
}

/** The first 4 bytes of SHA-256(body) as 6 base62 digits (same digits as base62() on those bytes, without BigInt). */
function checksum(body: string): string {
  let n = createHash("sha256").update(body).digest().readUInt32BE(0);
  let out = "";
  while (n > 0) {
    out = alphabet[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out.padStart(checksumLength, "0");
}

/** A fresh key value; shown once, never stored. */
export function generateKey(): string {
  const body = base62(randomBytes(32), bodyLength);
  return `${keyPrefix}${body}${checksum(body)}`;
}

/** Format and checksum check, no I/O. */
export function isWellFormedKey(key: string): boolean {
  if (key.length !== keyLength || !keyPattern.test(key)) return false;
  const body = key.slice(keyPrefix.length, keyPrefix.length + bodyLength);
  return checksum(body) === key.slice(keyPrefix.length + bodyLength);
}

/** The display prefix kept in the store and shown in listings and logs: `mg_` + 8 characters. */
export function displayPrefix(key: string): string {
  return key.slice(0, keyPrefix.length + 8);
}

/** Random ids for accounts and keys: `acct_…`, `key_…`. */
export function newId(kind: "acct" | "key" | "aud" | "usr" | "inv"): string {
  return `${kind}_${base62(randomBytes(12), 17)}`;
}
