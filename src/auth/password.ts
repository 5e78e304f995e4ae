import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { dictionary } from "@zxcvbn-ts/language-common";

/**
 * Console passwords: scrypt from node:crypto (no library does it better: the parameters travel in the stored
 * string, so they can be raised later without breaking old hashes). OWASP's scrypt choice with 32 MiB per hash:
 * N=2^15, r=8, p=3. A hash is `scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>`.
 */
const params = { N: 2 ** 15, r: 8, p: 3 };
const keyLength = 32;

export const minPasswordLength = 12;
/** Bounds the work one attempt can cost (scrypt reads the whole password). */
export const maxPasswordLength = 1024;

function derive(password: string, salt: Buffer, p: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { N: p.N, r: p.r, p: p.p, maxmem: 256 * p.N * p.r };
  return new Promise((resolve, reject) => scrypt(password.normalize("NFKC"), salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, params);
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

/** A hash of nothing anyone can type: verified against when the email is unknown, so both answers take as long. */
const unknownUserHash = `scrypt$${params.N}$${params.r}$${params.p}$${randomBytes(16).toString("base64")}$${randomBytes(keyLength).toString("base64")}`;

/** Whether `password` matches `stored`; with `stored` null (no such user) it does the same work and answers false. */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = (stored ?? unknownUserHash).split("$");
  if (scheme !== "scrypt" || !salt || !hash || password.length > maxPasswordLength) return false;
  const expected = Buffer.from(hash, "base64");
  const derived = await derive(password, Buffer.from(salt, "base64"), { N: Number(n), r: Number(r), p: Number(p) });
  return stored !== null && derived.length === expected.length && timingSafeEqual(derived, expected);
}

/** zxcvbn-ts's list of the most common passwords (about 50,000, from public breach corpora), lower-cased. */
let common: Set<string> | null = null;
function commonPasswords(): Set<string> {
  common ??= new Set((dictionary["passwords-common"] as string[]).map((p) => p.toLowerCase()));
  return common;
}

/**
 * Why a new password is refused, or null when it is acceptable: at least 12 characters, not one of the common
 * passwords (nor one padded with digits or symbols: "password1234!"), not a single repeated character, not the email.
 */
export function passwordProblem(password: string, email: string): string | null {
  if ([...password].length < minPasswordLength) return `A password has at least ${minPasswordLength} characters.`;
  if (password.length > maxPasswordLength) return `A password has at most ${maxPasswordLength} characters.`;
  const lower = password.toLowerCase();
  const core = lower.replace(/^[^a-z]+|[^a-z]+$/g, "");
  const list = commonPasswords();
  if (list.has(lower) || (core.length >= 4 && list.has(core))) return "This password is in a list of common passwords; choose another.";
  if (new Set(lower).size <= 2) return "This password repeats one or two characters; choose another.";
  const local = email.toLowerCase().split("@")[0] ?? "";
  if (local.length >= 4 && core.includes(local)) return "A password must not contain the email address.";
  return null;
}
