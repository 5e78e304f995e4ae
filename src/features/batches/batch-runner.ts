import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import type { AppContext } from "../../app-context.ts";
import { sharedDeployment } from "../../auth/effective-limits.ts";
import { ClientDisconnected, WorkRequeued } from "../../errors/aborts.ts";
import type { BatchLine, BatchRecord, ServedKeys } from "../../store/batches.repo.ts";
import type { Store } from "../../store/store.ts";
import { usageDeltas } from "../../store/usage-recorder.ts";
import { BatchCancelBus } from "./batch-cancel-bus.ts";
import { endpointOfBatch, newId } from "./batch-access.ts";
import { endedLine, LineRunner, type StopReason } from "./batch-line.ts";
import { BatchPickup } from "./batch-pickup.ts";
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
/** Without Redis, how often a node reads whether the batches it works were cancelled (issue 42.6: within 1 s). */
const cancelPollMs = 500;

/**
 * Result writes in flight on this node (all batches). Each is a transaction on the batch's row (its counters), so they queue on its
 * lock, each holding a pooled connection meanwhile: a few keep the line path free without taking the connections
 * the HTTP path needs (key lookups answer 503 when the pool has none).
 */
const maxPendingWrites = 3;

/** Waiting batches a node considers at each look (at most maxBatchesPerNode of each account). */
const candidateLimit = 1000;

/** One batch this node holds the lease of. */
interface Work {
  batch: BatchRecord;
  /** Aborts the lines running: cancel, expiry, the lease lost, or the node stopping. */
  abort: AbortController;
  reason: Exclude<StopReason, "yield"> | null;
  /** Handed back to share the node's seats (issue 42.4): no line starts, the running ones finish, then the lease goes. */
  yielding: boolean;
}

/**
 * Works the Batch API's batches in the server process. A node takes a batch through a lease in the store (a row
 * update with an expiry, renewed every third of `leaseMs` while it works; a dead node's lease expires and another
 * node takes the batch over). Lines run through the LineRunner (batch-line.ts) at the batch's concurrency (the
 * largest `parallel` of its models). Each result is written with the mark of its line's completion in one
 * transaction, as it completes: a node killed at any moment resumes with the lines not written, and never runs a
 * written line again. A cancel stops the lines within a second on whichever node works the batch (issue 42.6).
 */
export class BatchRunner {
  /** This node's name in leases. */
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
  private readonly working = new Map<string, Work>();
  private readonly lines: LineRunner;
  /** Which waiting batch takes a free seat (issue 42.4). */
  private readonly pickup = new BatchPickup(maxBatchesPerNode);
  /** Every batch's result writes in flight (bounded by maxPendingWrites). */
  private readonly writes = new Set<Promise<void>>();
  private stopped = false;
  private wakeUp: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  /** Issue 42.1: this node takes only batches whose key it may serve. */
  private readonly servedKeys: ServedKeys;

  /** Cancels published by any replica (Redis); null: this node polls the store for them. */
  private cancels: BatchCancelBus | null = null;
  private cancelPoll: NodeJS.Timeout | null = null;

  private constructor(
    private readonly ctx: AppContext,
    private readonly store: Store,
    private readonly log: FastifyBaseLogger,
  ) {
    this.servedKeys = { node: ctx.config.deployment, unbound: sharedDeployment };
    this.lines = new LineRunner(ctx, store, log);
    ctx.metrics.batchQueueDepth = () => store.health.run(() => store.batches.queueDepth());
  }

  /** A node's runner; with Redis configured it hears of cancels from every replica at once. */
  static async create(ctx: AppContext, store: Store, log: FastifyBaseLogger): Promise<BatchRunner> {
    const runner = new BatchRunner(ctx, store, log);
    if (ctx.config.redisUrl) runner.cancels = await BatchCancelBus.connect(ctx.config.redisUrl, (id) => runner.stopCancelled(id));
    return runner;
  }

  start(): void {
    if (!this.cancels) {
      this.cancelPoll = setInterval(() => void this.pollCancels(), cancelPollMs);
      this.cancelPoll.unref();
    }
    this.loop ??= this.run();
  }

  /**
   * Issue 42.6: a batch was cancelled (moved to `cancelling` in the store): the node working it stops its lines
   * now, this node at once and any other through Redis, or its next read of the store when there is no Redis.
   */
  async cancel(batchId: string): Promise<void> {
    this.stopCancelled(batchId);
    this.wake();
    await this.cancels?.publish(batchId).catch((err) => this.log.warn({ err, batch: batchId }, "batch runner: could not publish a cancel; the node working it sees it at its next lease renewal"));
  }

  private stopCancelled(batchId: string): void {
    const work = this.working.get(batchId);
    if (work) this.halt(work, "cancel");
  }

  private async pollCancels(): Promise<void> {
    if (this.working.size === 0) return;
    try {
      for (const id of await this.store.batches.cancellingAmong([...this.working.keys()])) this.stopCancelled(id);
    } catch (err) {
      this.log.warn({ err }, "batch runner: could not read whether its batches were cancelled");
    }
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
    if (this.cancelPoll) clearInterval(this.cancelPoll);
    await this.loop;
    this.cancels?.close();
  }

