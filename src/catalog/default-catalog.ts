import type { ModelConfig } from "../config/config.schema.ts";

/**
 * Served when the config names no models: small real models for every endpoint, fetched by
 * `modelgate pull` (or `serve --pull`) into <dataDir>/models. Their quality is not measured here.
 */
export const defaultCatalog: ModelConfig[] = [
  {
    id: "qwen3-0.6b",
    engine: "llama",
    source: "hf:Qwen/Qwen3-0.6B-GGUF:Q8_0",
    capabilities: ["chat", "tools", "json", "logprobs", "reasoning"],
    contextSize: 8192,
    parallel: 4,
    threads: 2,
    ownedBy: "qwen",
    defaults: { temperature: 0.6, topP: 0.95 },
  },
  {
    id: "all-minilm-l6-v2",
    engine: "onnx",
    source: "hf:Xenova/all-MiniLM-L6-v2",
    capabilities: ["embeddings"],
    ownedBy: "sentence-transformers",
  },
  {
    id: "ms-marco-minilm-l6-v2",
    engine: "onnx",
    source: "hf:Xenova/ms-marco-MiniLM-L-6-v2",
    capabilities: ["rerank"],
    ownedBy: "cross-encoder",
  },
  {
    id: "whisper-tiny",
    engine: "onnx",
    source: "hf:onnx-community/whisper-tiny",
    capabilities: ["transcriptions"],
    ownedBy: "openai",
    parallel: 2,
  },
];
