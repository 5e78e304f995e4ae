import type { Kysely, Selectable } from "kysely";
import type { Database } from "./schema.ts";

export type MemberRole = "owner" | "developer" | "viewer";
export type OperatorRole = "operator-admin" | "operator-viewer";
export type UserRole = MemberRole | OperatorRole;

export const memberRoles: MemberRole[] = ["owner", "developer", "viewer"];
export const operatorRoles: OperatorRole[] = ["operator-admin", "operator-viewer"];

/** A console user as the code sees it: never the password hash or the TOTP secret (read through their own methods). */
export interface User {
  id: string;
  email: string;
  /** The member's account; null for an operator. */
  accountId: string | null;
  role: UserRole;
  hasPassword: boolean;
  totpEnabled: boolean;
  createdAt: string;
  disabledAt: string | null;
  /** `invite`: joined through a local invite, the stored role holds; `oidc`: made by a sign-in, the provider decides. */
  provisionedBy: UserProvisioning;
  /** The operator's identity at the OpenID provider, once linked (auth/oidc-operators.ts). */
  oidc: OidcSubject | null;
}

export type UserProvisioning = "invite" | "oidc";

export interface OidcSubject {
  issuer: string;
  subject: string;
}

type Row = Selectable<Database["users"]>;

function toUser(row: Row): User {
  return {
    id: row.id,
    email: row.email,
    accountId: row.account_id,
    role: row.role as UserRole,
    hasPassword: row.password_hash !== null,
    totpEnabled: row.totp_enabled_at !== null,
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
    provisionedBy: row.provisioned_by === "oidc" ? "oidc" : "invite",
    oidc: row.oidc_issuer !== null && row.oidc_subject !== null ? { issuer: row.oidc_issuer, subject: row.oidc_subject } : null,
  };
}

export function isOperatorRole(role: string): role is OperatorRole {
  return (operatorRoles as string[]).includes(role);
}

