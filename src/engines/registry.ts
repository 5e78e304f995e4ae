import type { LlamaSettings, ModelEntry } from "../config/app-config.ts";
import type { EngineKinds } from "../config/engine-kinds.ts";
import { unsupportedCapabilities } from "./capabilities.ts";
import type { EngineKind, EngineLog } from "./engine-kind.ts";
import { llamaServerKind } from "./llama-server/llama-server.kind.ts";
import { placeLlamaEntry } from "./llama-server/llama-placement.ts";
import type { Engine, EngineSupport } from "./engine.ts";
import { llamaKind } from "./llama/llama.kind.ts";
import { onnxKind } from "./onnx/onnx.kind.ts";
import { upstreamKind } from "./upstream/upstream.kind.ts";

/**
 * The engine kinds this node can build. Adding an engine is one folder under `engines/` exporting an `EngineKind`,
 * plus one line in `builtInEngines`. The config loader validates entries through it, the catalog builds engines
 * through it; both get it handed in, so tests may register an extra kind the same way.
 */
export class EngineRegistry implements EngineKinds {
  private readonly kinds = new Map<string, EngineKind>();

  constructor(kinds: EngineKind[] = []) {
    for (const kind of kinds) this.register(kind);
  }

  register(kind: EngineKind): this {
    if (this.kinds.has(kind.name)) throw new Error(`engine kind "${kind.name}" is already registered`);
    this.kinds.set(kind.name, kind);
    return this;
  }

  kind(name: string): EngineKind {
    const kind = this.kinds.get(name);
    if (!kind) throw new Error(`unknown engine kind "${name}"`);
    return kind;
  }

  names(): string[] {
    return [...this.kinds.keys()];
  }

  optionsSchema(name: string) {
    return this.kinds.get(name)?.options;
  }

  hasLocalFiles(name: string): boolean {
    return this.kind(name).localFiles;
  }

  defaultParallel(name: string, options: Readonly<Record<string, unknown>>): number {
    return this.kind(name).defaultParallel(options);
  }

  resolvePaths(name: string, options: Record<string, unknown>, configDir: string): Record<string, unknown> {
    return this.kind(name).resolvePaths?.(options, configDir) ?? options;
  }

  support(entry: ModelEntry): EngineSupport {
    return this.kind(entry.engine).support(entry);
  }

  unsupportedClaim(entry: ModelEntry): string | null {
    const support = this.support(entry);
    const missing = unsupportedCapabilities(entry, support);
    if (missing.length === 0) return null;
    const can = [...support.endpoints, ...support.features].join(", ");
    return `engine ${entry.engine} cannot do ${missing.map((c) => `"${c}"`).join(", ")} for this model (it can do: ${can})`;
  }

  place(entry: ModelEntry, settings: { llama: LlamaSettings; dataDir: string }): ModelEntry {
    return this.kinds.has("llama-server") ? placeLlamaEntry(entry, settings.llama, settings.dataDir) : entry;
  }

  companionRefs(entry: ModelEntry): string[] {
    return this.kinds.get(entry.engine)?.companionRefs?.(entry) ?? [];
  }

  create(entry: ModelEntry, log: EngineLog): Promise<Engine> {
    return this.kind(entry.engine).create(entry, log);
  }
}

/** The engines every node has. */
export function builtInEngines(): EngineRegistry {
  return new EngineRegistry([llamaKind, onnxKind, upstreamKind, llamaServerKind]);
}
