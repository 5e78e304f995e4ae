import { sql, type Kysely } from "kysely";
import type { Database } from "./schema.ts";

export interface UsageDelta {
  keyId: string;
  accountId: string;
  model: string;
  endpoint: string;
  day: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  /** The part of the above that batch lines made. */
  batchRequests?: number;
  batchPromptTokens?: number;
  batchCompletionTokens?: number;
  /** The part of `requests` answered from the response cache. */
  cachedRequests?: number;
}

export interface UsageRow {
  accountId: string;
  accountName: string;
  keyId: string;
  model: string;
  endpoint: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  /** Of `requests`, those answered from the response cache (issue 45). */
  cachedRequests: number;
}

export interface DailyUsageRow {
  day: string;
  accountId: string;
  keyId: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  cachedRequests: number;
}

/**
 * How long a written batch's id is kept. A batch is replayed only by the process that wrote it, while it retries
 * after a lost acknowledgement (an outage at most), so ids much older than any outage are safe to forget.
 */
export const batchIdRetentionMs = 30 * 24 * 3_600_000;
/** Batches come every couple of seconds per replica: about one in a thousand also prunes old ids. */
const pruneChance = 0.001;

/**
 * Adds usage rows (upsert per key, model, endpoint and day) inside the caller's transaction: the usage recorder's
 * batches, and a batch line's usage with its result (batches.repo.ts).
 */
export async function addUsageRows(trx: Kysely<Database>, deltas: UsageDelta[]): Promise<void> {
  for (const d of deltas) {
    await trx
      .insertInto("usage")
      .values({
        key_id: d.keyId,
        account_id: d.accountId,
        model: d.model,
        endpoint: d.endpoint,
        day: d.day,
        requests: d.requests,
        prompt_tokens: d.promptTokens,
        completion_tokens: d.completionTokens,
        batch_requests: d.batchRequests ?? 0,
        batch_prompt_tokens: d.batchPromptTokens ?? 0,
        batch_completion_tokens: d.batchCompletionTokens ?? 0,
        cached_requests: d.cachedRequests ?? 0,
      })
      .onConflict((oc) =>
        oc.columns(["key_id", "model", "endpoint", "day"]).doUpdateSet({
          requests: sql`usage.requests + excluded.requests`,
          prompt_tokens: sql`usage.prompt_tokens + excluded.prompt_tokens`,
          completion_tokens: sql`usage.completion_tokens + excluded.completion_tokens`,
          batch_requests: sql`usage.batch_requests + excluded.batch_requests`,
          batch_prompt_tokens: sql`usage.batch_prompt_tokens + excluded.batch_prompt_tokens`,
          batch_completion_tokens: sql`usage.batch_completion_tokens + excluded.batch_completion_tokens`,
          cached_requests: sql`usage.cached_requests + excluded.cached_requests`,
        }),
      )
      .execute();
  }
}

export class UsageRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Adds a batch of counters in one transaction (upsert per key, model, endpoint and day), and records the batch's
   * id in the same transaction: a batch written again (its commit went through but the acknowledgement was lost)
   * adds nothing. Returns false for such a replay. Ids older than `batchIdRetentionMs` are pruned now and then.
   */
  async add(batchId: string, deltas: UsageDelta[]): Promise<boolean> {
    if (deltas.length === 0) return true;
    const writtenAt = new Date();
    return this.db.transaction().execute(async (trx) => {
      const recorded = await trx
        .insertInto("usage_batches")
        .values({ id: batchId, written_at: writtenAt.toISOString() })
        .onConflict((oc) => oc.column("id").doNothing())
        .executeTakeFirst();
      if (Number(recorded.numInsertedOrUpdatedRows ?? 0n) === 0) return false;
      await addUsageRows(trx, deltas);
      if (Math.random() < pruneChance) {
        const cutoff = new Date(writtenAt.getTime() - batchIdRetentionMs).toISOString();
        await trx.deleteFrom("usage_batches").where("written_at", "<", cutoff).execute();
      }
      return true;
    });
  }

  /** Totals per account, key, model and endpoint (all days), optionally for one account. */
  async summary(accountId?: string): Promise<UsageRow[]> {
    let query = this.db
      .selectFrom("usage")
      .innerJoin("accounts", "accounts.id", "usage.account_id")
      .select((eb) => [
        "usage.account_id",
        "accounts.name",
        "usage.key_id",
        "usage.model",
        "usage.endpoint",
        eb.fn.sum<number | string>("usage.requests").as("requests"),
        eb.fn.sum<number | string>("usage.prompt_tokens").as("prompt_tokens"),
        eb.fn.sum<number | string>("usage.completion_tokens").as("completion_tokens"),
        eb.fn.sum<number | string>("usage.cached_requests").as("cached_requests"),
      ])
      .groupBy(["usage.account_id", "accounts.name", "usage.key_id", "usage.model", "usage.endpoint"]);
    if (accountId) query = query.where("usage.account_id", "=", accountId);
    const rows = await query.orderBy("accounts.name").orderBy("usage.key_id").orderBy("usage.model").orderBy("usage.endpoint").execute();
    return rows.map((r) => ({
      accountId: r.account_id,
      accountName: r.name,
      keyId: r.key_id,
      model: r.model,
      endpoint: r.endpoint,
      requests: Number(r.requests),
      promptTokens: Number(r.prompt_tokens),
      completionTokens: Number(r.completion_tokens),
      cachedRequests: Number(r.cached_requests),
    }));
  }

  /** Per day, account, key and model (endpoints summed), oldest first; optionally for one account. */
  async daily(accountId?: string): Promise<DailyUsageRow[]> {
    let query = this.db
      .selectFrom("usage")
      .select((eb) => [
        "usage.day",
        "usage.account_id",
        "usage.key_id",
        "usage.model",
        eb.fn.sum<number | string>("usage.requests").as("requests"),
        eb.fn.sum<number | string>("usage.prompt_tokens").as("prompt_tokens"),
        eb.fn.sum<number | string>("usage.completion_tokens").as("completion_tokens"),
        eb.fn.sum<number | string>("usage.cached_requests").as("cached_requests"),
      ])
      .groupBy(["usage.day", "usage.account_id", "usage.key_id", "usage.model"]);
    if (accountId) query = query.where("usage.account_id", "=", accountId);
    const rows = await query.orderBy("usage.day").orderBy("usage.key_id").orderBy("usage.model").execute();
    return rows.map((r) => ({
      day: r.day,
      accountId: r.account_id,
      keyId: r.key_id,
      model: r.model,
      requests: Number(r.requests),
      promptTokens: Number(r.prompt_tokens),
      completionTokens: Number(r.completion_tokens),
      cachedRequests: Number(r.cached_requests),
    }));
  }

  /** An account's tokens per model between two days (inclusive, YYYY-MM-DD): a quota's or budget's period. */
  async periodTotals(accountId: string, firstDay: string, lastDay: string): Promise<{ model: string; promptTokens: number; completionTokens: number }[]> {
    const rows = await this.db
      .selectFrom("usage")
      .select((eb) => ["usage.model", eb.fn.sum<number | string>("usage.prompt_tokens").as("prompt_tokens"), eb.fn.sum<number | string>("usage.completion_tokens").as("completion_tokens")])
      .where("usage.account_id", "=", accountId)
      .where("usage.day", ">=", firstDay)
      .where("usage.day", "<=", lastDay)
      .groupBy("usage.model")
      .execute();
    return rows.map((r) => ({ model: r.model, promptTokens: Number(r.prompt_tokens), completionTokens: Number(r.completion_tokens) }));
  }
}
