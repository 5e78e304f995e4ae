import { circuitBreaker, CircuitState, ConsecutiveBreaker, handleWhen, type CircuitBreakerPolicy } from "cockatiel";
import type { UpstreamClient } from "./upstream-client.ts";
import { UpstreamUnavailable } from "./upstream-errors.ts";

import type { UpstreamStats } from "../engine.ts";

export type MemberState = UpstreamStats["state"];
export type MemberStats = UpstreamStats;

export interface MemberOptions {
  weight: number;
  maxInFlight: number;
  breakerFailures: number;
  cooldownMs: number;
  unhealthyAfter: number;
  healthyAfter: number;
}

/**
 * One upstream of a pool and what the pool knows of it. Passive health is a cockatiel circuit breaker: after
 * `breakerFailures` consecutive failures (connect errors, 5xx, timeouts: `UpstreamUnavailable`) the upstream is
 * ejected for `cooldownMs`, then one half-open probe request decides. Active health is the periodic GET: after
 * `unhealthyAfter` failed checks it is ejected until `healthyAfter` pass.
 */
export class PoolMember {
  inFlight = 0;
  private readonly breaker: CircuitBreakerPolicy;
  private openedAt = 0;
  private activeOk = true;
  private checksFailed = 0;
  private checksPassed = 0;
  private latency: number | null = null;
  private failureTimes: number[] = [];
  private failuresTotal = 0;
  /** Latencies (seconds) not yet taken by the metrics; bounded so an unscraped node does not grow. */
  private latencies: number[] = [];

  constructor(
    readonly client: UpstreamClient,
    readonly options: MemberOptions,
  ) {
    this.breaker = circuitBreaker(
      handleWhen((err) => err instanceof UpstreamUnavailable),
      { halfOpenAfter: options.cooldownMs, breaker: new ConsecutiveBreaker(options.breakerFailures) },
    );
    this.breaker.onBreak(() => (this.openedAt = Date.now()));
  }

  get state(): MemberState {
    if (!this.activeOk) return "ejected";
    if (this.breaker.state === CircuitState.Open) return Date.now() - this.openedAt >= this.options.cooldownMs ? "probing" : "ejected";
    return this.breaker.state === CircuitState.HalfOpen ? "probing" : "healthy";
  }

  /** Whether a request may go here now: healthy with room, or due for its one half-open probe. */
  available(): boolean {
    // "probing" while half-open means its one probe is already running.
    return this.inFlight < this.options.maxInFlight && this.state !== "ejected" && this.breaker.state !== CircuitState.HalfOpen;
  }

  /** Milliseconds until this upstream may be tried again (0 when it may now). */
  cooldownLeft(): number {
    if (this.breaker.state !== CircuitState.Open) return 0;
    return Math.max(0, this.openedAt + this.options.cooldownMs - Date.now());
  }

  /** Runs one attempt through the breaker, timing it; an open breaker throws `UpstreamUnavailable`. */
  async attempt<T>(fn: () => Promise<T>): Promise<T> {
    const started = Date.now();
    try {
      const value = await this.breaker.execute(fn);
      const ms = Date.now() - started;
      this.latency = this.latency === null ? ms : 0.8 * this.latency + 0.2 * ms;
      if (this.latencies.length < 10_000) this.latencies.push(ms / 1000);
      return value;
    } catch (err) {
      if (err instanceof UpstreamUnavailable) this.noteFailure();
      if (err instanceof Error && (err.name === "BrokenCircuitError" || err.name === "IsolatedCircuitError")) {
        throw new UpstreamUnavailable("The model's engine is ejected after repeated failures.", null, Math.max(1000, this.cooldownLeft()), "overloaded", `${this.client.origin} is ejected`);
      }
      throw err;
    }
  }

  /** The result of one active health check. */
  checked(ok: boolean): void {
    if (ok) {
      this.checksFailed = 0;
      if (!this.activeOk && ++this.checksPassed >= this.options.healthyAfter) this.activeOk = true;
    } else {
      this.checksPassed = 0;
      this.noteFailure();
      if (++this.checksFailed >= this.options.unhealthyAfter) this.activeOk = false;
    }
  }

  stats(): MemberStats {
    const minuteAgo = Date.now() - 60_000;
    this.failureTimes = this.failureTimes.filter((t) => t > minuteAgo);
    return {
      url: this.client.target.url,
      state: this.state,
      inFlight: this.inFlight,
      maxInFlight: this.options.maxInFlight,
      weight: this.options.weight,
      recentFailures: this.failureTimes.length,
      latencyMs: this.latency === null ? null : Math.round(this.latency * 10) / 10,
      failuresTotal: this.failuresTotal,
    };
  }

  takeLatencies(): number[] {
    const taken = this.latencies;
    this.latencies = [];
    return taken;
  }

  private noteFailure(): void {
    this.failuresTotal++;
    this.failureTimes.push(Date.now());
    if (this.failureTimes.length > 1000) this.failureTimes.shift();
  }
}
