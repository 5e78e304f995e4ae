import type { Engine } from "../../src/engines/engine.ts";
import type { EngineKind } from "../../src/engines/engine-kind.ts";
import { builtInEngines, EngineRegistry } from "../../src/engines/registry.ts";
import type { TestServer } from "../../harness/server.ts";

/** The built-in engine kinds, each remembering the engine it last built per model id. */
export interface RecordingEngines {
  registry: EngineRegistry;
  /**
   * The engine the catalog built for a model, while the model is loaded (null otherwise): a test reads its own
   * diagnostics (worker pool, free sequences, the managed process) or breaks it, without reaching into the scheduler.
   */
  loaded(srv: TestServer, id: string): Engine | null;
}

/** Pass `registry` as `startServer(raw, { engines })`: the real engines, each recorded as the kind builds it. */
export function recordingEngines(): RecordingEngines {
  const built = new Map<string, Engine>();
  const builtIn = builtInEngines();
  const registry = new EngineRegistry(
    builtIn.names().map((name): EngineKind => {
      const kind = builtIn.kind(name);
      return Object.assign(Object.create(kind) as EngineKind, {
        async create(...args: Parameters<EngineKind["create"]>) {
          const engine = await kind.create(...args);
          built.set(args[0].id, engine);
          return engine;
        },
      });
    }),
  );
  return { registry, loaded: (srv, id) => (srv.server.ctx.catalog.get(id).state === "ready" ? (built.get(id) ?? null) : null) };
}
