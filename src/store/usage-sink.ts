import type { Endpoint } from "../config/config.schema.ts";

/** One completed request's token counts, recorded per key, model and endpoint. */
export interface UsageEvent {
  keyId: string;
  accountId: string;
  model: string;
  endpoint: Endpoint;
  promptTokens: number;
  completionTokens: number;
  /** A Batch API line (counted in the row's batch_* columns too). */
  batch?: boolean;
  /** Answered from the response cache (issue 45; counted in the row's cached_requests too). */
  cached?: boolean;
  /**
   * The UTC day the usage belongs to: the day its token reservation was counted in, so that a request running past
   * midnight is in the same day's usage rows as in that day's quota and budget counters. Unset: the day it is recorded.
   */
  day?: string;
}

/** Takes usage off the hot path; implementations batch their writes. */
export interface UsageSink {
  record(event: UsageEvent): void;
  flush(): Promise<void>;
}
