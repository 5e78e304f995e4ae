import type { AppConfig } from "./config/app-config.ts";
import type { ModelCatalog } from "./catalog/model-catalog.ts";
import type { OpenStreams } from "./http/sse.ts";
import type { Metrics } from "./metrics/metrics.ts";
import type { ConcurrencyLimits } from "./scheduler/concurrency-limits.ts";
import type { UsageSink } from "./store/usage-sink.ts";

/** Everything a route or service needs from the running server; decorated on the app as `app.ctx`. */
export interface AppContext {
  config: AppConfig;
  catalog: ModelCatalog;
  usage: UsageSink;
  /** Streams with their response begun; a shutdown past its timeout ends them with an error event. */
  streams: OpenStreams;
  /** The Prometheus metrics (GET /metrics). */
  metrics: Metrics;
  /** The plans' maxConcurrent and maxConcurrentPerAccount (shared by the replicas through Redis when configured). */
  concurrency: ConcurrencyLimits;
  /** Called on shutdown, in reverse order of registration. */
  onClose(fn: () => Promise<void> | void): void;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Decorated by server.ts. */
    ctx: AppContext;
  }
}
