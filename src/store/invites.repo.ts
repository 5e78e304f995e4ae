import type { Kysely, Selectable } from "kysely";
import type { Database } from "./schema.ts";
import type { UserRole } from "./users.repo.ts";

export type InvitePurpose = "invite" | "reset";

export interface Invite {
  id: string;
  purpose: InvitePurpose;
  email: string;
  accountId: string | null;
  role: UserRole;
  createdById: string | null;
  createdByEmail: string | null;
  createdAt: string;
  expiresAt: string;
  usedAt: string | null;
  /** A reset link's user: it opens this user only. Null for an invite. */
  userId: string | null;
  /** Accepting the reset also turns the user's TOTP off (an operator's decision, issue 42.9). */
  clearsTotp: boolean;
}

type Row = Selectable<Database["invites"]>;

function toInvite(row: Row): Invite {
  return {
    id: row.id,
    purpose: row.purpose as InvitePurpose,
    email: row.email,
    accountId: row.account_id,
    role: row.role as UserRole,
    createdById: row.created_by_id,
    createdByEmail: row.created_by_email,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    usedAt: row.used_at,
    userId: row.user_id,
    clearsTotp: Number(row.clears_totp) === 1,
  };
}

/** One-time links, found by the hash of their token; the token itself is never stored. */
export class InvitesRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(invite: Invite, tokenHash: string): Promise<Invite> {
    await this.db
      .insertInto("invites")
      .values({
        id: invite.id,
        token_hash: tokenHash,
        purpose: invite.purpose,
        email: invite.email,
        account_id: invite.accountId,
        role: invite.role,
        created_by_id: invite.createdById,
        created_by_email: invite.createdByEmail,
        created_at: invite.createdAt,
        expires_at: invite.expiresAt,
        used_at: null,
        user_id: invite.userId,
        clears_totp: invite.clearsTotp ? 1 : 0,
      })
      .execute();
    return invite;
  }

  async byTokenHash(tokenHash: string): Promise<Invite | null> {
    const row = await this.db.selectFrom("invites").selectAll().where("token_hash", "=", tokenHash).executeTakeFirst();
    return row ? toInvite(row) : null;
  }

  /**
   * Marks the invite used if it is still unused and unexpired at `at`: true for exactly one caller, however many
   * race (the update is conditional), false for a used or expired one.
   */
  async use(id: string, at: string): Promise<boolean> {
    const result = await this.db.updateTable("invites").set({ used_at: at }).where("id", "=", id).where("used_at", "is", null).where("expires_at", ">", at).executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** The open invites (or reset links) of an account (or of operators, `null`), newest first. */
  async pending(accountId: string | null, at: string, purpose: InvitePurpose = "invite"): Promise<Invite[]> {
    const query = this.db.selectFrom("invites").selectAll().where("used_at", "is", null).where("expires_at", ">", at).where("purpose", "=", purpose);
    const rows = await (accountId === null ? query.where("account_id", "is", null) : query.where("account_id", "=", accountId)).orderBy("created_at", "desc").execute();
    return rows.map(toInvite);
  }

  /** Withdraws an unused invite (used_at set, so the link is refused like a used one). */
  async revoke(id: string, at: string): Promise<boolean> {
    const result = await this.db.updateTable("invites").set({ used_at: at }).where("id", "=", id).where("used_at", "is", null).executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async get(id: string): Promise<Invite | null> {
    const row = await this.db.selectFrom("invites").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toInvite(row) : null;
  }
}
