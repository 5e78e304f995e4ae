import type { TObject } from "@sinclair/typebox";
import type { LlamaSettings, ModelEntry } from "./app-config.ts";

/**
 * What the config loader needs to know about engines, handed in by the caller (the engine registry implements it),
 * so `config/` never imports `engines/`.
 */
export interface EngineKinds {
  names(): string[];
  /** The engine's own model-entry fields (additionalProperties false), or undefined for an unknown kind. */
  optionsSchema(kind: string): TObject | undefined;
  /** `parallel` when the entry does not set it, from the engine's own fields. */
  defaultParallel(kind: string, options: Readonly<Record<string, unknown>>): number;
  /** Whether models of this kind are files under `source` (false for engines that call other servers). */
  hasLocalFiles(kind: string): boolean;
  /** The engine's fields with paths (a CA file, say) made absolute against the config's folder. */
  resolvePaths(kind: string, options: Record<string, unknown>, configDir: string): Record<string, unknown>;
  /** Why the entry claims a capability its engine cannot provide ("cannot do tools"), or null when it does not. */
  unsupportedClaim(entry: ModelEntry): string | null;
  /**
   * The entry to serve: the entry itself, or one another engine runs (`engine: llama` on the managed llama-server,
   * per `llama.server`); throws an Error whose message is the config error.
   */
  place(entry: ModelEntry, settings: { llama: LlamaSettings; dataDir: string }): ModelEntry;
}
