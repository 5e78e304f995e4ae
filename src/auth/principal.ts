import type { AuditActor } from "../store/audit.repo.ts";
import { isOperatorRole, type MemberRole, type OperatorRole, type User } from "../store/users.repo.ts";

/**
 * Who makes an admin API call: the admin token (automation and bootstrapping), an operator signed in to the console,
 * or a member of one account. Set by the admin scope's authentication; routes read it through `access.ts`.
 */
export type Principal =
  | { kind: "admin-token" }
  | { kind: "operator"; user: User; role: OperatorRole }
  | { kind: "member"; user: User; role: MemberRole; accountId: string };

export function principalOf(user: User): Principal {
  if (isOperatorRole(user.role)) return { kind: "operator", user, role: user.role };
  return { kind: "member", user, role: user.role, accountId: user.accountId! };
}

/** The audit log's actor for a principal: the user by kind, id and email; the admin token by kind only. */
export function actorOf(principal: Principal): { actor: AuditActor; actorId: string | null; actorEmail: string | null } {
  if (principal.kind === "admin-token") return { actor: "admin-token", actorId: null, actorEmail: null };
  return { actor: principal.kind, actorId: principal.user.id, actorEmail: principal.user.email };
}

// The console user model and the audit log's actor kinds, for the layers above the store (features reach the store
// only through auth/ and keys/).
export { auditActors, type AuditActor } from "../store/audit.repo.ts";
export { isOperatorRole, memberRoles, normalizeEmail, operatorRoles, type MemberRole, type OperatorRole, type User, type UserRole } from "../store/users.repo.ts";
