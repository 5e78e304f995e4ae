import { newId } from "../keys/key-format.ts";
import type { AuditEntry } from "../store/audit.repo.ts";
import type { Store, StoreTransaction } from "../store/store.ts";
import { isOperatorRole, type OperatorRole, type User } from "../store/users.repo.ts";
import type { OidcIdentity } from "./oidc.ts";

/**
 * What an operator's sign-in through the provider comes to: the user to sign in (their other sessions end when
 * their role changed), or a refusal in words for them (`endSessionsOf`: a user who lost their role, whose sessions
 * end now).
 */
export type OperatorSignIn =
  | { kind: "signed-in"; user: User; roleChanged: boolean }
  | { kind: "refused"; reason: string; message: string; endSessionsOf: string | null };

interface Decision {
  /** The active user this identity is, or null for a first sign-in. */
  user: User | null;
  /** The user was found by email and is linked to this identity now. */
  link: boolean;
}

const refused = (reason: string, message: string, endSessionsOf: string | null = null): OperatorSignIn => ({ kind: "refused", reason: `oidc: ${reason}`, message, endSessionsOf });

function entry(at: string, user: User | null, action: string, source: string, detail: Record<string, unknown>): AuditEntry {
  const actor = user ? { actor: "operator" as const, actorId: user.id, actorEmail: user.email } : { actor: "anonymous" as const, actorId: null, actorEmail: null };
  return { id: newId("aud"), at, ...actor, onBehalfOf: null, action, accountId: null, keyId: null, source, detail: { via: "oidc", ...detail } };
}

/**
 * Issue 42.11: who the identity is. An operator is linked to the provider's `iss` + `sub` at their first sign-in
 * and found by it afterwards, whatever their email becomes. A `sub` not linked yet matches a user by email only when
 * the provider says the email is verified, and never a user linked to another `sub` (refused, with its own audit
 * entry: someone else is using that address at the provider).
 */
async function identify(store: Store, identity: OidcIdentity, source: string): Promise<Decision | OperatorSignIn> {
  const linked = await store.users.byOidcSubject({ issuer: identity.issuer, subject: identity.subject });
  if (linked && !linked.disabledAt) return { user: linked, link: false };
  const holder = await store.users.byEmail(identity.email);
  if (!holder || holder.disabledAt) return { user: null, link: false };
  if (!isOperatorRole(holder.role)) return refused("the email belongs to an account member", "This email belongs to an account member, who signs in with a password.");
  if (holder.oidc) {
    await store.transaction((tx) =>
      tx.audit.append(entry(new Date().toISOString(), null, "auth.oidc_conflict", source, { email: identity.email, userId: holder.id, issuer: identity.issuer, subject: identity.subject })),
    );
    return refused(
      "the email belongs to an operator linked to another identity",
      "This email belongs to an operator who signs in with another identity at the provider. Sign in with that identity, or ask an operator-admin to remove the old user first.",
    );
  }
  if (!identity.emailVerified) {
    return refused("the email is not verified, so it cannot match an existing operator", "The identity provider does not say this email address is verified, so it cannot be matched to an existing operator.");
  }
  return { user: holder, link: true };
}

/**
 * Issue 42.10: the role. A locally invited operator keeps the role stored here (operator-admins change it). For
 * everyone else, when the role claim or the email lists are configured they decide at every sign-in; without them
 * the stored role stays (there is nothing else to decide it).
 */
function roleOf(user: User | null, identity: OidcIdentity, decidesRoles: boolean): OperatorRole | null {
  if (user && (user.provisionedBy === "invite" || !decidesRoles)) return user.role as OperatorRole;
  return identity.role;
}

/**
 * An operator's sign-in through the provider, after its answer was verified (auth/oidc.ts): who they are, their
 * role, and the changes to record (made at their first sign-in, linked, role or email changed; removed when the
 * provider no longer gives them a role), each audited in the same transaction.
 */
export async function operatorSignIn(store: Store, identity: OidcIdentity, decidesRoles: boolean, source: string): Promise<OperatorSignIn> {
  const decision = await identify(store, identity, source);
  if ("kind" in decision) return decision;
  const { user, link } = decision;
  const role = roleOf(user, identity, decidesRoles);
  const at = new Date().toISOString();
  if (!role) {
    if (!user) return refused("no operator role for this email", "This email has no operator role on this server.");
    await store.transaction(async (tx) => {
      await tx.users.disable(user.id, at);
      await tx.audit.append(entry(at, user, "operator.remove", source, { userId: user.id, email: user.email, role: user.role, reason: "the identity provider no longer gives an operator role" }));
    });
    return refused("the identity provider no longer gives an operator role", "This email has no operator role on this server any more.", user.id);
  }
  return store.transaction(async (tx) => {
    if (!user) return { kind: "signed-in", user: await join(tx, identity, role, at, source), roleChanged: false };
    if (link) {
      await tx.users.linkOidc(user.id, { issuer: identity.issuer, subject: identity.subject });
      await tx.audit.append(entry(at, user, "operator.oidc_link", source, { userId: user.id, issuer: identity.issuer, subject: identity.subject }));
    }
    const current = await followEmail(tx, user, identity, at, source);
    if (current.role === role) return { kind: "signed-in", user: current, roleChanged: false };
    await tx.users.setRole(user.id, role);
    await tx.audit.append(entry(at, current, "operator.role", source, { userId: user.id, email: current.email, from: user.role, to: role }));
    return { kind: "signed-in", user: { ...current, role }, roleChanged: true };
  });
}

/** A first sign-in: a new operator, linked to the identity, their role from the provider. */
async function join(tx: StoreTransaction, identity: OidcIdentity, role: OperatorRole, at: string, source: string): Promise<User> {
  const retired = await tx.users.byEmail(identity.email);
  if (retired) await tx.users.retireEmail(retired.id);
  const user = await tx.users.insert({
    id: newId("usr"),
    email: identity.email,
    accountId: null,
    role,
    passwordHash: null,
    createdAt: at,
    provisionedBy: "oidc",
    oidc: { issuer: identity.issuer, subject: identity.subject },
  });
  await tx.audit.append(entry(at, user, "operator.join", source, { role }));
  return user;
}

/**
 * A linked operator whose verified email changed at the provider gets it here too (their pending reset links are
 * withdrawn: users.repo.ts), unless another active user has it; an unverified one is not taken.
 */
async function followEmail(tx: StoreTransaction, user: User, identity: OidcIdentity, at: string, source: string): Promise<User> {
  if (user.email === identity.email || !identity.emailVerified) return user;
  const holder = await tx.users.byEmail(identity.email);
  if (holder && !holder.disabledAt) return user;
  if (holder) await tx.users.retireEmail(holder.id);
  await tx.users.setEmail(user.id, identity.email, at);
  await tx.audit.append(entry(at, user, "operator.email", source, { userId: user.id, from: user.email, to: identity.email }));
  return { ...user, email: identity.email };
}
