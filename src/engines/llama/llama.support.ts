import { Type, type Static } from "@sinclair/typebox";
import type { ModelEntry } from "../../config/app-config.ts";
import type { EngineSupport } from "../engine.ts";

/* What the llama engines take from their model entry (their own config fields) and what they can do, as data. */

export const LlamaOptions = Type.Object(
  {
    /** CPU threads for evaluation; set explicitly (on small models, fewer threads are often faster). */
    threads: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, default: 1 })),
    /** llama.cpp flash attention: `auto` (llama.cpp decides), on or off. */
    flashAttention: Type.Optional(Type.Union([Type.Literal("auto"), Type.Boolean()], { default: "auto" })),
    /**
     * Chat sequences beyond `parallel` (default 1 when parallel > 1, else 0): through them a request of an account
     * under its fair share starts at once while generations over their share pause. Each costs one sequence's KV cache.
     */
    fairShareReserve: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
  },
  { additionalProperties: false },
);
export type LlamaOptions = Required<Omit<Static<typeof LlamaOptions>, "fairShareReserve">> & { fairShareReserve: number };

export const llamaOptions = (entry: ModelEntry): LlamaOptions => {
  const options = entry.options as Static<typeof LlamaOptions> & Omit<LlamaOptions, "fairShareReserve">;
  return { ...options, fairShareReserve: options.fairShareReserve ?? (entry.parallel > 1 ? 1 : 0) };
};

/**
 * GGUF chat and embeddings on node-llama-cpp: grammar-constrained tools and JSON, our own logprobs loop, <think>
 * reasoning, raw-prompt completions (fill-in-the-middle with the GGUF's FIM tokens, the prompt's own logprobs), and
 * the model's tokenizer.
 */
export const llamaChatSupport: EngineSupport = {
  endpoints: ["chat", "embeddings", "completions", "tokenize"],
  features: ["tools", "json", "logprobs", "reasoning"],
  seededSampling: true,
  refuses: [
    {
      features: ["tools", "json"],
      param: "response_format",
      message: "A JSON response_format cannot be combined with tools on this model; set tool_choice to none or drop response_format.",
    },
    { features: ["tools", "logprobs"], param: "logprobs", message: "logprobs cannot be combined with tools on this model." },
    { features: ["json", "logprobs"], param: "logprobs", message: "logprobs cannot be combined with a JSON response_format on this model." },
  ],
};

/** GGUF cross-encoders through node-llama-cpp's ranking context. */
export const llamaRerankSupport: EngineSupport = { endpoints: ["rerank"], features: [], refuses: [] };