/** Emails compare without case (one user per address however it is typed). */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export class UsersRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(user: { id: string; email: string; accountId: string | null; role: UserRole; passwordHash: string | null; createdAt: string; provisionedBy?: UserProvisioning; oidc?: OidcSubject }): Promise<User> {
    const row: Row = {
      id: user.id,
      email: normalizeEmail(user.email),
      account_id: user.accountId,
      role: user.role,
      password_hash: user.passwordHash,
      totp_secret: null,
      totp_enabled_at: null,
      totp_last_step: null,
      created_at: user.createdAt,
      disabled_at: null,
      oidc_issuer: user.oidc?.issuer ?? null,
      oidc_subject: user.oidc?.subject ?? null,
      provisioned_by: user.provisionedBy ?? "invite",
    };
    await this.db.insertInto("users").values(row).execute();
    return toUser(row);
  }

  async get(id: string): Promise<User | null> {
    const row = await this.db.selectFrom("users").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toUser(row) : null;
  }

  async byEmail(email: string): Promise<User | null> {
    const row = await this.db.selectFrom("users").selectAll().where("email", "=", normalizeEmail(email)).executeTakeFirst();
    return row ? toUser(row) : null;
  }

  /** The user linked to this identity at the OpenID provider (active or not). */
  async byOidcSubject(subject: OidcSubject): Promise<User | null> {
    const row = await this.db.selectFrom("users").selectAll().where("oidc_issuer", "=", subject.issuer).where("oidc_subject", "=", subject.subject).executeTakeFirst();
    return row ? toUser(row) : null;
  }

  async linkOidc(id: string, subject: OidcSubject): Promise<void> {
    await this.db.updateTable("users").set({ oidc_issuer: subject.issuer, oidc_subject: subject.subject }).where("id", "=", id).execute();
  }

  /** A new email for the user; their pending reset links are withdrawn (a link is for the address it was sent to). */
  async setEmail(id: string, email: string, at: string): Promise<void> {
    await this.db.updateTable("users").set({ email: normalizeEmail(email) }).where("id", "=", id).execute();
    await this.withdrawResetLinks(id, at);
  }

  /** Members of an account (disabled ones included: the caller filters), or the operators when `accountId` is null. */
  async list(accountId: string | null): Promise<User[]> {
    const query = this.db.selectFrom("users").selectAll();
    const rows = await (accountId === null ? query.where("account_id", "is", null) : query.where("account_id", "=", accountId)).orderBy("created_at").execute();
    return rows.map(toUser);
  }

  async passwordHash(id: string): Promise<string | null> {
    return (await this.db.selectFrom("users").select("password_hash").where("id", "=", id).executeTakeFirst())?.password_hash ?? null;
  }

  async setPassword(id: string, hash: string): Promise<void> {
    await this.db.updateTable("users").set({ password_hash: hash }).where("id", "=", id).execute();
  }

  async setRole(id: string, role: UserRole): Promise<void> {
    await this.db.updateTable("users").set({ role }).where("id", "=", id).execute();
  }

  /**
   * Removes the user: no password, TOTP or provider link (a later sign-in by the same identity makes a new user), and
   * their pending reset links withdrawn.
   */
  async disable(id: string, at: string): Promise<void> {
    await this.db.updateTable("users").set({ disabled_at: at, password_hash: null, totp_secret: null, totp_enabled_at: null, oidc_issuer: null, oidc_subject: null }).where("id", "=", id).execute();
    await this.db.deleteFrom("recovery_codes").where("user_id", "=", id).execute();
    await this.withdrawResetLinks(id, at);
  }

  /** Frees a removed user's email for a new user (emails are unique); the audit log keeps the address it recorded. */
  async retireEmail(id: string): Promise<void> {
    await this.db.updateTable("users").set((eb) => ({ email: eb.fn<string>("concat", [eb.val(`removed:${id}:`), eb.ref("email")]) })).where("id", "=", id).execute();
    await this.withdrawResetLinks(id, new Date().toISOString());
  }

  /** The user's unused reset links are refused from now on, like used ones (invites.repo.ts). */
  private async withdrawResetLinks(id: string, at: string): Promise<void> {
    await this.db.updateTable("invites").set({ used_at: at }).where("user_id", "=", id).where("used_at", "is", null).execute();
  }

  async totp(id: string): Promise<{ secret: string | null; enabled: boolean; lastStep: number | null }> {
    const row = await this.db.selectFrom("users").select(["totp_secret", "totp_enabled_at", "totp_last_step"]).where("id", "=", id).executeTakeFirst();
    return { secret: row?.totp_secret ?? null, enabled: Boolean(row?.totp_enabled_at), lastStep: row?.totp_last_step == null ? null : Number(row.totp_last_step) };
  }

  /** A secret being set up (not yet enabled): replaces any earlier pending one. */
  async setPendingTotp(id: string, secret: string): Promise<void> {
    await this.db.updateTable("users").set({ totp_secret: secret, totp_enabled_at: null, totp_last_step: null }).where("id", "=", id).where("totp_enabled_at", "is", null).execute();
  }

  async enableTotp(id: string, at: string, step: number, recoveryHashes: string[]): Promise<void> {
    await this.db.updateTable("users").set({ totp_enabled_at: at, totp_last_step: step }).where("id", "=", id).execute();
    await this.db.deleteFrom("recovery_codes").where("user_id", "=", id).execute();
    if (recoveryHashes.length > 0) await this.db.insertInto("recovery_codes").values(recoveryHashes.map((hash) => ({ user_id: id, hash, used_at: null }))).execute();
  }

  async disableTotp(id: string): Promise<void> {
    await this.db.updateTable("users").set({ totp_secret: null, totp_enabled_at: null, totp_last_step: null }).where("id", "=", id).execute();
    await this.db.deleteFrom("recovery_codes").where("user_id", "=", id).execute();
  }

  /** Records a time step as used, only if it is later than the last one: false when the code was already used. */
  async useTotpStep(id: string, step: number): Promise<boolean> {
    const result = await this.db
      .updateTable("users")
      .set({ totp_last_step: step })
      .where("id", "=", id)
      .where((eb) => eb.or([eb("totp_last_step", "is", null), eb("totp_last_step", "<", step)]))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Spends a recovery code by its hash: true once, false for an unknown or used code. */
  async useRecoveryCode(id: string, hash: string, at: string): Promise<boolean> {
    const result = await this.db.updateTable("recovery_codes").set({ used_at: at }).where("user_id", "=", id).where("hash", "=", hash).where("used_at", "is", null).executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async recoveryCodesLeft(id: string): Promise<number> {
    const row = await this.db.selectFrom("recovery_codes").select((eb) => eb.fn.countAll<string | number>().as("n")).where("user_id", "=", id).where("used_at", "is", null).executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async countOperators(): Promise<number> {
    const row = await this.db.selectFrom("users").select((eb) => eb.fn.countAll<string | number>().as("n")).where("account_id", "is", null).where("disabled_at", "is", null).executeTakeFirst();
    return Number(row?.n ?? 0);
  }
}
