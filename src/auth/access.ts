import type { FastifyRequest } from "fastify";
import { AppError } from "../errors/app-error.ts";
import type { MemberRole } from "../store/users.repo.ts";
import type { Principal } from "./principal.ts";

/**
 * What an admin route lets members do, declared in its `config.access`:
 * - absent: operators only (every route is closed to members unless it says otherwise, so a new route is too);
 * - `read`: any member of the account (viewer and up) may call it, for their own account only;
 * - `keys`: developers and owners; `members`: owners only.
 * Operators: operator-admin and the admin token may call every route; operator-viewer only reads (GET).
 */
export type MemberAccess = "read" | "keys" | "members";

const rank: Record<MemberRole, number> = { viewer: 0, developer: 1, owner: 2 };
const needs: Record<MemberAccess, MemberRole> = { read: "viewer", keys: "developer", members: "owner" };
const readMethods = new Set(["GET", "HEAD"]);

/** Refuses (403 permission_denied) a call the principal's role does not allow; the account is checked by the route. */
export function checkAccess(principal: Principal, method: string, access: MemberAccess | undefined): void {
  if (principal.kind === "admin-token") return;
  if (principal.kind === "operator") {
    if (principal.role === "operator-admin" || readMethods.has(method)) return;
    throw new AppError("permission_denied", { message: "An operator-viewer reads only." });
  }
  if (access === undefined) throw new AppError("permission_denied", { message: "Only operators may call this." });
  if (rank[principal.role] < rank[needs[access]]) {
    throw new AppError("permission_denied", { message: `This needs the ${needs[access]} role or higher; yours is ${principal.role}.` });
  }
}

/** The principal of an authenticated admin request (the admin scope always sets one before a handler runs). */
export function principal(request: FastifyRequest): Principal {
  if (!request.principal) throw new AppError("invalid_api_key", { message: "Not signed in." });
  return request.principal;
}

/** The account a member is confined to, or null for operators and the admin token (every account). */
export function ownAccount(request: FastifyRequest): string | null {
  const p = principal(request);
  return p.kind === "member" ? p.accountId : null;
}

/**
 * Whether the caller may see this account's data: operators every account, a member only their own. A route that
 * gets false answers exactly as for an id that does not exist, so nothing tells whether another account's id is real.
 */
export function reaches(request: FastifyRequest, accountId: string | null | undefined): boolean {
  const own = ownAccount(request);
  return own === null || accountId === own;
}
