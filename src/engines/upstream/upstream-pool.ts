import { setTimeout as sleep } from "node:timers/promises";
import { ExponentialBackoff, type IBackoff } from "cockatiel";
import type { AffinityPlacements } from "../engine.ts";
import { AffinityRing, placeBounded } from "./affinity-ring.ts";
import type { PoolMember, MemberStats } from "./pool-member.ts";
import { UpstreamUnavailable } from "./upstream-errors.ts";

/** Conversations remembered where they last spilled, per pool (about 100 bytes each). */
const SETTLED_MAX = 100_000;

export type Routing = "least-outstanding" | "round-robin" | "weighted" | "prefix-affinity";

export interface PoolOptions {
  routing: Routing;
  /** Attempts per request, the first included. */
  attempts: number;
  /** The most a request waits between attempts, in total. */
  maxWaitMs: number;
  healthIntervalMs: number;
  /** Path of the health check, against the upstream's origin. */
  healthPath: string;
  /** prefix-affinity: no upstream takes more than ceil(loadFactor × the mean in flight), per unit of weight. */
  loadFactor: number;
}

/** An upstream held for one request: release it exactly once, when the request is over. */
export interface PoolLease<T> {
  value: T;
  member: PoolMember;
  release(): void;
}

/**
 * A model's upstreams as one pool: routing (least outstanding requests per weight, weighted round robin, round
 * robin, or prefix affinity: the conversation's key on a consistent-hash ring with bounded loads, affinity-ring.ts;
 * never above an upstream's maxInFlight), passive and active health (PoolMember), and retries by the §7 client rules:
 * only `UpstreamUnavailable` (429, 5xx, network errors, timeouts) is retried, on another upstream at once when there
 * is one, else on the same after an exponential backoff with jitter and at least its Retry-After, within `attempts`
 * and `maxWaitMs`. 4xx answers are never retried, and a request is never retried
 * once its establish step has succeeded (callers put everything before their first byte to the client there).
 */
export class UpstreamPool {
  private next = 0;
  private readonly current = new Map<PoolMember, number>();
  private healthTimer: NodeJS.Timeout | null = null;
  private readonly ring: AffinityRing<PoolMember> | null = null;
  private readonly placements = new Map<PoolMember, AffinityPlacements>();
  /** Conversations (keys) whose last turn ran past their ring owner: where that was, oldest first, at most SETTLED_MAX. */
  private readonly settled = new Map<number, PoolMember>();
  /** What the last pickAffine decided to settle its key at, read by acquire right after the (synchronous) pick. */
  private settleAt: PoolMember | null = null;

  constructor(
    readonly members: PoolMember[],
    private readonly options: PoolOptions,
  ) {
    if (options.routing === "prefix-affinity") {
      this.ring = new AffinityRing(members, (m) => m.client.target.url, (m) => m.options.weight);
      for (const m of members) this.placements.set(m, { owner: 0, spill: 0, retry: 0 });
    }
  }

  startHealthChecks(): void {
    if (this.healthTimer || this.options.healthIntervalMs <= 0) return;
    this.healthTimer = setInterval(() => void this.checkAll(), this.options.healthIntervalMs);
    this.healthTimer.unref();
  }

  stop(): void {
    if (this.healthTimer) clearInterval(this.healthTimer);
    this.healthTimer = null;
  }

  stats(): MemberStats[] {
    return this.members.map((m) => {
      const placed = this.placements.get(m);
      return placed ? { ...m.stats(), affinity: { ...placed } } : m.stats();
    });
  }

  /**
   * Picks an upstream, runs `establish` on it, and retries elsewhere (or later) while the failure is retryable.
   * `key` (a conversation's point on the ring, affinity-key.ts) places the request on prefix-affinity pools; a
   * retry goes on clockwise from the upstreams already tried. Other pools, and calls without a key, ignore it.
   */
  async acquire<T>(signal: AbortSignal, establish: (member: PoolMember) => Promise<T>, key: number | null = null): Promise<PoolLease<T>> {
    const tried = new Set<PoolMember>();
    // Made at the first wait only: most calls succeed at once.
    let backoff: IBackoff<unknown> | null = null;
    let waited = 0;
    let last: UpstreamUnavailable | null = null;
    for (let attempt = 1; ; attempt++) {
      signal.throwIfAborted();
      let member = this.pick(tried, key);
      let settleAt = this.settleAt;
      if (!member && last) {
        // Every upstream failed once: the same again, after the backoff and at least the upstream's Retry-After.
        backoff ??= new ExponentialBackoff({ initialDelay: 100, maxDelay: this.options.maxWaitMs }).next();
        const wait = Math.max(backoff.duration, last.retryAfterMs ?? 0);
        if (waited + wait > this.options.maxWaitMs) throw last;
        await sleep(wait, undefined, { signal });
        waited += wait;
        backoff = backoff.next(undefined);
        member = this.pick(new Set(), key, true);
        settleAt = this.settleAt;
      }
      if (!member) throw last ?? this.noneAvailable();
      member.inFlight++;
      try {
        const value = await member.attempt(() => establish(member));
        if (this.ring && key !== null) this.settle(key, settleAt);
        let released = false;
        return {
          value,
          member,
          release: () => {
            if (released) return;
            released = true;
            member.inFlight--;
          },
        };
      } catch (err) {
        member.inFlight--;
        if (!(err instanceof UpstreamUnavailable) || signal.aborted) throw err;
        last = err;
        tried.add(member);
        if (attempt >= this.options.attempts) throw err;
      }
    }
  }

