/**
 * The wait queue of one model, shared between accounts by the service they received (VTC: Sheng et al.,
 * "Fairness in Serving Large Language Models", OSDI '24).
 *
 * Every account has a virtual token counter: the tokens served to it (prompt tokens at admission, completion
 * tokens as they are generated) divided by its plan's weight. When a slot frees, it goes to the waiting account
 * with the lowest counter (ties: the one served least recently), so over time backlogged accounts receive service
 * in proportion to their weights, whatever the length or number of their requests. An account that starts
 * waiting again is lifted to the lowest counter of the accounts already waiting (or, with nobody waiting, to the
 * counter of the account last served): idle time banks no credit. Work-conserving: a slot is never left idle
 * while anyone waits.
 *
 * Priorities: `interactive` waiters always go before `batch` waiters, except a batch waiter older than the
 * model's `batchMaxWait`, which goes before everyone (oldest first), so batch work is never starved for good.
 *
 * Shares of the running requests (engines that pause generations, see `overShare` and `preempts`): an account's
 * share of a model's `parallel` capacity is its weight's part of the weights of the accounts running or waiting,
 * and at least one request. An account within its share is favoured (others over their share pause for it) until
 * its counter runs `burstTokens` ahead of the lowest counter of the accounts running: a light account gets its
 * answers at full speed, and one that keeps generating goes back to sharing steps until the others catch up.
 *
 * The light-account reserve (engines that start nothing beyond `parallel`, with `parallel > 1`): while an account that
 * sent interactive work within the last `reserveWindowMs` has nothing running or waiting (such accounts count among
 * those sharing), the last free slot is held back from the accounts running at least their share, so the light
 * account's next request starts at once (the runner lets it take the slot) instead of waiting for one to end. While
 * it runs, nothing is held. An account never gets less than its share from it, and a batch waiter past its age
 * bound takes the slot all the same.
 *
 * Push-out: when the queue is full and the arriving account holds fewer waiters than its weighted share of the
 * queue, the newest waiter of the account most over its share is refused instead (`pushOutFor`).
 */
export type Priority = "interactive" | "batch";

/** How long an account that sent interactive work counts as about to send more, for the light-account reserve. */
const reserveWindowMs = 10_000;

/** How far ahead in weighted service an account within its share stays favoured (about one long answer). */
export const burstTokens = 256;

export const priorities: readonly Priority[] = ["interactive", "batch"];

export interface QueueEntry<T> {
  readonly account: string;
  readonly priority: Priority;
  /** performance.now() when it started waiting. */
  readonly enqueuedAt: number;
  readonly seq: number;
  readonly item: T;
}

interface Tenant<T> {
  weight: number;
  /** Weighted service received (tokens / weight). */
  counter: number;
  waiting: QueueEntry<T>[];
  /** Leases held (running requests). */
  running: number;
  /** Sequence number of the last time it was given a slot, for ties. */
  lastServed: number;
  /** When it last asked for a slot for interactive work (the queue's clock). */
  interactiveAt: number;
}

/** What the light-account reserve needs of the accounts, taken once per decision. */
interface ReserveView {
  /** The weights of the accounts running, waiting, or that sent interactive work within the window. */
  weights: number;
  /** The earliest a light account's window closes. */
  lapsesAt: number;
}

/** One account's place in the queue, for the admin API. */
export interface TenantView {
  account: string;
  weight: number;
  waiting: { interactive: number; batch: number };
  running: number;
  /** The account's virtual counter minus the lowest counter of the accounts waiting or running. */
  lead: number;
}

export class VtcQueue<T> {
  private readonly tenants = new Map<string, Tenant<T>>();
  private count = 0;
  private seq = 0;
  /** The counter of the account served last: where an account re-enters when nobody waits. */
  private floor = 0;

