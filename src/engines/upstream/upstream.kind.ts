import path from "node:path";
import type { EngineKind } from "../engine-kind.ts";
import { UpstreamOptions, upstreamOptions, upstreamSupportOf } from "./upstream.support.ts";

export const upstreamKind: EngineKind = {
  name: "upstream",
  options: UpstreamOptions,
  localFiles: false,
  // Our admission bound follows the pool's capacity: the sum of its upstreams' maxInFlight.
  defaultParallel: (options) => (options as UpstreamOptions).upstreams.reduce((sum, u) => sum + (u.maxInFlight ?? 64), 0),
  support: (entry) => upstreamSupportOf(upstreamOptions(entry)),
  resolvePaths(options, configDir) {
    const own = options as UpstreamOptions;
    return { ...own, upstreams: own.upstreams.map((u) => (u.ca ? { ...u, ca: path.resolve(configDir, u.ca) } : u)) };
  },
  async create(entry, log) {
    const { UpstreamEngine } = await import("./upstream-engine.ts");
    return new UpstreamEngine(entry, log);
  },
};
