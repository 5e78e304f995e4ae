import { createHash, randomBytes } from "node:crypto";
import { LifecycleError, type AuditContext } from "../keys/lifecycle.ts";
import { newId } from "../keys/key-format.ts";
import type { AuditEntry } from "../store/audit.repo.ts";
import type { Invite, InvitePurpose } from "../store/invites.repo.ts";
import type { Store, StoreTransaction } from "../store/store.ts";
import { isOperatorRole, memberRoles, normalizeEmail, operatorRoles, type User, type UserRole } from "../store/users.repo.ts";
import { hashPassword, passwordProblem } from "./password.ts";

/** An invite or reset link is valid this long, and once. */
export const inviteTtlMs = 72 * 60 * 60 * 1000;

const emailPattern = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The one-time token is shown once; the store keeps its SHA-256 (it is random: nothing to guess from a list). */
export const inviteTokenHash = (token: string) => createHash("sha256").update(token).digest("hex");

export interface CreatedInvite {
  id: string;
  email: string;
  role: UserRole;
  accountId: string | null;
  purpose: InvitePurpose;
  expiresAt: string;
  /** Shown in this answer only. */
  token: string;
  /** The console page that takes the token (its fragment never reaches a server log). */
  path: string;
}

const now = () => new Date().toISOString();

function auditEntry(by: AuditContext, action: string, accountId: string | null, detail: Record<string, unknown>): AuditEntry {
  return { id: newId("aud"), at: now(), actor: by.actor, actorId: by.actorId ?? null, actorEmail: by.actorEmail ?? null, onBehalfOf: null, action, accountId, keyId: null, source: by.source ?? null, detail };
}

/** The audit context of a user acting for themselves (accepting an invite, turning on TOTP). */
export function selfActor(user: User, source: string | null): AuditContext {
  return { actor: isOperatorRole(user.role) ? "operator" : "member", actorId: user.id, actorEmail: user.email, source };
}

function checkRole(role: string, accountId: string | null): UserRole {
  const allowed: string[] = accountId === null ? operatorRoles : memberRoles;
  if (!allowed.includes(role)) throw new LifecycleError("invalid_parameter", "role", `role must be one of ${allowed.join(", ")}`);
  return role as UserRole;
}

/**
 * A one-time link for `email` to join `accountId` as `role` (or to become an operator, `accountId` null), valid
 * 72 h. An email that already has a user is refused: one user per email. Audited as member.invite or operator.invite.
 */
export async function inviteUser(store: Store, input: { email: string; role: string; accountId: string | null }, by: AuditContext): Promise<CreatedInvite> {
  const email = normalizeEmail(input.email);
  if (!emailPattern.test(email) || email.length > 320) throw new LifecycleError("invalid_parameter", "email", `invalid email "${input.email}"`);
  const role = checkRole(input.role, input.accountId);
  const existing = await store.users.byEmail(email);
  if (existing && !existing.disabledAt) throw new LifecycleError("invalid_parameter", "email", `${email} already has a console user`);
  return issueLink(store, { email, role, accountId: input.accountId, purpose: "invite" }, by);
}

/**
 * A one-time password-reset link for an existing user, with the same rules as an invite (72 h, once, hashed). It is
 * bound to the user's id and email: it opens that user only, and is withdrawn when they are removed or their email
 * changes. `clearTotp` (the caller checks it is an operator's decision) makes accepting it turn the user's TOTP off;
 * otherwise a user with TOTP on must give a code to accept it.
 */
export async function passwordResetLink(store: Store, user: User, by: AuditContext, options: { clearTotp?: boolean } = {}): Promise<CreatedInvite> {
  if (user.disabledAt) throw new LifecycleError("not_found", "id", `no user "${user.id}"`);
  return issueLink(store, { email: user.email, role: user.role, accountId: user.accountId, purpose: "reset", userId: user.id, clearsTotp: options.clearTotp === true }, by);
}

async function issueLink(store: Store, fields: Pick<Invite, "email" | "role" | "accountId" | "purpose"> & Partial<Pick<Invite, "userId" | "clearsTotp">>, by: AuditContext): Promise<CreatedInvite> {
  const token = randomBytes(32).toString("base64url");
  const created = Date.now();
  const invite: Invite = {
    id: newId("inv"),
    ...fields,
    createdById: by.actorId ?? null,
    createdByEmail: by.actorEmail ?? null,
    createdAt: new Date(created).toISOString(),
    expiresAt: new Date(created + inviteTtlMs).toISOString(),
    usedAt: null,
    userId: fields.userId ?? null,
    clearsTotp: fields.clearsTotp ?? false,
  };
  const action = fields.purpose === "reset" ? "user.password_reset_link" : fields.accountId === null ? "operator.invite" : "member.invite";
  await store.transaction(async (tx) => {
    await tx.invites.insert(invite, inviteTokenHash(token));
    const resetOf = invite.userId === null ? {} : { userId: invite.userId, clearsTotp: invite.clearsTotp };
    await tx.audit.append(auditEntry(by, action, fields.accountId, { inviteId: invite.id, email: invite.email, role: invite.role, expiresAt: invite.expiresAt, ...resetOf }));
  });
  const page = fields.purpose === "reset" ? "reset" : "invite";
  return { id: invite.id, email: invite.email, role: invite.role, accountId: invite.accountId, purpose: invite.purpose, expiresAt: invite.expiresAt, token, path: `/console#/${page}/${token}` };
}

