import type { Kysely } from "kysely";
import type { Endpoint } from "../config/config.schema.ts";
import { toAccount, type Account } from "./accounts.repo.ts";
import type { Database } from "./schema.ts";

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  prefix: string;
  name: string | null;
  models: string[] | null;
  endpoints: Endpoint[] | null;
  deployment: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

type Row = Database["api_keys"];

function toKey(row: Omit<Row, "hash">): ApiKeyRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    prefix: row.prefix,
    name: row.name,
    models: row.models === null ? null : (JSON.parse(row.models) as string[]),
    endpoints: row.endpoints === null ? null : (JSON.parse(row.endpoints) as Endpoint[]),
    deployment: row.deployment,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

const keyColumns = [
  "id",
  "account_id",
  "prefix",
  "name",
  "models",
  "endpoints",
  "deployment",
  "created_at",
  "last_used_at",
  "revoked_at",
] as const;

export class KeysRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(key: ApiKeyRecord, hash: string): Promise<ApiKeyRecord> {
    await this.db
      .insertInto("api_keys")
      .values({
        id: key.id,
        account_id: key.accountId,
        prefix: key.prefix,
        hash,
        name: key.name,
        models: key.models === null ? null : JSON.stringify(key.models),
        endpoints: key.endpoints === null ? null : JSON.stringify(key.endpoints),
        deployment: key.deployment,
        created_at: key.createdAt,
        last_used_at: null,
        revoked_at: null,
      })
      .execute();
    return key;
  }

  async get(id: string): Promise<ApiKeyRecord | null> {
    const row = await this.db.selectFrom("api_keys").select(keyColumns).where("id", "=", id).executeTakeFirst();
    return row ? toKey(row) : null;
  }

  async list(accountId?: string): Promise<ApiKeyRecord[]> {
    let query = this.db.selectFrom("api_keys").select(keyColumns);
    if (accountId) query = query.where("account_id", "=", accountId);
    const rows = await query.orderBy("created_at").orderBy("id").execute();
    return rows.map(toKey);
  }

  /** The key and its account by HMAC, revoked or not; one indexed read. */
  async findByHash(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null> {
    const row = await this.db
      .selectFrom("api_keys")
      .innerJoin("accounts", "accounts.id", "api_keys.account_id")
      .select([
        "api_keys.id",
        "api_keys.account_id",
        "api_keys.prefix",
        "api_keys.name",
        "api_keys.models",
        "api_keys.endpoints",
        "api_keys.deployment",
        "api_keys.created_at",
        "api_keys.last_used_at",
        "api_keys.revoked_at",
        "accounts.name as account_name",
        "accounts.plan as account_plan",
        "accounts.allow_ips as account_allow_ips",
        "accounts.contacts as account_contacts",
        "accounts.created_at as account_created_at",
        "accounts.budget as account_budget",
      ])
      .where("api_keys.hash", "=", hash)
      .executeTakeFirst();
    if (!row) return null;
    return {
      key: toKey(row),
      account: toAccount({
        id: row.account_id,
        name: row.account_name,
        plan: row.account_plan,
        allow_ips: row.account_allow_ips,
        contacts: row.account_contacts,
        created_at: row.account_created_at,
        budget: row.account_budget,
      }),
    };
  }

  /** Revokes once; a second revoke keeps the first timestamp. Returns the record after the change. */
  async revoke(id: string, at: string): Promise<ApiKeyRecord | null> {
    await this.db.updateTable("api_keys").set({ revoked_at: at }).where("id", "=", id).where("revoked_at", "is", null).execute();
    return this.get(id);
  }

  async touch(ids: string[], at: string): Promise<void> {
    if (ids.length === 0) return;
    await this.db.updateTable("api_keys").set({ last_used_at: at }).where("id", "in", ids).execute();
  }
}
