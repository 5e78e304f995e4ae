import type { ModelEntry } from "../../src/config/app-config.ts";
import type { ModelConfigInput } from "../../src/config/config.schema.ts";
import { resolveModel } from "../../src/config/load-config.ts";
import { builtInEngines } from "../../src/engines/registry.ts";
import { repoRoot } from "../../harness/server.ts";

/** A catalog entry with the config loader's own defaults, for tests that drive an engine or runner directly. */
export function modelEntry(model: ModelConfigInput, overrides: Partial<ModelEntry> = {}): ModelEntry {
  const entry = resolveModel(model, { configDir: repoRoot, dataDir: `${repoRoot}/data`, serverTimeoutMs: 60_000, engines: builtInEngines() });
  return { ...entry, ...overrides };
}