/** Withdraws an unused invite or reset link (it is then refused like a used one), audited as link.withdraw. */
export async function withdrawLink(store: Store, invite: Invite, by: AuditContext): Promise<void> {
  await store.transaction(async (tx) => {
    const at = now();
    if (!(await tx.invites.revoke(invite.id, at))) throw new LifecycleError("not_found", "id", `no open invite "${invite.id}"`);
    await tx.audit.append(auditEntry(by, "link.withdraw", invite.accountId, { inviteId: invite.id, purpose: invite.purpose, email: invite.email, ...(invite.userId ? { userId: invite.userId } : {}) }));
  });
}

/** The invite a token opens, while it is unused and unexpired; null otherwise (the caller answers one 404 for all). */
export async function usableInvite(store: Store, token: string): Promise<Invite | null> {
  if (token.length > 128) return null;
  const invite = await store.invites.byTokenHash(inviteTokenHash(token));
  if (!invite || invite.usedAt !== null || Date.parse(invite.expiresAt) <= Date.now()) return null;
  return invite;
}

/**
 * The user a reset link opens: the one it was made for, while they are active and still have the email it was sent
 * to, in the same account; null otherwise (the link is as dead as a used one).
 */
export async function resetTarget(store: Store | StoreTransaction, invite: Invite): Promise<User | null> {
  if (invite.purpose !== "reset" || invite.userId === null) return null;
  const user = await store.users.get(invite.userId);
  if (!user || user.disabledAt || user.email !== invite.email || user.accountId !== invite.accountId) return null;
  return user;
}

/**
 * A reset for a user with TOTP on asks for their second factor (issue 42.9): the check throws when the code is
 * missing or wrong, and answers how it was given ("totp", "recovery-code").
 */
export type SecondFactorCheck = (user: User) => Promise<string>;

/** The user a link signed in, and how (`auth.login`'s method): `invite`, `password-reset`, `password-reset+totp`… */
export interface AcceptedLink {
  user: User;
  method: string;
}

/**
 * Uses the link: the password is checked, then a reset's second factor when its user has TOTP on (unless an
 * operator's reset clears it), then in one transaction the invite is marked used (only one caller can, however many
 * race), the user is created (invite) or given the new password (reset; TOTP turned off if the link says so), and the
 * entries are audited with the user as their actor. Returns null for a used, expired, withdrawn or unknown token.
 */
export async function acceptInvite(store: Store, token: string, password: string, source: string | null, secondFactor: SecondFactorCheck): Promise<AcceptedLink | null> {
  const invite = await usableInvite(store, token);
  if (!invite) return null;
  const problem = passwordProblem(password, invite.email);
  if (problem) throw new LifecycleError("invalid_parameter", "password", problem);
  let method = "invite";
  if (invite.purpose === "reset") {
    const target = await resetTarget(store, invite);
    if (!target) return null;
    method = "password-reset";
    if (target.totpEnabled && !invite.clearsTotp) method += `+${await secondFactor(target)}`;
  }
  const hash = await hashPassword(password);
  return store.transaction(async (tx) => {
    const at = now();
    if (!(await tx.invites.use(invite.id, at))) return null;
    const user = invite.purpose === "reset" ? await resetPassword(tx, invite, hash) : await joinWith(tx, invite, hash, at);
    if (!user) return null;
    const action = invite.purpose === "reset" ? "user.password_reset" : invite.accountId === null ? "operator.join" : "member.join";
    const by = selfActor(user, source);
    await tx.audit.append(auditEntry(by, action, invite.accountId, { inviteId: invite.id, role: user.role, invitedBy: invite.createdByEmail }));
    if (invite.clearsTotp && user.totpEnabled) {
      await tx.users.disableTotp(user.id);
      await tx.audit.append(auditEntry(by, "user.totp.clear", invite.accountId, { inviteId: invite.id, clearedBy: invite.createdByEmail }));
      return { user: { ...user, totpEnabled: false }, method: `${method}+totp-cleared` };
    }
    return { user, method };
  });
}

async function joinWith(tx: StoreTransaction, invite: Invite, hash: string, at: string): Promise<User | null> {
  const existing = await tx.users.byEmail(invite.email);
  // A removed user invited again comes back as a new user (their old entries keep the old id).
  if (existing && !existing.disabledAt) return null;
  if (existing) await tx.users.retireEmail(existing.id);
  return tx.users.insert({ id: newId("usr"), email: invite.email, accountId: invite.accountId, role: invite.role, passwordHash: hash, createdAt: at });
}

async function resetPassword(tx: StoreTransaction, invite: Invite, hash: string): Promise<User | null> {
  const user = await resetTarget(tx, invite);
  if (!user) return null;
  await tx.users.setPassword(user.id, hash);
  return user;
}
