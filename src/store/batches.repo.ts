import { sql, type Kysely, type Selectable } from "kysely";
import type { Database } from "./schema.ts";
import type { FileRecord } from "./files.repo.ts";
import { FilesRepo } from "./files.repo.ts";
import { addUsageRows, type UsageDelta } from "./usage.repo.ts";

export type BatchStatus = "validating" | "in_progress" | "finalizing" | "completed" | "failed" | "expired" | "cancelling" | "cancelled";

/** The statuses a runner works on (a lease is taken on them); the others are final (or validating, done in the request). */
export const activeStatuses: BatchStatus[] = ["in_progress", "cancelling", "finalizing"];

export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface BatchRecord {
  id: string;
  accountId: string;
  keyId: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  status: BatchStatus;
  metadata: Record<string, string> | null;
  errors: BatchError[] | null;
  outputFileId: string | null;
  errorFileId: string | null;
  total: number;
  completed: number;
  failed: number;
  concurrency: number;
  /** Epoch milliseconds, like every time below. */
  createdAt: number;
  inProgressAt: number | null;
  expiresAt: number;
  finalizingAt: number | null;
  completedAt: number | null;
  failedAt: number | null;
  expiredAt: number | null;
  cancellingAt: number | null;
  cancelledAt: number | null;
  /** How long the output and error files live once made; null: until deleted. */
  outputExpiresAfterMs: number | null;
}

/** Which keys' batches a node may take: those bound to its deployment, and unbound keys where it is `unbound`'s. */
export interface ServedKeys {
  node: string;
  unbound: string;
}

/** A batch waiting for a node: its account, and its account's plan (null: the account is gone). */
export interface BatchCandidate {
  id: string;
  accountId: string;
  plan: string | null;
  createdAt: number;
}

export interface BatchLine {
  line: number;
  customId: string;
  body: string;
}

type Row = Selectable<Database["batches"]>;

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

function toBatch(row: Row): BatchRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    keyId: row.key_id,
    endpoint: row.endpoint,
    inputFileId: row.input_file_id,
    completionWindow: row.completion_window,
    status: row.status as BatchStatus,
    metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as Record<string, string>),
    errors: row.errors === null ? null : (JSON.parse(row.errors) as BatchError[]),
    outputFileId: row.output_file_id,
    errorFileId: row.error_file_id,
    total: Number(row.total),
    completed: Number(row.completed),
    failed: Number(row.failed),
    concurrency: Number(row.concurrency),
    createdAt: Number(row.created_at),
    inProgressAt: num(row.in_progress_at),
    expiresAt: Number(row.expires_at),
    finalizingAt: num(row.finalizing_at),
    completedAt: num(row.completed_at),
    failedAt: num(row.failed_at),
    expiredAt: num(row.expired_at),
    cancellingAt: num(row.cancelling_at),
    cancelledAt: num(row.cancelled_at),
    outputExpiresAfterMs: num(row.output_expires_after_ms),
  };
}

/** The row of a batch as created, its lines holding `lineBytes` of the account's storage while it runs. */
export function batchRow(batch: BatchRecord, lineBytes: number) {
  return {
    id: batch.id,
    account_id: batch.accountId,
    key_id: batch.keyId,
    endpoint: batch.endpoint,
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow,
    status: batch.status,
    metadata: batch.metadata === null ? null : JSON.stringify(batch.metadata),
    errors: batch.errors === null ? null : JSON.stringify(batch.errors),
    output_file_id: null,
    error_file_id: null,
    total: batch.total,
    completed: 0,
    failed: 0,
    concurrency: batch.concurrency,
    created_at: batch.createdAt,
    in_progress_at: batch.inProgressAt,
    expires_at: batch.expiresAt,
    finalizing_at: null,
    completed_at: null,
    failed_at: batch.failedAt,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    lease_owner: null,
    lease_expires_at: null,
    line_bytes: lineBytes,
    output_expires_after_ms: batch.outputExpiresAfterMs,
  };
}

/** Stores lines of a batch, several rows per statement. */
export async function insertLines(trx: Kysely<Database>, id: string, lines: BatchLine[]): Promise<void> {
  // Several rows per statement: SQLite takes at most 32,766 parameters, 4 per line here.
  for (let i = 0; i < lines.length; i += 500) {
    const values = lines.slice(i, i + 500).map((l) => ({ batch_id: id, line: l.line, custom_id: l.customId, body: l.body, state: "pending", result: null }));
    await trx.insertInto("batch_lines").values(values).execute();
  }
}

