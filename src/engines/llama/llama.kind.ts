import type { EngineKind } from "../engine-kind.ts";
import { LlamaOptions, llamaChatSupport, llamaRerankSupport } from "./llama.support.ts";

export const llamaKind: EngineKind = {
  name: "llama",
  options: LlamaOptions,
  localFiles: true,
  defaultParallel: () => 4,
  support: (entry) => (entry.capabilities.includes("rerank") ? llamaRerankSupport : llamaChatSupport),
  async create(entry, log) {
    if (entry.capabilities.includes("rerank")) {
      const { LlamaRerankEngine } = await import("./llama-rerank-engine.ts");
      return new LlamaRerankEngine(entry);
    }
    const { LlamaEngine } = await import("./llama-engine.ts");
    return new LlamaEngine(entry, log);
  },
};
