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
  /** JSON {amountMicros, period}: the account's own budget (issue 32); null = its plan's. */
  budget: string | null;
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
  /** The share of the row's requests and tokens that batch lines made (the Batch API). */
  batch_requests: Generated<number>;
  batch_prompt_tokens: Generated<number>;
  batch_completion_tokens: Generated<number>;
  /** The share of the row's requests answered from the response cache (issue 45); their tokens are what was charged. */
  cached_requests: Generated<number>;
}

/** Append-only (triggers refuse UPDATE and DELETE in both dialects): who did what to which account or key. */
export interface AuditTable {
  id: string;
  at: string;
  /**
   * The kind of actor: `member` or `operator` (a console user, named by `actor_id` and `actor_email`), `cli`,
   * `admin-token` (automation), `anonymous` (a failed login); `console` only on entries from before console users.
   */
  actor: string;
  /** The user's id when the actor is a member or an operator (null otherwise, and on entries from before it). */
  actor_id: string | null;
  /** The user's email at the time of the entry. */
  actor_email: string | null;
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

/** Console users: an account's members (owner, developer, viewer) and the operators (operator-admin, operator-viewer). */
export interface UsersTable {
  id: string;
  /** Lower-cased; one user per email. */
  email: string;
  /** The member's account; null for operators. */
  account_id: string | null;
  role: string;
  /** scrypt (password.ts); null for a user who signs in only through OIDC. */
  password_hash: string | null;
  /** Base32 TOTP secret once TOTP is on (or being set up: `totp_enabled_at` null). */
  totp_secret: string | null;
  totp_enabled_at: string | null;
  /** The last TOTP time step accepted, so a code is never accepted twice. */
  totp_last_step: number | null;
  created_at: string;
  /** A removed member: kept for the audit log's sake, never signs in again. */
  disabled_at: string | null;
  /** An operator's identity at the OpenID provider (the ID token's `iss` and `sub`), once linked; unique together. */
  oidc_issuer: string | null;
  oidc_subject: string | null;
  /** `invite` (a local invite: the stored role holds) or `oidc` (made by a sign-in: the provider decides the role). */
  provisioned_by: Generated<string>;
}

/** TOTP recovery codes: each one shown once, stored as a hash, used at most once. */
export interface RecoveryCodesTable {
  user_id: string;
  hash: string;
  used_at: string | null;
}

/** One-time links: invitations (and password resets), stored as the SHA-256 of the token only. */
export interface InvitesTable {
  id: string;
  token_hash: string;
  /** `invite` or `reset`. */
  purpose: string;
  email: string;
  /** The account a member is invited to; null for an operator. */
  account_id: string | null;
  role: string;
  created_by_id: string | null;
  created_by_email: string | null;
  created_at: string;
  expires_at: string;
  /** Used, or withdrawn. */
  used_at: string | null;
  /** A reset link's user (the link opens this user only, whatever their email is now); null for an invite. */
  user_id: string | null;
  /** 1: accepting the reset also turns the user's TOTP off (an operator's decision). */
  clears_totp: Generated<number>;
}

/** Console sessions in the database (when no Redis is configured): the SHA-256 of the cookie's id, never the id. */
export interface SessionsTable {
  id_hash: string;
  user_id: string;
  csrf: string;
  created_at: string;
  last_seen_at: string;
  /** The absolute end, whatever the activity. */
  expires_at: string;
}

/** Batch API files (input and output): their bytes are in `file_chunks`. Times are epoch milliseconds. */
export interface FilesTable {
  id: string;
  account_id: string;
  key_id: string;
  /** `batch` (uploaded) or `batch_output` (a batch's output and error files). */
  purpose: string;
  filename: string;
  /** While uploading: the bytes reserved against the account's storage; then the file's size. */
  bytes: number;
  created_at: number;
  /** `uploading` (its chunks are being written; never listed or read) or `processed` (migration 0010). */
  status: Generated<string>;
  /** When the file disappears from listings and reads and is reclaimed; null: never (migration 0010). */
  expires_at: number | null;
  /** JSON: the validation errors a batch created from this file got, by endpoint, so it is not read again. */
  batch_errors: string | null;
}

/** A file's bytes in chunks of at most `fileChunkBytes`, in `seq` order. */
export interface FileChunksTable {
  file_id: string;
  seq: number;
  data: Uint8Array;
}

/** The Batch API's batches (the OpenAI batch object) and the lease of the node working one. */
export interface BatchesTable {
  id: string;
  account_id: string;
  key_id: string;
  /** `/v1/chat/completions` or `/v1/embeddings`. */
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: string;
  /** JSON object or null. */
  metadata: string | null;
  /** JSON: the validation errors ({code, message, param, line}[]) of a failed batch, or null. */
  errors: string | null;
  output_file_id: string | null;
  error_file_id: string | null;
  total: Generated<number>;
  completed: Generated<number>;
  failed: Generated<number>;
  /** Lines run at once: the largest `parallel` of the models the lines name. */
  concurrency: Generated<number>;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  /** The storage the batch's lines take while it is not final: its input file's size (migration 0010). */
  line_bytes: Generated<number>;
  /** How long its output and error files live after they are made, in ms; null: for ever (migration 0010). */
  output_expires_after_ms: number | null;
}

/** One line of a batch's input, and its result once it has run (written with the mark of completion). */
export interface BatchLinesTable {
  batch_id: string;
  /** 1-based line number in the input file. */
  line: number;
  custom_id: string;
  /** The request body, validated (with the endpoint's defaults filled in), as JSON. */
  body: string;
  /** `pending`, `done` (its result goes to the output file) or `error` (to the error file). */
  state: string;
  /** The output/error file line (JSON), null while pending. */
  result: string | null;
}

export interface Database {
  files: FilesTable;
  file_chunks: FileChunksTable;
  batches: BatchesTable;
  batch_lines: BatchLinesTable;
  users: UsersTable;
  recovery_codes: RecoveryCodesTable;
  invites: InvitesTable;
  console_sessions: SessionsTable;
  accounts: AccountsTable;
  api_keys: KeysTable;
  usage: UsageTable;
  audit_log: AuditTable;
  store_meta: StoreMetaTable;
  usage_batches: UsageBatchesTable;
}