  private async run(): Promise<void> {
    const running = new Set<Promise<void>>();
    while (!this.stopped) {
      try {
        await this.pickUp(running);
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

  /**
   * Issue 42.4: fills the free seats with the batches the pickup chooses among those waiting (shared between
   * accounts by weight and tokens received, batch-pickup.ts), then hands one back when an account waits below its
   * share while another holds more than its own.
   */
  private async pickUp(running: Set<Promise<void>>): Promise<void> {
    const candidates = await this.store.batches.candidates(Date.now(), this.servedKeys, maxBatchesPerNode, candidateLimit);
    const weightOf = (plan: string | null) => (plan === null ? 1 : (this.ctx.config.plans.get(plan)?.weight ?? 1));
    // A batch this node works whose lease looks free (a renewal late) is not waiting.
    this.pickup.offer(candidates.filter((c) => !this.working.has(c.id)).map((c) => ({ id: c.id, accountId: c.accountId, weight: weightOf(c.plan), createdAt: c.createdAt })));
    while (!this.stopped && this.working.size < maxBatchesPerNode) {
      const next = this.pickup.next();
      if (!next) break;
      const batch = await this.store.batches.take(next.id, this.owner, Date.now(), this.ctx.config.batches.leaseMs);
      if (!batch || this.stopped) {
        if (batch) await this.store.batches.release(batch.id, this.owner);
        this.pickup.released(next.accountId);
        continue;
      }
      const work: Work = { batch, abort: new AbortController(), reason: null, yielding: false };
      this.working.set(batch.id, work);
      const done = this.work(work)
        .catch((err) => this.log.error({ err, batch: batch.id }, "batch runner: the batch's work failed; another pass takes it up again"))
        .finally(() => {
          this.working.delete(batch.id);
          this.pickup.released(batch.accountId);
          running.delete(done);
          this.wake();
        });
      running.add(done);
    }
    if ([...this.working.values()].some((w) => w.yielding)) return;
    const account = this.pickup.handBack(this.working.size);
    if (account === null) return;
    // Its batch taken up last (the working map keeps the order they were taken in).
    const last = [...this.working.values()].filter((w) => w.batch.accountId === account && !w.reason).at(-1);
    if (!last) return;
    last.yielding = true;
    this.log.info({ batch: last.batch.id, account }, "batch runner: handing a batch back so another account's batch starts");
  }

  private halt(work: Work, reason: Exclude<StopReason, "yield">): void {
    if (work.reason) return;
    work.reason = reason;
    // A cancel or the window's end is the batch's own end: its lines stopped are charged what they used, like a
    // client that leaves. A node stopping or losing the lease runs them again later: they are charged then.
    work.abort.abort(reason === "cancel" || reason === "expire" ? new ClientDisconnected() : new WorkRequeued());
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
      if (work.reason === "shutdown" || (work.reason === null && work.yielding && (await this.store.batches.pendingLines(batch.id, 0, 1)).length > 0)) {
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
        while (this.writes.size >= maxPendingWrites && !work.reason) await Promise.race(this.writes);
        // Issue 42.6: once the batch is stopped (or handed back), no line starts.
        if (work.reason || work.yielding) break;
        const running = this.runLine(work, line, writes).finally(() => inFlight.delete(running));
        inFlight.add(running);
        after = line.line;
      }
      if (work.reason || work.yielding) break;
    }
    await Promise.all(inFlight);
    await Promise.all(writes);
  }

  /** Runs one line and writes its result; a line stopped by a halt before it ran stays pending. */
  private async runLine(work: Work, line: BatchLine, writes: Set<Promise<void>>): Promise<void> {
    const { batch } = work;
    const ended = await this.lines.run(batch, line, work.abort.signal, () => work.reason ?? (work.yielding ? "yield" : null));
    if (!ended) return;
    this.pickup.charge(batch.accountId, ended.tokens);
    const endpoint = endpointOfBatch[batch.endpoint as BatchEndpoint];
    const ok = ended.state === "done";
    const write = this.store.batches
      .complete(batch.id, this.owner, line.line, ended.state, ended.result, ended.counted, usageDeltas(ended.usage))
      .then((written) => {
        if (written === "lease-lost") this.halt(work, "lost");
        else if (written === "written") this.ctx.metrics.batchLines.inc({ endpoint, outcome: ok ? "completed" : "failed" });
      })
      .catch((err) => {
        // Not written: the line stays pending and runs again when the batch is taken up again.
        this.log.warn({ err, batch: batch.id, line: line.line }, "batch runner: could not write a line's result; the batch is given up for another pass");
        this.halt(work, "lost");
      })
      .finally(() => {
        writes.delete(write);
        this.writes.delete(write);
      });
    writes.add(write);
    this.writes.add(write);
  }

  /** Writes the lines left pending as cancelled or expired (to the error file, counted neither way), a page at a time. */
  private async closeRest(work: Work, end: "cancelled" | "expired"): Promise<void> {
    const { batch } = work;
    for (;;) {
      const page = await this.store.batches.pendingLines(batch.id, 0, pageSize);
      if (page.length === 0) return;
      const results = page.map((line) => ({ line: line.line, result: endedLine(line.customId, end, false) }));
      if (!(await this.store.batches.closeLines(batch.id, this.owner, results))) return;
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
    const status = await this.store.batches.finalize(batch, this.owner, end, Date.now(), () => newId("file-"));
    if (status) this.log.info({ batch: batch.id, status }, "batch finished");
  }
}
