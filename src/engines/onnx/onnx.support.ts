import { Type, type Static } from "@sinclair/typebox";
import type { ModelEntry } from "../../config/app-config.ts";
import type { EngineSupport } from "../engine.ts";

/* What the ONNX engines take from their model entry (their own config fields) and what they can do, as data. */

export const OnnxOptions = Type.Object(
  {
    /** onnxruntime intra-op threads per worker. */
    threads: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, default: 1 })),
  },
  { additionalProperties: false },
);
export type OnnxOptions = Required<Static<typeof OnnxOptions>>;

export const onnxOptions = (entry: ModelEntry): OnnxOptions => entry.options as OnnxOptions;

/** Whisper transcription; its prepare decodes the upload, which is costly. */
export const whisperSupport: EngineSupport = { endpoints: ["transcriptions"], features: [], refuses: [], expensivePrepare: true };
/**
 * Image-text-to-text chat: no grammar, tools or logprobs in transformers.js, and no raw-prompt completions (the
 * model is driven through its processor and template); its tokenizer; image processing makes prepare costly. A seed
 * repeats a run: the worker reseeds transformers.js's sampler before each generation.
 */
export const vlmSupport: EngineSupport = { endpoints: ["chat", "tokenize"], features: ["vision"], refuses: [], expensivePrepare: true, seededSampling: true };
export const encoderEmbedSupport: EngineSupport = { endpoints: ["embeddings"], features: [], refuses: [] };
export const encoderRerankSupport: EngineSupport = { endpoints: ["rerank"], features: [], refuses: [] };