  /** Every upstream is ejected or full: 503 with the shortest cooldown left. */
  private noneAvailable(): UpstreamUnavailable {
    const cooldowns = this.members.map((m) => m.cooldownLeft()).filter((ms) => ms > 0);
    const retryAfter = cooldowns.length ? Math.min(...cooldowns) : 1000;
    return new UpstreamUnavailable("Every upstream of this model is down, ejected or at its maxInFlight.", null, Math.max(1000, retryAfter));
  }

  private pick(exclude: Set<PoolMember>, key: number | null, again = false): PoolMember | null {
    if (this.ring && key !== null) return this.pickAffine(key, exclude, again || exclude.size > 0);
    const candidates = this.members.filter((m) => !exclude.has(m) && m.available());
    if (candidates.length === 0) return null;
    switch (this.options.routing) {
      case "round-robin":
        return candidates[this.next++ % candidates.length];
      case "weighted":
        return this.smoothWeighted(candidates);
      default: {
        // Least outstanding per unit of weight; ties rotate so equal upstreams share the load.
        const start = this.next++;
        let best: PoolMember | null = null;
        let bestLoad = Infinity;
        for (let i = 0; i < candidates.length; i++) {
          const m = candidates[(start + i) % candidates.length];
          const load = (m.inFlight + 1) / m.options.weight;
          if (load < bestLoad) [best, bestLoad] = [m, load];
        }
        return best;
      }
    }
  }

  /**
   * The upstream that holds the conversation's cache (where it last spilled, else its ring owner), or the next one
   * clockwise with room under the load bound; counted by why.
   */
  private pickAffine(key: number, exclude: Set<PoolMember>, retrying: boolean): PoolMember | null {
    const view = {
      up: (m: PoolMember) => m.state !== "ejected",
      mayTake: (m: PoolMember) => !exclude.has(m) && m.available(),
      inFlight: (m: PoolMember) => m.inFlight,
      weight: (m: PoolMember) => m.options.weight,
    };
    const settled = this.settled.get(key) ?? null;
    const placed = placeBounded(this.ring!, key, this.options.loadFactor, view, settled);
    this.settleAt = null;
    if (!placed) return null;
    this.placements.get(placed.member)![retrying ? "retry" : placed.placement]++;
    // Settled where it runs unless that is its ring owner (the first upstream up on its ring).
    if (retrying || placed.placement === "spill" || placed.member === settled) this.settleAt = placed.member;
    return placed.member;
  }

  /**
   * Where a conversation's turn ran, once it has: remembered when that is past its ring owner (a spill, a retry, or
   * where it had settled before), forgotten when it is the owner again. Only the bound and failed attempts settle a
   * key elsewhere: an upstream that is ejected hands its keys to the next one as their owner, so they go back when it
   * returns.
   */
  private settle(key: number, at: PoolMember | null): void {
    this.settled.delete(key);
    if (at === null) return;
    this.settled.set(key, at);
    if (this.settled.size > SETTLED_MAX) this.settled.delete(this.settled.keys().next().value!);
  }

  /** Smooth weighted round robin: over any window, each upstream gets its share of weight, interleaved. */
  private smoothWeighted(candidates: PoolMember[]): PoolMember {
    const total = candidates.reduce((sum, m) => sum + m.options.weight, 0);
    let best = candidates[0];
    for (const m of candidates) {
      const value = (this.current.get(m) ?? 0) + m.options.weight;
      this.current.set(m, value);
      if (value > (this.current.get(best) ?? 0)) best = m;
    }
    this.current.set(best, (this.current.get(best) ?? 0) - total);
    return best;
  }

  private async checkAll(): Promise<void> {
    const timeout = Math.min(this.options.healthIntervalMs, 5000);
    await Promise.all(
      this.members.map(async (m) => {
        try {
          const response = await m.client.send({ method: "GET", path: this.options.healthPath, root: true, signal: AbortSignal.timeout(timeout), healthCheck: true });
          await response.body.dump();
          m.checked(true);
        } catch {
          m.checked(false);
        }
      }),
    );
  }
}
