import { createHash, randomBytes } from "node:crypto";
import { Secret, TOTP } from "otpauth";

/**
 * TOTP (RFC 6238) through otpauth: SHA-1, 6 digits, 30 s, the parameters every authenticator app supports. A code
 * is accepted for the step before and after the current one (clock drift), and each step only once (users.repo.ts
 * keeps the last step used).
 */
function totpFor(secret: string, label = "", issuer = "Modelgate"): TOTP {
  return new TOTP({ issuer, label, algorithm: "SHA1", digits: 6, period: 30, secret: Secret.fromBase32(secret) });
}

export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

/** The otpauth:// URI an authenticator app reads (from a QR code or typed). */
export function totpUri(secret: string, email: string, issuer: string): string {
  return totpFor(secret, email, issuer).toString();
}

/** The time step a code belongs to (within one step of now), or null when the code is wrong. */
export function totpStep(secret: string, code: string, now = Date.now()): number | null {
  const token = code.replace(/\s+/g, "");
  if (!/^\d{6}$/.test(token)) return null;
  const delta = totpFor(secret).validate({ token, timestamp: now, window: 1 });
  return delta === null ? null : Math.floor(now / 30_000) + delta;
}

/** The current code (tests, and the setup check). */
export function totpCode(secret: string, now = Date.now()): string {
  return totpFor(secret).generate({ timestamp: now });
}

const recoveryAlphabet = "abcdefghjkmnpqrstuvwxyz23456789";

/** Ten codes of 10 characters from a 31-letter alphabet (about 50 bits each): shown once, stored as hashes. */
export function newRecoveryCodes(count = 10): string[] {
  return Array.from({ length: count }, () => {
    const bytes = randomBytes(10);
    const chars = [...bytes].map((b) => recoveryAlphabet[b % recoveryAlphabet.length]).join("");
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/** Recovery codes are random, not chosen: a fast hash is enough (nothing to brute-force from a dictionary). */
export function recoveryCodeHash(code: string): string {
  return createHash("sha256").update(code.trim().toLowerCase().replace(/[^a-z0-9]/g, "")).digest("hex");
}
