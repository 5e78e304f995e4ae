import { AppError } from "../errors/app-error.ts";
import { newId } from "../keys/key-format.ts";
import type { Store } from "../store/store.ts";
import type { User } from "../store/users.repo.ts";
import { selfActor } from "./console-users.ts";
import { newRecoveryCodes, newTotpSecret, recoveryCodeHash, totpStep, totpUri } from "./totp.ts";

function audit(store: Store, user: User, action: string, source: string | null) {
  const by = selfActor(user, source);
  return { id: newId("aud"), at: new Date().toISOString(), actor: by.actor, actorId: by.actorId ?? null, actorEmail: by.actorEmail ?? null, onBehalfOf: null, action, accountId: user.accountId, keyId: null, source, detail: null };
}

/** Step 1 of turning TOTP on: a new secret, kept pending until a code from it is entered. */
export async function startTotp(store: Store, user: User, issuer: string): Promise<{ secret: string; uri: string }> {
  if (user.totpEnabled) throw new AppError("invalid_parameter", { param: "code", message: "TOTP is already on; turn it off first to change the authenticator." });
  const secret = newTotpSecret();
  await store.users.setPendingTotp(user.id, secret);
  return { secret, uri: totpUri(secret, user.email, issuer) };
}

/** Step 2: a code from the pending secret turns TOTP on and returns the recovery codes, shown this once. */
export async function enableTotp(store: Store, user: User, code: string, source: string | null): Promise<string[]> {
  const { secret, enabled } = await store.users.totp(user.id);
  if (enabled || !secret) throw new AppError("invalid_parameter", { param: "code", message: "Start the TOTP setup first." });
  const step = totpStep(secret, code);
  if (step === null) throw new AppError("invalid_parameter", { param: "code", message: "That code is not the authenticator's current one; check the device's clock and try again." });
  const codes = newRecoveryCodes();
  await store.transaction(async (tx) => {
    await tx.users.enableTotp(user.id, new Date().toISOString(), step, codes.map(recoveryCodeHash));
    await tx.audit.append(audit(store, user, "user.totp.enable", source));
  });
  return codes;
}

export async function disableTotp(store: Store, user: User, source: string | null): Promise<void> {
  await store.transaction(async (tx) => {
    await tx.users.disableTotp(user.id);
    await tx.audit.append(audit(store, user, "user.totp.disable", source));
  });
}

/**
 * The second factor at sign-in: a TOTP code (each time step once: a code seen by someone looking over a shoulder is
 * already spent) or a recovery code (each once).
 */
export async function checkSecondFactor(store: Store, user: User, code: string): Promise<"totp" | "recovery" | null> {
  const { secret, enabled } = await store.users.totp(user.id);
  if (!enabled || !secret) return null;
  const step = totpStep(secret, code);
  if (step !== null) return (await store.users.useTotpStep(user.id, step)) ? "totp" : null;
  if (code.length > 32) return null;
  return (await store.users.useRecoveryCode(user.id, recoveryCodeHash(code), new Date().toISOString())) ? "recovery" : null;
}
