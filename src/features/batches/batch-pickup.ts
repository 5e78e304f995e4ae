import { VtcQueue, type QueueEntry, type TenantView } from "../../scheduler/vtc-queue.ts";

/** A batch waiting for a node: its account and the account's plan weight. */
export interface PickupCandidate {
  id: string;
  accountId: string;
  weight: number;
  createdAt: number;
}

/**
 * Issue 42.4: which batch a node starts when one of its seats (the batches it works at once) is free, shared between
 * accounts the way a model's slots are: by weight and by the tokens each account received. The accounting is the
 * scheduler's (scheduler/vtc-queue.ts): a counter per account of the tokens its batch lines were charged on this
 * node divided by its plan's weight, an account that starts waiting again lifted to the lowest counter (idleness
 * banks no credit). A free seat goes first to an account holding fewer seats than its weighted share (the node's
 * seats × its weight ÷ the weights of the accounts holding or waiting), then to the lowest counter; the account's
 * oldest batch. When every seat is taken and an account waits below its share while another holds more than its
 * own, `handBack` names the account that gives one up, so no account's batches wait on another's to end.
 */
export class BatchPickup {
  private readonly queue = new VtcQueue<PickupCandidate>(Number.MAX_SAFE_INTEGER, Number.POSITIVE_INFINITY);
  /** The waiting batches, by id. */
  private readonly waiting = new Map<string, QueueEntry<PickupCandidate>>();

  constructor(private readonly seats: number) {}

  /** The batches waiting for a node as the store has them now: new ones join, those gone (taken, ended) leave. */
  offer(candidates: PickupCandidate[]): void {
    const ids = new Set(candidates.map((c) => c.id));
    for (const [id, entry] of this.waiting) {
      if (ids.has(id)) continue;
      this.queue.remove(entry);
      this.waiting.delete(id);
    }
    for (const c of candidates) if (!this.waiting.has(c.id)) this.waiting.set(c.id, this.queue.push(c.accountId, c.weight, "interactive", c));
  }

  /** The batch for a free seat (see the class comment), counted as held from now; undefined when none waits. */
  next(): PickupCandidate | undefined {
    const tenants = this.tenants();
    let best: Tenant | undefined;
    for (const t of tenants) if (t.waiting > 0 && (!best || before(t, best))) best = t;
    if (!best) return undefined;
    let oldest: QueueEntry<PickupCandidate> | undefined;
    for (const entry of this.waiting.values()) {
      if (entry.account === best.account && (!oldest || entry.item.createdAt < oldest.item.createdAt)) oldest = entry;
    }
    this.queue.remove(oldest!);
    this.waiting.delete(oldest!.item.id);
    this.queue.started(best.account, best.weight);
    return oldest!.item;
  }

  /** A batch held no longer: its work ended, or another node took it first. */
  released(accountId: string): void {
    this.queue.finished(accountId);
  }

  /** Tokens a line of the account's batch was charged. */
  charge(accountId: string, tokens: number): void {
    this.queue.charge(accountId, tokens);
  }

  /**
   * With every seat taken: the account to give one batch back (the one furthest over its share) when an account
   * waits below its own share; null when the seats are shared as they should be.
   */
  handBack(held: number): string | null {
    if (held < this.seats) return null;
    const tenants = this.tenants();
    if (!tenants.some((t) => t.waiting > 0 && t.running < t.share)) return null;
    let over: Tenant | undefined;
    for (const t of tenants) if (t.running > t.share && (!over || t.running / t.weight > over.running / over.weight)) over = t;
    return over?.account ?? null;
  }

  /** Every account holding or waiting, with its share of the seats. */
  private tenants(): Tenant[] {
    const views = this.queue.view();
    const weights = views.reduce((sum, v) => sum + v.weight, 0);
    return views.map((v) => ({ ...v, waiting: v.waiting.interactive + v.waiting.batch, share: Math.max(1, (this.seats * v.weight) / weights) }));
  }
}

type Tenant = Omit<TenantView, "waiting"> & { waiting: number; share: number };

/** Below its share before at or over it; then fewer weighted tokens; then fewer seats per unit of weight. */
function before(a: Tenant, b: Tenant): boolean {
  const underA = a.running < a.share;
  const underB = b.running < b.share;
  if (underA !== underB) return underA;
  if (a.lead !== b.lead) return a.lead < b.lead;
  return a.running / a.weight < b.running / b.weight;
}
