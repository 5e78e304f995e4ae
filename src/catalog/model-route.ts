import type { FallbackReason, ModelEntry, RouteEntry } from "../config/app-config.ts";
import type { EngineSupport } from "../engines/engine.ts";
import { LastMinute } from "./last-minute.ts";

/** 2^32: sticky points are 32-bit hashes. */
const pointSpace = 0x1_0000_0000;

/** A route's last minute, for the admin API and the console's Models page. */
export interface RouteActivity {
  /** Requests each target answered. */
  served: Record<string, number>;
  /** Fallbacks away from each target, by reason. */
  fallbacks: { from: string; reason: FallbackReason; count: number }[];
}

/**
 * A route as requests use it (issue 45): its split and fallbacks, the route as the one capability check sees a
 * model (what every target can do), and what it did over the last minute.
 */
export class ModelRoute {
  /** The capability check's view of the route: its shared capabilities, and what every target's engine supports. */
  readonly asModel: { entry: ModelEntry; support: EngineSupport };
  private readonly served = new LastMinute();
  private readonly fellBack = new LastMinute();

  constructor(
    readonly config: RouteEntry,
    targets: readonly { entry: ModelEntry; support: EngineSupport }[],
  ) {
    const [first, ...rest] = targets;
    const shared = <T>(pick: (s: EngineSupport) => readonly T[]) => rest.reduce((all, t) => all.filter((x) => pick(t.support).includes(x)), [...pick(first.support)]);
    this.asModel = {
      entry: {
        ...first.entry,
        id: config.id,
        engine: "route",
        capabilities: config.capabilities,
        contextSize: config.contextSize,
        parallel: Math.max(...targets.map((t) => t.entry.parallel)),
        defaults: sharedDefaults(targets.map((t) => t.entry.defaults)),
        // The route's own cache: a target's applies to requests naming the target, never to the route.
        cache: config.cache,
      },
      support: {
        endpoints: shared((s) => s.endpoints),
        features: shared((s) => s.features),
        refuses: targets.flatMap((t) => t.support.refuses),
        // A seed repeats a routed run only when it does on whichever target serves it.
        seededSampling: targets.every((t) => t.support.seededSampling === true),
      },
    };
  }

  get id(): string {
    return this.config.id;
  }

  /**
   * The entries to try, in order, among those `usable` (the ones the caller may name itself): the weighted pick at
   * `point` (a 32-bit hash of the account and conversation, so the same ones always land on the same target), then
   * the fallbacks not already listed. Each target owns a slice of the points in the order of the config, so raising
   * the weight of the last target moves requests onto it and never off it.
   */
  attempts(point: () => number, usable: (model: string) => boolean): string[] {
    const candidates = this.config.targets.filter((t) => t.weight > 0 && usable(t.model));
    const order: string[] = [];
    if (candidates.length === 1) order.push(candidates[0].model);
    else if (candidates.length > 1) {
      const total = candidates.reduce((sum, t) => sum + t.weight, 0);
      let at = (point() / pointSpace) * total;
      const picked = candidates.find((t) => (at -= t.weight) < 0) ?? candidates.at(-1)!;
      order.push(picked.model);
    }
    for (const model of this.config.fallbacks) if (!order.includes(model) && usable(model)) order.push(model);
    return order;
  }

  /** Whether a caller that may name only the entries `usable` reaches any target of the route. */
  reachable(usable: (model: string) => boolean): boolean {
    return this.config.targets.some((t) => t.weight > 0 && usable(t.model)) || this.config.fallbacks.some(usable);
  }

  /** Whether a failure for this reason moves the request on to the next target. */
  fallsBackOn(reason: FallbackReason): boolean {
    return this.config.fallbackOn.has(reason);
  }

  recordServed(target: string): void {
    this.served.add(target);
  }

  recordFallback(from: string, reason: FallbackReason): void {
    this.fellBack.add(`${from}\u0000${reason}`);
  }

  activity(): RouteActivity {
    const served = Object.fromEntries(this.served.counts());
    const fallbacks = [...this.fellBack.counts()].map(([key, count]) => {
      const [from, reason] = key.split("\u0000") as [string, FallbackReason];
      return { from, reason, count };
    });
    return { served, fallbacks };
  }
}

/** The sampling defaults every target has (one that differs between targets is none of the route's). */
function sharedDefaults(all: readonly ModelEntry["defaults"][]): ModelEntry["defaults"] {
  const [first, ...rest] = all;
  const defaults: ModelEntry["defaults"] = {};
  for (const name of ["temperature", "topP"] as const) if (rest.every((d) => d[name] === first[name]) && first[name] !== undefined) defaults[name] = first[name];
  return defaults;
}
