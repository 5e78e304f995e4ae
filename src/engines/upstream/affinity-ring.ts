import { createHash } from "node:crypto";

/** Points on the ring per unit of weight: enough that each upstream's share of keys is within a few % of its weight's. */
const POINTS_PER_WEIGHT = 160;
/** At most this many points for one upstream, whatever the weights' spread. */
const MAX_POINTS = POINTS_PER_WEIGHT * 64;

/** A 32-bit point on the ring for a string (a member's id and point number). */
export function ringPoint(text: string): number {
  return createHash("sha256").update(text).digest().readUInt32BE(0);
}

/**
 * A consistent-hash ring (Karger et al.): each member holds points in proportion to its weight, placed by hashing
 * its id, so the ring is the same on every front replica and across restarts. A key belongs to the first member
 * clockwise from the key's own point; skipping a member that is down moves only the keys it held, to the members
 * that follow it, and they come back when it does.
 */
export class AffinityRing<M> {
  private readonly points: Uint32Array;
  /** The member of each point, in ring order. */
  private readonly owners: M[];
  readonly size: number;

  constructor(members: readonly M[], id: (m: M) => string, weight: (m: M) => number) {
    const minWeight = Math.min(...members.map(weight));
    const all: { point: number; member: M; order: number }[] = [];
    members.forEach((member, index) => {
      const count = Math.min(MAX_POINTS, Math.max(1, Math.round((POINTS_PER_WEIGHT * weight(member)) / minWeight)));
      for (let i = 0; i < count; i++) all.push({ point: ringPoint(`${id(member)}#${i}`), member, order: index });
    });
    // Ties (two points on one value) go to the member listed first, so every replica orders them alike.
    all.sort((a, b) => a.point - b.point || a.order - b.order);
    this.points = Uint32Array.from(all.map((p) => p.point));
    this.owners = all.map((p) => p.member);
    this.size = members.length;
  }

  /** Every member once, in ring order from the key's point clockwise: the owner first, then where its keys spill. */
  *walk(key: number): Generator<M> {
    const seen = new Set<M>();
    const n = this.points.length;
    for (let i = 0, at = this.firstAtOrAfter(key); i < n && seen.size < this.size; i++, at = (at + 1) % n) {
      const member = this.owners[at];
      if (seen.has(member)) continue;
      seen.add(member);
      yield member;
    }
  }

  private firstAtOrAfter(key: number): number {
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid] < key) lo = mid + 1;
      else hi = mid;
    }
    return lo === this.points.length ? 0 : lo;
  }
}

/** What the placement needs to know of a member. */
export interface LoadView<M> {
  /** Up (not ejected): it owns its keys. A member that is down is skipped as if it had left the ring. */
  up(m: M): boolean;
  /** It may take a request now (up, under its maxInFlight, not excluded by an earlier attempt). */
  mayTake(m: M): boolean;
  inFlight(m: M): number;
  weight(m: M): number;
}

export type Placement = "owner" | "spill";

/**
 * Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, 2018; Envoy's `hash_balance_factor`,
 * HAProxy's `hash-balance-factor`): a member takes the request only while its in flight stays within
 * ceil(loadFactor × the mean in flight, the new request included) scaled by its weight; past that, the request
 * goes on clockwise to the next member with room. Returns the member and whether it is the key's owner (the first
 * member up on the ring), or null when nobody may take it.
 *
 * `settled` is where the key's conversation went when it last spilled (as in the paper, where a ball placed past
 * its bin stays where it was put): that member holds its newest cache, so it comes first while it is up and has
 * room, and a placement there counts as "owner" too. Without it a conversation whose owner is often at the bound
 * would pay twice per spill: the whole history on the member it spills to, then the turns it missed on the owner.
 */
export function placeBounded<M>(ring: AffinityRing<M>, key: number, loadFactor: number, view: LoadView<M>, settled: M | null = null): { member: M; placement: Placement } | null {
  const walked = [...ring.walk(key)].filter((m) => view.up(m));
  if (walked.length === 0) return null;
  const order = settled !== null && view.up(settled) ? [settled, ...walked.filter((m) => m !== settled)] : walked;
  const total = order.reduce((sum, m) => sum + view.inFlight(m), 0) + 1;
  const totalWeight = order.reduce((sum, m) => sum + view.weight(m), 0);
  const owner = walked[0];
  const home = (m: M) => m === owner || m === settled;
  for (const m of order) {
    if (!view.mayTake(m)) continue;
    const capacity = Math.ceil((loadFactor * total * view.weight(m)) / totalWeight);
    if (view.inFlight(m) < capacity) return { member: m, placement: home(m) ? "owner" : "spill" };
  }
  // Only exclusions (maxInFlight, a failed attempt) can leave every member past the bound: the least loaded then.
  let best: M | null = null;
  for (const m of order) {
    if (view.mayTake(m) && (best === null || (view.inFlight(m) + 1) / view.weight(m) < (view.inFlight(best) + 1) / view.weight(best))) best = m;
  }
  return best === null ? null : { member: best, placement: home(best) ? "owner" : "spill" };
}
