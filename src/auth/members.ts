import { LifecycleError, type AuditContext } from "../keys/lifecycle.ts";
import { newId } from "../keys/key-format.ts";
import type { Store } from "../store/store.ts";
import { memberRoles, operatorRoles, type User, type UserRole } from "../store/users.repo.ts";

/** What the admin API shows of a user: never a hash or a secret. */
export interface UserView {
  id: string;
  email: string;
  accountId: string | null;
  role: UserRole;
  totpEnabled: boolean;
  createdAt: string;
}

export const userView = (u: User): UserView => ({ id: u.id, email: u.email, accountId: u.accountId, role: u.role, totpEnabled: u.totpEnabled, createdAt: u.createdAt });

/** An active user by id, or the not-found error (the same for an unknown id and another account's user). */
export async function findUser(store: Store, id: string): Promise<User> {
  const user = await store.users.get(id);
  if (!user || user.disabledAt) throw new LifecycleError("not_found", "id", `no user "${id}"`);
  return user;
}

/** The account's active owners other than `except`: an account never loses its last owner. */
async function otherOwners(store: Store, accountId: string, except: string): Promise<number> {
  return (await store.users.list(accountId)).filter((u) => u.role === "owner" && !u.disabledAt && u.id !== except).length;
}

async function otherAdmins(store: Store, except: string): Promise<number> {
  return (await store.users.list(null)).filter((u) => u.role === "operator-admin" && !u.disabledAt && u.id !== except).length;
}

const now = () => new Date().toISOString();

function entry(by: AuditContext, action: string, user: User, detail: Record<string, unknown>) {
  return { id: newId("aud"), at: now(), actor: by.actor, actorId: by.actorId ?? null, actorEmail: by.actorEmail ?? null, onBehalfOf: null, action, accountId: user.accountId, keyId: null, source: by.source ?? null, detail: { userId: user.id, email: user.email, ...detail } };
}

/** Changes a member's (or operator's) role within its kind; the last owner (or operator-admin) keeps theirs. */
export async function changeRole(store: Store, user: User, role: string, by: AuditContext): Promise<User> {
  const allowed: string[] = user.accountId === null ? operatorRoles : memberRoles;
  if (!allowed.includes(role)) throw new LifecycleError("invalid_parameter", "role", `role must be one of ${allowed.join(", ")}`);
  if (role === user.role) return user;
  await assertNotLast(store, user);
  await store.transaction(async (tx) => {
    await tx.users.setRole(user.id, role as UserRole);
    await tx.audit.append(entry(by, user.accountId === null ? "operator.role" : "member.role", user, { from: user.role, to: role }));
  });
  return { ...user, role: role as UserRole };
}

/** Removes a user: they can no longer sign in (the caller ends their sessions); their audit entries stay. */
export async function removeUser(store: Store, user: User, by: AuditContext): Promise<void> {
  await assertNotLast(store, user);
  await store.transaction(async (tx) => {
    await tx.users.disable(user.id, now());
    await tx.audit.append(entry(by, user.accountId === null ? "operator.remove" : "member.remove", user, { role: user.role }));
  });
}

async function assertNotLast(store: Store, user: User): Promise<void> {
  if (user.role === "owner" && (await otherOwners(store, user.accountId!, user.id)) === 0) {
    throw new LifecycleError("invalid_parameter", "role", "an account keeps at least one owner: make another member owner first");
  }
  if (user.role === "operator-admin" && (await otherAdmins(store, user.id)) === 0) {
    throw new LifecycleError("invalid_parameter", "role", "at least one operator-admin stays: make another operator admin first");
  }
}
