import type { ModelEntry } from "../config/app-config.ts";
import type { Engine } from "./engine.ts";

/**
 * Builds the engine for a catalog entry from its engine kind and capabilities. Engines are imported lazily so a
 * node that serves only GGUF models never loads onnxruntime, and the other way round.
 */
export async function createEngine(entry: ModelEntry): Promise<Engine> {
  const can = (capability: ModelEntry["capabilities"][number]) => entry.capabilities.includes(capability);
  switch (entry.engine) {
    case "llama": {
      if (can("rerank")) {
        const { LlamaRerankEngine } = await import("./llama/llama-rerank-engine.ts");
        return new LlamaRerankEngine(entry);
      }
      const { LlamaEngine } = await import("./llama/llama-engine.ts");
      return new LlamaEngine(entry);
    }
    case "onnx": {
      if (can("transcriptions")) {
        const { OnnxWhisperEngine } = await import("./onnx/whisper-engine.ts");
        return new OnnxWhisperEngine(entry);
      }
      if (can("vision") || can("chat")) {
        const { OnnxVlmEngine } = await import("./onnx/onnx-vlm-engine.ts");
        return new OnnxVlmEngine(entry);
      }
      const { OnnxEncoderEngine } = await import("./onnx/onnx-encoder-engine.ts");
      return new OnnxEncoderEngine(entry);
    }
    case "upstream":
      throw new Error("the upstream engine is not available in this version");
  }
}
