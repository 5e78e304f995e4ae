import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { resolveKey, sharedDeployment } from "../../auth/effective-limits.ts";
import { AppError } from "../../errors/app-error.ts";
import { ClientDisconnected, DeadlineExceeded } from "../../errors/aborts.ts";
import { toEnvelope } from "../../errors/envelope.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import type { BatchLine, BatchRecord, ServedKeys } from "../../store/batches.repo.ts";
import type { Store } from "../../store/store.ts";
import { isStoreBusy, isStoreUnreachable } from "../../store/store-health.ts";
import { completeChat } from "../chat/chat.service.ts";
import type { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { createEmbeddings } from "../embeddings/embeddings.service.ts";
import type { EmbeddingsRequest } from "../embeddings/embeddings.schema.ts";
import type { RequestContext } from "../request-context.ts";
import { endpointOfBatch, newId } from "./batch-access.ts";
import type { BatchEndpoint } from "./batches.schema.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** The Batch API runner of this node (server.ts starts it); routes wake it when there is new work. */
    batchRunner?: BatchRunner;
  }
}

/** Batches one node works at once (each runs its lines at its own concurrency). */
const maxBatchesPerNode = 4;
/** Lines read from the store at a time. */
const pageSize = 200;
/** How often a line's key is read from the store again (a revoked key stops the batch's lines within this). */
const authTtlMs = 1_000;
/** Error codes a batch line waits out and retries (capacity, loading), instead of writing them as its result. */
const retryable = new Set(["overloaded", "model_loading", "rate_limit_exceeded"]);
/**
 * A refusal that frees later than this (the account's budget or token quota: the end of a UTC day or month) is the
 * line's result instead of a wait: waiting would hold one of the node's batches for hours.
 */
const longestWaitMs = 60_000;
/** How long a line waits after the database did not answer one of its reads. */
const storeRetryMs = 1000;

/**
 * Result writes in flight on this node (all batches). Each is a transaction on the batch's row (its counters), so they queue on its
 * lock, each holding a pooled connection meanwhile: a few keep the line path free without taking the connections
 * the HTTP path needs (key lookups answer 503 when the pool has none).
 */
const maxPendingWrites = 3;

type StopReason = "cancel" | "expire" | "lost" | "shutdown";

/** One batch this node holds the lease of. */
interface Work {
  batch: BatchRecord;
  /** Aborts the lines running: cancel, expiry, the lease lost, or the node stopping. */
  abort: AbortController;
  reason: StopReason | null;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/**
 * Works the Batch API's batches in the server process. A node takes a batch through a lease in the store (a row
 * update with an expiry, renewed every third of `leaseMs` while it works; a dead node's lease expires and another
 * node takes the batch over). Lines run as `batch` priority requests of the batch's key, through the same services
 * as the HTTP endpoints (no rate limit: that is an HTTP hook), at the batch's concurrency (the largest `parallel` of
 * its models). Each result is written with the mark of its line's completion in one transaction, as it completes:
 * a node killed at any moment resumes with the lines not written, and never runs a written line again.
 */
export class BatchRunner {
  /** This node's name in leases. */
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  private readonly working = new Map<string, Work>();
  /** Every batch's result writes in flight (bounded by maxPendingWrites). */
  private readonly writes = new Set<Promise<void>>();
  private readonly auths = new Map<string, { at: number; auth: AuthContext | AppError }>();
  private stopped = false;
  private wakeUp: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  /** Issue 42.1: this node takes only batches whose key it may serve. */
  private readonly servedKeys: ServedKeys;