  constructor(
    private readonly capacity: number,
    private readonly batchMaxWaitMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get size(): number {
    return this.count;
  }

  get full(): boolean {
    return this.count >= this.capacity;
  }

  /** Waiters of one account (both priorities). */
  waitingOf(account: string): number {
    return this.tenants.get(account)?.waiting.length ?? 0;
  }

  /** Adds a waiter; an account that was not waiting re-enters at the current minimum (no banked credit). */
  push(account: string, weight: number, priority: Priority, item: T): QueueEntry<T> {
    const tenant = this.tenant(account, weight);
    if (tenant.waiting.length === 0) tenant.counter = Math.max(tenant.counter, this.minWaitingCounter() ?? this.floor);
    const entry: QueueEntry<T> = { account, priority, enqueuedAt: this.now(), seq: ++this.seq, item };
    if (priority === "interactive") tenant.interactiveAt = entry.enqueuedAt;
    tenant.waiting.push(entry);
    this.count++;
    return entry;
  }

  remove(entry: QueueEntry<T>): boolean {
    const tenant = this.tenants.get(entry.account);
    const at = tenant ? tenant.waiting.indexOf(entry) : -1;
    if (!tenant || at < 0) return false;
    tenant.waiting.splice(at, 1);
    this.count--;
    return true;
  }

  /**
   * Takes the waiter that gets the next slot (see the class comment), and counts it as running; with `allowBatch`
   * false, batch waiters are considered only once past their age bound, which no headroom holds back. With
   * `lastOf` (the slot is the last free one of that many, and the light-account reserve applies), accounts the
   * reserve holds it from are passed over. Undefined when no waiter may start.
   */
  shift(allowBatch = true, lastOf?: number): QueueEntry<T> | undefined {
    if (this.count === 0) return undefined;
    const now = this.now();
    const reserve = lastOf === undefined ? null : this.reserveView(now);
    let aged: QueueEntry<T> | undefined;
    let best: { tenant: Tenant<T>; entry: QueueEntry<T>; batch: boolean } | undefined;
    for (const tenant of this.tenants.values()) {
      const interactive = tenant.waiting.find((e) => e.priority === "interactive");
      const batch = tenant.waiting.find((e) => e.priority === "batch");
      if (batch && now - batch.enqueuedAt >= this.batchMaxWaitMs && (!aged || batch.seq < aged.seq)) aged = batch;
      if (reserve && this.heldFrom(tenant, reserve, lastOf!)) continue;
      const entry = interactive ?? (allowBatch ? batch : undefined);
      if (!entry) continue;
      const candidate = { tenant, entry, batch: !interactive };
      if (!best || better(candidate, best)) best = candidate;
    }
    const chosen = aged ?? best?.entry;
    if (!chosen) return undefined;
    this.remove(chosen);
    this.started(chosen.account);
    return chosen;
  }

  /** Whether the light-account reserve holds the last free slot of `capacity` back from `account` (class comment). */
  holdsLastSlotFrom(account: string, capacity: number): boolean {
    const tenant = this.tenants.get(account);
    const reserve = this.reserveView(this.now());
    return tenant !== undefined && reserve !== null && this.heldFrom(tenant, reserve, capacity);
  }

  /** When the light-account reserve lapses unless a light account comes back (null when nothing is reserved). */
  reserveLapsesAt(): number | null {
    return this.reserveView(this.now())?.lapsesAt ?? null;
  }

  /** When (on the queue's clock) the oldest batch waiter passes its age bound; null when no batch work waits. */
  batchDueAt(): number | null {
    let oldest: number | null = null;
    for (const t of this.tenants.values()) {
      const batch = t.waiting.find((e) => e.priority === "batch");
      if (batch && (oldest === null || batch.enqueuedAt < oldest)) oldest = batch.enqueuedAt;
    }
    return oldest === null ? null : oldest + this.batchMaxWaitMs;
  }

  /** Counts a lease granted without waiting (a free slot and an empty queue), or given to a waiter. */
  started(account: string, weight?: number, priority?: Priority): void {
    const tenant = this.tenant(account, weight);
    if (tenant.waiting.length === 0 && tenant.running === 0) tenant.counter = Math.max(tenant.counter, this.minWaitingCounter() ?? this.floor);
    tenant.running++;
    tenant.lastServed = ++this.seq;
    if (priority === "interactive") tenant.interactiveAt = this.now();
    this.floor = Math.max(this.floor, tenant.counter);
  }

  finished(account: string): void {
    const tenant = this.tenants.get(account);
    if (!tenant) return;
    tenant.running--;
    this.prune();
  }

  /** Service received: `tokens` divided by the account's weight. */
  charge(account: string, tokens: number): void {
    const tenant = this.tenants.get(account);
    if (tenant && tokens > 0) tenant.counter += tokens / tenant.weight;
  }

  /** Whether the account runs more requests than its weighted share of `capacity`. */
  overShare(account: string, capacity: number): boolean {
    const tenant = this.tenants.get(account);
    return tenant !== undefined && tenant.running > this.shareOf(tenant, capacity);
  }

  /** Whether the account is within its share and within its burst of service ahead of the accounts running. */
  favoured(account: string, capacity: number): boolean {
    const tenant = this.tenants.get(account);
    if (!tenant || this.overShare(account, capacity)) return false;
    let lowest = tenant.counter;
    for (const t of this.tenants.values()) if (t.running > 0 && t.counter < lowest) lowest = t.counter;
    return tenant.counter - lowest <= burstTokens;
  }

  /**
   * Whether a new request of the account, started beyond `capacity`, would keep it within its share while another
   * account runs over its own (whose generations then pause for it). Never for an account that has waiters.
   */
  preempts(account: string, weight: number, capacity: number): boolean {
    const tenant = this.tenants.get(account);
    return !(tenant && tenant.waiting.length > 0) && this.wouldPreempt(account, tenant, weight, capacity);
  }

  /** The oldest interactive waiter whose account would preempt (when a place beyond `capacity` frees). */
  shiftPreempting(capacity: number): QueueEntry<T> | undefined {
    let chosen: QueueEntry<T> | undefined;
    for (const [account, t] of this.tenants) {
      const entry = t.waiting.find((e) => e.priority === "interactive");
      if (entry && (!chosen || entry.seq < chosen.seq) && this.wouldPreempt(account, t, t.weight, capacity)) chosen = entry;
    }
    if (!chosen) return undefined;
    this.remove(chosen);
    this.started(chosen.account);
    return chosen;
  }

  private wouldPreempt(account: string, tenant: Tenant<T> | undefined, weight: number, capacity: number): boolean {
    const active = tenant !== undefined && (tenant.running > 0 || tenant.waiting.length > 0);
    const weights = this.activeWeights() + (active ? 0 : weight);
    if ((tenant?.running ?? 0) + 1 > Math.max(1, (capacity * weight) / weights)) return false;
    for (const [id, t] of this.tenants) if (id !== account && t.running > this.shareOf(t, capacity, weights)) return true;
    return false;
  }

  /**
   * The weights that share the model, when a light account is about (one that sent interactive work within the
   * window and has nothing running or waiting); else null.
   */
  private reserveView(now: number): ReserveView | null {
    const view: ReserveView = { weights: 0, lapsesAt: Infinity };
    for (const t of this.tenants.values()) {
      const busy = t.running > 0 || t.waiting.length > 0;
      const recent = now - t.interactiveAt < reserveWindowMs;
      if (busy || recent) view.weights += t.weight;
      if (recent && !busy) view.lapsesAt = Math.min(view.lapsesAt, t.interactiveAt + reserveWindowMs);
    }
    return view.lapsesAt < Infinity ? view : null;
  }

  /** Whether the account runs at least its share of `capacity` while a light account is about (never a light one). */
  private heldFrom(tenant: Tenant<T>, reserve: ReserveView, capacity: number): boolean {
    return tenant.running >= shareOf(tenant.weight, capacity, reserve.weights);
  }

  private activeWeights(): number {
    let weights = 0;
    for (const t of this.tenants.values()) if (t.running > 0 || t.waiting.length > 0) weights += t.weight;
    return weights;
  }

  private shareOf(tenant: Tenant<T>, capacity: number, weights = this.activeWeights()): number {
    return shareOf(tenant.weight, capacity, weights);
  }

  /**
   * When the queue is full: the waiter to refuse so that `account` may wait, or null when `account` itself is the
   * one to refuse. An account below its weighted share of the queue (capacity × its weight ÷ the weights of the
   * accounts waiting, itself included) pushes out the newest waiter of the account holding the most per unit of
   * weight, provided that account would still hold more than the newcomer after the swap (with whole requests, a
   * swap between accounts at their share would only churn). An account at or over its share is refused.
   */
  pushOutFor(account: string, weight: number): QueueEntry<T> | null {
    if (this.capacity === 0) return null;
    const others = [...this.tenants.entries()].filter(([id, t]) => t.waiting.length > 0 && id !== account).map(([, t]) => t);
    const totalWeight = others.reduce((sum, t) => sum + t.weight, weight);
    const own = this.waitingOf(account);
    if (own >= (this.capacity * weight) / totalWeight) return null;
    let heaviest: Tenant<T> | null = null;
    for (const t of others) if (!heaviest || t.waiting.length / t.weight > heaviest.waiting.length / heaviest.weight) heaviest = t;
    if (!heaviest || heaviest.waiting.length / heaviest.weight <= (own + 1) / weight) return null;
    // The newest waiter; a batch one first, when the account has any.
    const batch = heaviest.waiting.filter((e) => e.priority === "batch").at(-1);
    return batch ?? heaviest.waiting.at(-1)!;
  }

  /**
   * About how many waiters would start before a new interactive request of `account`: its own, and of every
   * other account as many as the weights give them while this account's go through (the counters roughly
   * level), plus the batch waiters past their age bound.
   */
  aheadOf(account: string, weight: number): number {
    const own = this.waitingOf(account);
    const now = this.now();
    let ahead = own;
    for (const [id, t] of this.tenants) {
      if (id === account) continue;
      const interactive = t.waiting.filter((e) => e.priority === "interactive").length;
      ahead += Math.min(interactive, Math.ceil(((own + 1) * t.weight) / weight));
      ahead += t.waiting.filter((e) => e.priority === "batch" && now - e.enqueuedAt >= this.batchMaxWaitMs).length;
    }
    return ahead;
  }

  /** Every account waiting or running, for the admin API. */
  view(): TenantView[] {
    const active = [...this.tenants.entries()].filter(([, t]) => t.waiting.length > 0 || t.running > 0);
    const min = Math.min(...active.map(([, t]) => t.counter));
    return active.map(([account, t]) => ({
      account,
      weight: t.weight,
      waiting: { interactive: t.waiting.filter((e) => e.priority === "interactive").length, batch: t.waiting.filter((e) => e.priority === "batch").length },
      running: t.running,
      lead: t.counter - min,
    }));
  }

  private tenant(account: string, weight?: number): Tenant<T> {
    let tenant = this.tenants.get(account);
    if (!tenant) {
      tenant = { weight: weight ?? 1, counter: this.minWaitingCounter() ?? this.floor, waiting: [], running: 0, lastServed: 0, interactiveAt: -Infinity };
      this.tenants.set(account, tenant);
    } else if (weight !== undefined) {
      tenant.weight = weight;
    }
    return tenant;
  }

  private minWaitingCounter(): number | null {
    let min: number | null = null;
    for (const t of this.tenants.values()) if (t.waiting.length > 0 && (min === null || t.counter < min)) min = t.counter;
    return min;
  }

  /**
   * Forgets idle accounts that would re-enter at the current minimum anyway (they owe nothing), once the light-account
   * reserve no longer counts them.
   */
  private prune(): void {
    if (this.tenants.size < 64) return;
    const floor = this.minWaitingCounter() ?? this.floor;
    const now = this.now();
    for (const [id, t] of this.tenants) {
      if (t.waiting.length === 0 && t.running === 0 && t.counter <= floor && now - t.interactiveAt >= reserveWindowMs) this.tenants.delete(id);
    }
  }
}

/** An account's share of `capacity`: its weight's part of `weights`, and at least one request. */
function shareOf(weight: number, capacity: number, weights: number): number {
  return weights > 0 ? Math.max(1, (capacity * weight) / weights) : capacity;
}

/** Interactive before batch; then the lower counter; then the account served least recently. */
function better<T>(a: { tenant: Tenant<T>; batch: boolean }, b: { tenant: Tenant<T>; batch: boolean }): boolean {
  if (a.batch !== b.batch) return !a.batch;
  if (a.tenant.counter !== b.tenant.counter) return a.tenant.counter < b.tenant.counter;
  return a.tenant.lastServed < b.tenant.lastServed;
}
