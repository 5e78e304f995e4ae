import type { Generated } from "kysely";

/** Timestamps are ISO-8601 strings in both dialects; JSON columns are text. */
export interface AccountsTable {
  id: string;
  name: string;
  plan: string;
  /** JSON array of CIDRs; "[]" = no allowlist. */
  allow_ips: string;
  /** JSON array of contact addresses registered on the account. */
  contacts: string;
  created_at: string;
}

export interface KeysTable {
  id: string;
  account_id: string;
  /** Display prefix: the only part of the key that may be shown or logged. */
  prefix: string;
  /** HMAC-SHA-256 (hex) of the full key under the server secret. */
  hash: string;
  name: string | null;
  /** JSON array of model globs, or null = no key-level limit. */
  models: string | null;
  /** JSON array of endpoints, or null = no key-level limit. */
  endpoints: string | null;
  deployment: string | null;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface UsageTable {
  key_id: string;
  account_id: string;
  model: string;
  endpoint: string;
  /** UTC day, YYYY-MM-DD. */
  day: string;
  requests: Generated<number>;
  prompt_tokens: Generated<number>;
  completion_tokens: Generated<number>;
}

/** Append-only (triggers refuse UPDATE and DELETE in both dialects): who did what to which account or key. */
export interface AuditTable {
  id: string;
  at: string;
  /** `console` (a console login), `cli` or `admin-token` (the admin API). */
  actor: string;
  /** A registered contact of the account the operation was asked for by (the pilot-phase support flow). */
  on_behalf_of: string | null;
  action: string;
  account_id: string | null;
  key_id: string | null;
  /** The client address of an HTTP call; null for the CLI. */
  source: string | null;
  /** JSON: what changed (old and new values, the key a rotation replaces); never a key value. */
  detail: string | null;
  /** Position in the hash chain: 1, 2, 3… with no gaps (unique). */
  seq: number;
  /** The previous entry's `hash` (64 zeros for the first entry). */
  prev_hash: string;
  /** SHA-256 (hex) over `prev_hash` and this entry's fields (audit-chain.ts). */
  hash: string;
}

/** Settings the store keeps about itself: name -> value (the key secret's check value). */
export interface StoreMetaTable {
  name: string;
  value: string;
}

/** Ids of the usage batches written, so a batch written again (its acknowledgement lost) adds nothing. */
export interface UsageBatchesTable {
  id: string;
  written_at: string;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: KeysTable;
  usage: UsageTable;
  audit_log: AuditTable;
  store_meta: StoreMetaTable;
  usage_batches: UsageBatchesTable;
}
