import type { TObject } from "@sinclair/typebox";
import type { BaseLogger } from "pino";
import type { ModelEntry } from "../config/app-config.ts";
import type { Engine, EngineSupport } from "./engine.ts";

/** Where an engine reports what no request sees (a supervised process that crashed and restarts). */
export type EngineLog = Pick<BaseLogger, "info" | "warn" | "error">;

/**
 * One kind of engine (`engine: llama` in the config): its own config fields, what the engine built for an entry
 * can do, and how to build it. Each engine folder exports one; `registry.ts` lists them.
 */
export interface EngineKind {
  readonly name: string;
  /** The engine's own model-entry fields, with defaults (additionalProperties false: unknown keys are errors). */
  readonly options: TObject;
  /** Whether its models are files under `source` (the catalog then tracks them as present or missing). */
  readonly localFiles: boolean;
  /** `parallel` when the entry does not set it. */
  defaultParallel(options: Readonly<Record<string, unknown>>): number;
  /** What the engine built for this entry can do (capabilities as data), known before anything loads. */
  support(entry: ModelEntry): EngineSupport;
  /** Makes the paths among its own fields absolute against the config's folder (default: it has none). */
  resolvePaths?(options: Record<string, unknown>, configDir: string): Record<string, unknown>;
  /** Hub refs `modelgate pull` fetches along with the entry's own files (whisper's Silero VAD). */
  companionRefs?(entry: ModelEntry): string[];
  /** Builds the engine; implementations import their heavy libraries lazily. */
  create(entry: ModelEntry, log: EngineLog): Promise<Engine>;
}