  constructor(
    private readonly ctx: AppContext,
    private readonly store: Store,
    private readonly log: FastifyBaseLogger,
  ) {
    this.servedKeys = { node: ctx.config.deployment, unbound: sharedDeployment };
    ctx.metrics.batchQueueDepth = () => store.health.run(() => store.batches.queueDepth());
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Looks for work now (a batch was created or cancelled) instead of at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  /** Stops taking batches, stops the lines running (they stay pending) and gives the leases up. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    for (const work of this.working.values()) this.halt(work, "shutdown");
    await this.loop;
  }

  private async run(): Promise<void> {
    const running = new Set<Promise<void>>();
    while (!this.stopped) {
      try {
        while (!this.stopped && this.working.size < maxBatchesPerNode) {
          const batch = await this.store.batches.acquire(this.owner, Date.now(), this.ctx.config.batches.leaseMs, new Set(this.working.keys()), this.servedKeys);
          if (!batch) break;
          if (this.stopped) {
            await this.store.batches.release(batch.id, this.owner);
            break;
          }
          const work: Work = { batch, abort: new AbortController(), reason: null };
          this.working.set(batch.id, work);
          const done = this.work(work)
            .catch((err) => this.log.error({ err, batch: batch.id }, "batch runner: the batch's work failed; another pass takes it up again"))
            .finally(() => {
              this.working.delete(batch.id);
              running.delete(done);
              this.wake();
            });
          running.add(done);
        }
      } catch (err) {
        this.log.warn({ err }, "batch runner: could not look for batches");
      }
      if (this.stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.ctx.config.batches.pollMs);
        this.wakeUp = () => (clearTimeout(timer), resolve());
      });
      this.wakeUp = null;
    }
    await Promise.all(running);
  }

  private halt(work: Work, reason: StopReason): void {
    if (work.reason) return;
    work.reason = reason;
    work.abort.abort(new ClientDisconnected());
  }

  /** One batch, from where its lines stand to its end (or until the lease is lost, or the node stops). */
  private async work(work: Work): Promise<void> {
    const { batch } = work;
    const { leaseMs } = this.ctx.config.batches;
    const renewal = setInterval(() => {
      this.store.batches
        .renew(batch.id, this.owner, Date.now(), leaseMs)
        .then((now) => {
          if (now === null) this.halt(work, "lost");
          else if (now.status === "cancelling") this.halt(work, "cancel");
          else if (now.status === "in_progress" && Date.now() >= now.expiresAt) this.halt(work, "expire");
        })
        .catch((err) => this.log.warn({ err, batch: batch.id }, "batch runner: could not renew the lease"));
    }, Math.max(100, Math.floor(leaseMs / 3)));
    const expiry = setTimeout(() => this.halt(work, "expire"), Math.max(0, batch.expiresAt - Date.now()));
    try {
      if (batch.status === "in_progress" && Date.now() < batch.expiresAt) await this.runLines(work);
      else if (batch.status === "cancelling") work.reason = "cancel";
      else if (batch.status === "in_progress") work.reason = "expire";
      if (work.reason === "lost") return;
      if (work.reason === "shutdown") {
        await this.store.batches.release(batch.id, this.owner);
        return;
      }
      if (batch.status === "finalizing") {
        // An earlier owner got as far as finalizing: its lines are all written, only the files are left.
        const end = batch.cancellingAt !== null ? "cancelled" : (await this.store.batches.hasExpiredLines(batch.id)) ? "expired" : "completed";
        await this.finish(work, end);
        return;
      }
      const end = work.reason === "cancel" ? "cancelled" : work.reason === "expire" ? "expired" : "completed";
      if (end !== "completed") await this.closeRest(work, end);
      await this.finish(work, end);
    } finally {
      clearInterval(renewal);
      clearTimeout(expiry);
    }
  }

  /** Runs the pending lines in order, `concurrency` at a time, until none is left or the work is halted. */
  private async runLines(work: Work): Promise<void> {
    const { batch } = work;
    const inFlight = new Set<Promise<void>>();
    // Results being written: a line's slot is free as soon as its answer is in, the write follows on its own.
    const writes = new Set<Promise<void>>();
    let after = 0;
    for (;;) {
      const page = await this.store.batches.pendingLines(batch.id, after, pageSize);
      if (page.length === 0) break;
      for (const line of page) {
        while (inFlight.size >= batch.concurrency) await Promise.race(inFlight);
        if (work.reason) break;
        while (this.writes.size >= maxPendingWrites) await Promise.race(this.writes);
        const running = this.runLine(work, line, writes).finally(() => inFlight.delete(running));
        inFlight.add(running);
        after = line.line;
      }
      if (work.reason) break;
    }
    await Promise.all(inFlight);
    await Promise.all(writes);
  }

  /**
   * The batch key's effective limits as the store holds them now (revocation, scopes, the account's own budget
   * apply: auth/effective-limits.ts, as for /v1), cached a second. A key revoked, or bound to another deployment
   * than this node's, fails the line with 401 as /v1 would.
   */
  private async authOf(batch: BatchRecord): Promise<AuthContext | AppError> {
    const cached = this.auths.get(batch.keyId);
    if (cached && Date.now() - cached.at < authTtlMs) return cached.auth;
    const key = await this.store.keys.get(batch.keyId);
    const account = key ? await this.store.accounts.find(key.accountId) : null;
    let auth: AuthContext | AppError;
    if (!key || !account) {
      auth = new AppError("invalid_api_key", { message: "The API key that created this batch is revoked or no longer valid." });
    } else {
      try {
        const resolved = resolveKey(this.ctx.config, { key, account });
        if (resolved.revoked) auth = new AppError("invalid_api_key", { message: "The API key that created this batch is revoked or no longer valid." });
        else if (!resolved.servesHere) auth = new AppError("invalid_api_key", { message: "The API key that created this batch is not valid on this node's deployment." });
        // Its lines run inside the server: the allowlist was checked when the batch was created from its address.
        else auth = resolved.auth;
      } catch (err) {
        this.log.error({ account: account.id, plan: account.plan }, "account's plan is not in the config");
        auth = toAppError(err).appError;
      }
    }
    if (this.auths.size > 1000) this.auths.clear();
    this.auths.set(batch.keyId, { at: Date.now(), auth });
    return auth;
  }

  /** Runs one line through the endpoint's service and writes its result; a line stopped by a halt stays pending. */
  private async runLine(work: Work, line: BatchLine, writes: Set<Promise<void>>): Promise<void> {
    const { batch } = work;
    const endpoint = endpointOfBatch[batch.endpoint as BatchEndpoint];
    const requestId = newId("req_");
    const log = this.log.child({ batch: batch.id, line: line.line, reqId: requestId });
    let status = 200;
    let body: unknown;
    for (;;) {
      const started = Date.now();
      const timers: NodeJS.Timeout[] = [];
      try {
        const auth = await this.authOf(batch);
        if (auth instanceof AppError) throw auth;
        const request: RequestContext = {
          auth,
          endpoint,
          log,
          signalFor: (deadlineMs) => {
            const deadline = new AbortController();
            const timer = setTimeout(() => deadline.abort(new DeadlineExceeded(deadlineMs)), deadlineMs);
            timer.unref();
            timers.push(timer);
            return AbortSignal.any([work.abort.signal, deadline.signal]);
          },
          elapsedMs: () => Date.now() - started,
          outcome: null,
          headers: {},
          priority: "batch",
        };
        const parsed = JSON.parse(line.body) as unknown;
        body = endpoint === "chat" ? await completeChat(this.ctx, request, parsed as ChatCompletionRequest) : await createEmbeddings(this.ctx, request, parsed as EmbeddingsRequest);
        status = 200;
      } catch (err) {
        if (work.reason) return;
        // The database did not answer (a stall, a full pool, an outage): that is no answer to the line. Its reads
        // all come before the model runs (the key, the budget), so running the line again never runs it twice.
        const storeDown = isStoreBusy(err) || isStoreUnreachable(err);
        const { appError, unexpected } = toAppError(err);
        if (storeDown || (retryable.has(appError.code) && (appError.retryAfterMs ?? 0) <= longestWaitMs)) {
          if (storeDown) log.warn({ err }, "batch runner: the database did not answer a line's read; the line runs again");
          // Capacity or the store: wait and try the line again (the batch has until its completion window ends).
          await sleep(storeDown ? storeRetryMs : (appError.retryAfterMs ?? 1000), work.abort.signal);
          if (work.reason) return;
          continue;
        }
        if (unexpected) log.error({ err }, "batch line failed");
        status = appError.status;
        body = toEnvelope(appError);
      } finally {
        for (const timer of timers) clearTimeout(timer);
      }
      break;
    }
    const ok = status === 200;
    const result = JSON.stringify({ id: newId("batch_req_"), custom_id: line.customId, response: { status_code: status, request_id: requestId, body }, error: null });
    const write = this.store.batches
      .complete(batch.id, this.owner, line.line, ok ? "done" : "error", result)
      .then((written) => {
        if (written === "lease-lost") this.halt(work, "lost");
        else if (written === "written") this.ctx.metrics.batchLines.inc({ endpoint, outcome: ok ? "completed" : "failed" });
      })
      .catch((err) => {
        // Not written: the line stays pending and runs again when the batch is taken up again.
        log.warn({ err }, "batch runner: could not write a line's result; the batch is given up for another pass");
        this.halt(work, "lost");
      })
      .finally(() => {
        writes.delete(write);
        this.writes.delete(write);
      });
    writes.add(write);
    this.writes.add(write);
  }

  /** Writes the lines left pending as cancelled or expired (to the error file, counted neither way). */
  private async closeRest(work: Work, end: "cancelled" | "expired"): Promise<void> {
    const { batch } = work;
    const error =
      end === "expired"
        ? { code: "batch_expired", message: "This request could not be executed before the completion window expired." }
        : { code: "batch_cancelled", message: "This request was not executed because the batch was cancelled." };
    for (;;) {
      const page = await this.store.batches.pendingLines(batch.id, 0, pageSize);
      if (page.length === 0) return;
      for (const line of page) {
        const result = JSON.stringify({ id: newId("batch_req_"), custom_id: line.customId, response: null, error });
        if ((await this.store.batches.complete(batch.id, this.owner, line.line, "error", result, false)) === "lease-lost") return;
      }
    }
  }

  /** finalizing, then the output and error files and the final status, in one transaction. */
  private async finish(work: Work, end: "completed" | "cancelled" | "expired"): Promise<void> {
    const { batch } = work;
    const now = Date.now();
    if (batch.status !== "finalizing") {
      if (!(await this.store.batches.markFinalizing(batch.id, this.owner, now))) return;
      batch.finalizingAt = now;
    }
    const done = await this.store.batches.finalize(batch, this.owner, end, Date.now(), () => newId("file-"));
    if (done) this.log.info({ batch: batch.id, status: end }, "batch finished");
  }
}
