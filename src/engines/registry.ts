import type { ModelEntry } from "../config/app-config.ts";
import type { Engine } from "./engine.ts";

/**
 * Builds the engine for a catalog entry. Engines are imported lazily so a node that serves only GGUF
 * models never loads onnxruntime, and the other way round.
 */
export async function createEngine(entry: ModelEntry): Promise<Engine> {
  switch (entry.engine) {
    case "llama": {
      const { LlamaEngine } = await import("./llama/llama-engine.ts");
      return new LlamaEngine(entry);
    }
    case "onnx": {
      const { OnnxEngine } = await import("./onnx/onnx-engine.ts");
      return new OnnxEngine(entry);
    }
    case "upstream":
      throw new Error("the upstream engine is not available in this version");
  }
}
