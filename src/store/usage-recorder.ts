import { randomUUID } from "node:crypto";
import { utcDay } from "../config/periods.ts";
import type { FastifyBaseLogger } from "fastify";
import type { UsageEvent, UsageSink } from "./usage-sink.ts";
import type { Store } from "./store.ts";
import { isStoreUnreachable } from "./store-health.ts";
import type { UsageDelta } from "./usage.repo.ts";
import { UsageJournal } from "./usage-journal.ts";

const flushEveryMs = 2_000;
const flushAtEvents = 500;
/**
 * Distinct (key, model, endpoint, day) rows held while the database is unreachable. Rows are sums, so this bounds
 * memory, not requests: 100,000 rows is a day of 1,000 busy keys on 25 models and 4 endpoints.
 */
const maxPendingRows = 100_000;

function rowId(d: { keyId: string; model: string; endpoint: string; day: string }): string {
  return `${d.keyId}\u0000${d.model}\u0000${d.endpoint}\u0000${d.day}`;
}

function emptyDelta(event: UsageEvent, day: string): UsageDelta {
  return { keyId: event.keyId, accountId: event.accountId, model: event.model, endpoint: event.endpoint, day, requests: 0, promptTokens: 0, completionTokens: 0, batchRequests: 0, batchPromptTokens: 0, batchCompletionTokens: 0, cachedRequests: 0 };
}

function addEvent(delta: UsageDelta, event: UsageEvent): void {
  const prompt = Math.max(0, Math.round(event.promptTokens || 0));
  const completion = Math.max(0, Math.round(event.completionTokens || 0));
  delta.requests += 1;
  delta.promptTokens += prompt;
  delta.completionTokens += completion;
  if (event.batch) {
    delta.batchRequests = (delta.batchRequests ?? 0) + 1;
    delta.batchPromptTokens = (delta.batchPromptTokens ?? 0) + prompt;
    delta.batchCompletionTokens = (delta.batchCompletionTokens ?? 0) + completion;
  }
  if (event.cached) delta.cachedRequests = (delta.cachedRequests ?? 0) + 1;
}

/**
 * Events as the rows they add to, on their own `day` or else `day` (a batch line's usage, written with its result:
 * batch-runner.ts; a journal's batch left by a killed process).
 */
export function usageDeltas(events: UsageEvent[], day = utcDay()): UsageDelta[] {
  const rows = new Map<string, UsageDelta>();
  for (const event of events) {
    const id = rowId({ ...event, day: event.day ?? day });
    const delta = rows.get(id) ?? emptyDelta(event, event.day ?? day);
    rows.set(id, delta);
    addEvent(delta, event);
  }
  return [...rows.values()];
}

/**
 * Sums usage in memory per key, model, endpoint and day, and writes the sums in one transaction every couple of
 * seconds (or sooner under load), never on the request's path. flush() writes what is pending (shutdown, tests).
 *
 * A batch whose write failed may still have committed (the acknowledgement lost with the connection), so it is
 * written again as it was, under the same id, which the database counts once (UsageRepo.add); new usage meanwhile
 * sums into the next batch. At most one batch waits for its acknowledgement, so memory stays bounded.
 *
 * With a journal (the server's: `<dataDir>/usage-journal/`), each event is appended to a file as it is recorded and
 * each batch's file removed once written, so a process killed with -9 loses nothing: the next server to start on
 * that data dir writes what it left (usage-journal.ts).
 */
export class UsageRecorder implements UsageSink {
  private pending = new Map<string, UsageDelta>();
  /** A batch written but not acknowledged, retried before anything newer. */
  private unacknowledged: { id: string; deltas: UsageDelta[] } | null = null;
  private events = 0;
  private writing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private readonly journal: UsageJournal | null = null;
  /** Batches a killed process left in the journal, written before anything newer. */
  private recovered: { id: string; deltas: UsageDelta[] }[] = [];

  constructor(
    private readonly store: Store,
    private readonly log: FastifyBaseLogger,
    journalDir: string | null = null,
  ) {
    if (journalDir) {
      const { journal, recovered } = UsageJournal.open(journalDir);
      this.journal = journal;
      this.recovered = recovered.map((r) => ({ id: r.id, deltas: usageDeltas(r.events) }));
      if (recovered.length > 0) log.warn({ batches: recovered.length, events: recovered.reduce((n, r) => n + r.events.length, 0) }, "usage left by a process that stopped without writing it: writing it now");
    }
    this.timer = setInterval(() => void this.flush(), flushEveryMs);
    this.timer.unref();
    if (this.recovered.length > 0) void this.flush();
  }

  /** Usage that could not be kept because the buffer was full during an outage. */
  dropped = 0;

  record(event: UsageEvent): void {
    const day = event.day ?? utcDay();
    const id = rowId({ ...event, day });
    let delta = this.pending.get(id);
    if (!delta) {
      if (this.pending.size + (this.unacknowledged?.deltas.length ?? 0) >= maxPendingRows) {
        if (this.dropped++ === 0) this.log.error({ rows: maxPendingRows }, "usage buffer full while the database is unreachable; dropping new usage rows");
        return;
      }
      delta = emptyDelta(event, day);
      this.pending.set(id, delta);
    }
    addEvent(delta, event);
    this.journal?.append({ ...event, day });
    if (++this.events >= flushAtEvents) void this.flush();
  }

  /** Writes everything recorded so far; calls are serialized so batches never interleave. */
  flush(): Promise<void> {
    this.writing = this.writing.then(() => this.writeBatch());
    return this.writing;
  }

  /** Final flush; stops the timer. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    // What the database could not take stays in the journal for the next start.
    if (this.pending.size === 0 && !this.unacknowledged) this.journal?.close();
  }

  private async writeBatch(): Promise<void> {
    while (this.recovered.length > 0) {
      if (!(await this.write(this.recovered[0]!))) return;
      this.recovered.shift();
    }
    if (this.unacknowledged && !(await this.write(this.unacknowledged))) return;
    this.unacknowledged = null;
    if (this.pending.size === 0) return;
    const id = randomUUID();
    this.journal?.seal(id);
    this.unacknowledged = { id, deltas: [...this.pending.values()] };
    this.pending = new Map();
    this.events = 0;
    if (await this.write(this.unacknowledged)) this.unacknowledged = null;
  }

  /** Whether the batch is acknowledged; if not, it stays `unacknowledged` for the next flush. */
  private async write(batch: { id: string; deltas: UsageDelta[] }): Promise<boolean> {
    try {
      await this.store.health.run(() => this.store.usage.add(batch.id, batch.deltas));
    } catch (err) {
      // An unreachable database is logged once by the store's health; the batch waits for it in memory.
      if (!isStoreUnreachable(err)) this.log.error({ err, rows: batch.deltas.length }, "could not write usage; retrying the same batch at the next flush");
      return false;
    }
    this.journal?.written(batch.id);
    this.dropped = 0;
    return true;
  }
}