/** Thrown inside a transaction to roll it back: the line was already written, or the lease is no longer ours. */
class Rollback extends Error {
  constructor(readonly why: "lease-lost" | "already-done") {
    super(why);
  }
}

/**
 * Batches, their lines and the lease of the node working one. A line's result and the mark of its completion are one
 * UPDATE of its row, in the same transaction as the batch's counters and the check that the lease is still ours: a
 * node killed at any moment leaves each line either pending (it runs again) or done (it never runs again).
 */
export class BatchesRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** The batch and its lines in one transaction. */
  async insert(batch: BatchRecord, lines: BatchLine[]): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.insertInto("batches").values(batchRow(batch, 0)).execute();
      await insertLines(trx, batch.id, lines);
    });
  }

  async get(accountId: string, id: string): Promise<BatchRecord | null> {
    const row = await this.db.selectFrom("batches").selectAll().where("id", "=", id).where("account_id", "=", accountId).executeTakeFirst();
    return row ? toBatch(row) : null;
  }

  /** Any account's batch (the runner). */
  async byId(id: string): Promise<BatchRecord | null> {
    const row = await this.db.selectFrom("batches").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toBatch(row) : null;
  }

  /** The account's batches, newest first, after the batch `after`. */
  async list(accountId: string, options: { limit: number; after?: string }): Promise<BatchRecord[]> {
    let query = this.db.selectFrom("batches").selectAll().where("account_id", "=", accountId);
    if (options.after) {
      const after = await this.db.selectFrom("batches").select(["created_at", "id"]).where("id", "=", options.after).where("account_id", "=", accountId).executeTakeFirst();
      if (after) query = query.where((eb) => eb.or([eb("created_at", "<", after.created_at), eb.and([eb("created_at", "=", after.created_at), eb("id", "<", after.id)])]));
    }
    const rows = await query.orderBy("created_at", "desc").orderBy("id", "desc").limit(options.limit).execute();
    return rows.map(toBatch);
  }

  /** The newest batches of an account, or of every account (operators), for the console. */
  async recent(accountId: string | undefined, limit: number): Promise<BatchRecord[]> {
    let query = this.db.selectFrom("batches").selectAll();
    if (accountId !== undefined) query = query.where("account_id", "=", accountId);
    return (await query.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).execute()).map(toBatch);
  }

  /** in_progress (or validating) → cancelling; the batch as it is after. */
  async requestCancel(accountId: string, id: string, now: number): Promise<BatchRecord | null> {
    await this.db
      .updateTable("batches")
      .set({ status: "cancelling", cancelling_at: now })
      .where("id", "=", id)
      .where("account_id", "=", accountId)
      .where("status", "in", ["validating", "in_progress"])
      .execute();
    return this.get(accountId, id);
  }

  /**
   * The active batches no live node holds (their lease absent or expired) whose key this node may serve: a key bound
   * to a deployment only on that deployment's nodes, an unbound key (or a key gone from the store) only on
   * `keys.unbound`'s (auth/effective-limits.ts). At most `perAccount` of each account, its oldest, and `limit` in
   * all, every account's first before anyone's second (so one account's many batches never hide another's).
   */
  async candidates(now: number, keys: ServedKeys, perAccount: number, limit: number): Promise<BatchCandidate[]> {
    const free = this.db
      .selectFrom("batches")
      .leftJoin("api_keys", "api_keys.id", "batches.key_id")
      .leftJoin("accounts", "accounts.id", "batches.account_id")
      .select(["batches.id", "batches.account_id", "accounts.plan", "batches.created_at"])
      .select(sql<number>`row_number() over (partition by batches.account_id order by batches.created_at, batches.id)`.as("rank"))
      .where("batches.status", "in", activeStatuses)
      .where((eb) => eb.or([eb("batches.lease_owner", "is", null), eb("batches.lease_expires_at", "<", now)]))
      .where(sql<string>`coalesce(api_keys.deployment, ${keys.unbound})`, "=", keys.node);
    const rows = await this.db.selectFrom(free.as("free")).selectAll().where("rank", "<=", perAccount).orderBy("rank").orderBy("created_at").orderBy("id").limit(limit).execute();
    return rows.map((r) => ({ id: r.id, accountId: r.account_id, plan: r.plan, createdAt: Number(r.created_at) }));
  }

  /**
   * Takes the lease of a batch while it is active and no live node holds it: a conditional UPDATE, so two nodes
   * racing for one batch get it once. The batch, or null when another node was first.
   */
  async take(id: string, owner: string, now: number, leaseMs: number): Promise<BatchRecord | null> {
    const taken = await this.db
      .updateTable("batches")
      .set({ lease_owner: owner, lease_expires_at: now + leaseMs })
      .where("id", "=", id)
      .where("status", "in", activeStatuses)
      .where((eb) => eb.or([eb("lease_owner", "is", null), eb("lease_expires_at", "<", now)]))
      .executeTakeFirst();
    return Number(taken.numUpdatedRows) === 1 ? this.byId(id) : null;
  }

  /**
   * Extends our lease; the batch's status and deadline as the store has them now (a cancel, an expiry), or null when
   * the lease is no longer ours (another node took it over).
   */
  async renew(id: string, owner: string, now: number, leaseMs: number): Promise<{ status: BatchStatus; expiresAt: number } | null> {
    const renewed = await this.db.updateTable("batches").set({ lease_expires_at: now + leaseMs }).where("id", "=", id).where("lease_owner", "=", owner).executeTakeFirst();
    if (Number(renewed.numUpdatedRows) === 0) return null;
    const row = await this.db.selectFrom("batches").select(["status", "expires_at"]).where("id", "=", id).executeTakeFirst();
    return row ? { status: row.status as BatchStatus, expiresAt: Number(row.expires_at) } : null;
  }

  /** Which of these batches are being cancelled (a node without Redis learns of cancels from it). */
  async cancellingAmong(ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db.selectFrom("batches").select("id").where("id", "in", ids).where("status", "=", "cancelling").execute();
    return rows.map((r) => r.id);
  }

  /** Gives the lease up (a node stopping), so another node need not wait for it to expire. */
  async release(id: string, owner: string): Promise<void> {
    await this.db.updateTable("batches").set({ lease_owner: null, lease_expires_at: null }).where("id", "=", id).where("lease_owner", "=", owner).execute();
  }

  /** Lines not run yet, in order, after line `after`. */
  async pendingLines(id: string, after: number, limit: number): Promise<BatchLine[]> {
    const rows = await this.db
      .selectFrom("batch_lines")
      .select(["line", "custom_id", "body"])
      .where("batch_id", "=", id)
      .where("state", "=", "pending")
      .where("line", ">", after)
      .orderBy("line")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ line: Number(r.line), customId: r.custom_id, body: r.body }));
  }

  /**
   * Writes a line's result and marks it done (or failed) in one transaction with the batch's counters and the
   * line's usage, while the lease is ours: a line is charged exactly when its result is written, whenever a node
   * dies. "written"; "already-done" when the line was written before (nothing changes); "lease-lost" when another
   * node holds the batch now (nothing is written: that node runs the line, and charges it).
   */
  async complete(id: string, owner: string, line: number, outcome: "done" | "error", result: string, counted = true, usage: UsageDelta[] = []): Promise<"written" | "already-done" | "lease-lost"> {
    try {
      await this.db.transaction().execute(async (trx) => {
        const counters = !counted ? {} : outcome === "done" ? { completed: sql<number>`completed + 1` } : { failed: sql<number>`failed + 1` };
        const batch = await trx
          .updateTable("batches")
          .set({ lease_owner: owner, ...counters })
          .where("id", "=", id)
          .where("lease_owner", "=", owner)
          .executeTakeFirst();
        if (Number(batch.numUpdatedRows) === 0) throw new Rollback("lease-lost");
        const written = await trx
          .updateTable("batch_lines")
          .set({ state: outcome, result })
          .where("batch_id", "=", id)
          .where("line", "=", line)
          .where("state", "=", "pending")
          .executeTakeFirst();
        if (Number(written.numUpdatedRows) === 0) throw new Rollback("already-done");
        await addUsageRows(trx, usage);
      });
      return "written";
    } catch (err) {
      if (err instanceof Rollback) return err.why;
      throw err;
    }
  }

  /**
   * Writes pending lines as failed without counting them (a cancel or the window's end left them unrun), in one
   * transaction while the lease is ours; false when it is not (nothing is written).
   */
  async closeLines(id: string, owner: string, results: { line: number; result: string }[]): Promise<boolean> {
    try {
      await this.db.transaction().execute(async (trx) => {
        const held = await trx.updateTable("batches").set({ lease_owner: owner }).where("id", "=", id).where("lease_owner", "=", owner).executeTakeFirst();
        if (Number(held.numUpdatedRows) === 0) throw new Rollback("lease-lost");
        for (const { line, result } of results) {
          await trx.updateTable("batch_lines").set({ state: "error", result }).where("batch_id", "=", id).where("line", "=", line).where("state", "=", "pending").execute();
        }
      });
      return true;
    } catch (err) {
      if (err instanceof Rollback) return false;
      throw err;
    }
  }

  /** Moves the batch to `finalizing` (while the lease is ours). */
  async markFinalizing(id: string, owner: string, now: number): Promise<boolean> {
    const r = await this.db.updateTable("batches").set({ status: "finalizing", finalizing_at: now }).where("id", "=", id).where("lease_owner", "=", owner).executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  /** Whether any line was written as expired (a batch found `finalizing` after a restart learns its end from it). */
  async hasExpiredLines(id: string): Promise<boolean> {
    const row = await this.db.selectFrom("batch_lines").select("line").where("batch_id", "=", id).where("result", "like", '%"code":"batch_expired"%').limit(1).executeTakeFirst();
    return row !== undefined;
  }

  /**
   * The end: the output file (done lines, in line order) and the error file (failed ones), when they have lines,
   * and the final status, in one transaction while the lease is ours; the lease is released. A batch cancelled
   * before it reached `finalizing` ends `cancelled` even when its lines all ran (issue 42.6). The status it ended
   * with, or null when the lease is no longer ours.
   */
  async finalize(batch: BatchRecord, owner: string, end: "completed" | "expired" | "cancelled", now: number, newFileId: () => string): Promise<BatchStatus | null> {
    return this.db
      .transaction()
      .execute(async (trx) => {
        const claimed = await trx.updateTable("batches").set({ lease_owner: owner }).where("id", "=", batch.id).where("lease_owner", "=", owner).executeTakeFirst();
        if (Number(claimed.numUpdatedRows) === 0) throw new Rollback("lease-lost");
        const { cancelling_at } = await trx.selectFrom("batches").select("cancelling_at").where("id", "=", batch.id).executeTakeFirstOrThrow();
        const status = end === "completed" && cancelling_at !== null ? "cancelled" : end;
        const files = new FilesRepo(trx);
        const fileOf = async (state: "done" | "error", name: string): Promise<string | null> => {
          const rows = await trx.selectFrom("batch_lines").select("result").where("batch_id", "=", batch.id).where("state", "=", state).orderBy("line").execute();
          if (rows.length === 0) return null;
          const content = Buffer.from(rows.map((r) => `${r.result}\n`).join(""));
          const expiresAt = batch.outputExpiresAfterMs === null ? null : now + batch.outputExpiresAfterMs;
          const file: FileRecord = { id: newFileId(), accountId: batch.accountId, keyId: batch.keyId, purpose: "batch_output", filename: `${batch.id}_${name}.jsonl`, bytes: content.length, createdAt: now, expiresAt };
          await files.insert(file, content);
          return file.id;
        };
        const output = await fileOf("done", "output");
        const errors = await fileOf("error", "error");
        const at = status === "completed" ? { completed_at: now } : status === "expired" ? { expired_at: now } : { cancelled_at: now };
        await trx
          .updateTable("batches")
          .set({ status, ...at, output_file_id: output, error_file_id: errors, lease_owner: null, lease_expires_at: null, finalizing_at: batch.finalizingAt ?? now })
          .where("id", "=", batch.id)
          .execute();
        return status;
      })
      .catch((err) => {
        if (err instanceof Rollback) return null;
        throw err;
      });
  }

  /** Lines waiting in batches that are in progress, all accounts (the queue-depth metric). */
  async queueDepth(): Promise<number> {
    const row = await this.db
      .selectFrom("batch_lines")
      .innerJoin("batches", "batches.id", "batch_lines.batch_id")
      .select((eb) => eb.fn.countAll<number | string>().as("n"))
      .where("batches.status", "=", "in_progress")
      .where("batch_lines.state", "=", "pending")
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }
}
