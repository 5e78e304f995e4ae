import type { ModelCache, PlanCache } from "./app-config.ts";
import type { ModelCacheConfig, PlanCacheConfig } from "./config.schema.ts";
import type { Static } from "@sinclair/typebox";
import { parseDuration } from "./duration.ts";

/** An answer's entry (as JSON) larger than this is not stored, unless the model says otherwise. */
export const defaultMaxEntryBytes = 256 * 1024;
/** The in-process store's bound when `cache.maxBytes` is not set. */
export const defaultCacheMemoryBytes = 64 * 1024 * 1024;

/** A model's `cache` with its defaults (issue 45); null when it has none. */
export function resolveModelCache(input: Static<typeof ModelCacheConfig> | undefined): ModelCache | null {
  if (!input) return null;
  return { ttlMs: parseDuration(input.ttl), maxEntryBytes: input.maxEntryBytes ?? defaultMaxEntryBytes, shared: input.shared ?? false };
}

/** A plan's `cache` with its defaults; null when it has none. */
export function resolvePlanCache(input: Static<typeof PlanCacheConfig> | undefined): PlanCache | null {
  if (!input) return null;
  return { ttlMs: input.ttl ? parseDuration(input.ttl) : null, maxEntryBytes: input.maxEntryBytes ?? null, charge: input.charge ?? "none" };
}
