import type { ModelEntry } from "../../src/config/app-config.ts";
import type { ModelConfig } from "../../src/config/config.schema.ts";
import { resolveModel } from "../../src/config/load-config.ts";
import { repoRoot } from "./server.ts";

/** A catalog entry with the config loader's own defaults, for tests that drive an engine or runner directly. */
export function modelEntry(model: ModelConfig, overrides: Partial<ModelEntry> = {}): ModelEntry {
  return { ...resolveModel(model, repoRoot, `${repoRoot}/data`, 60_000), ...overrides };
}
