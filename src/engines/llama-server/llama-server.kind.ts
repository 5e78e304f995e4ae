import path from "node:path";
import type { EngineKind } from "../engine-kind.ts";
import { LlamaServerOptions, llamaServerSupport } from "./llama-server.support.ts";

export const llamaServerKind: EngineKind = {
  name: "llama-server",
  options: LlamaServerOptions,
  localFiles: true,
  defaultParallel: () => 4,
  support: llamaServerSupport,
  resolvePaths(options, configDir) {
    const own = options as LlamaServerOptions;
    return { ...own, binary: path.resolve(configDir, own.binary) };
  },
  async create(entry, log) {
    const { ManagedLlamaServerEngine } = await import("./managed-llama-server-engine.ts");
    return new ManagedLlamaServerEngine(entry, log);
  },
};
