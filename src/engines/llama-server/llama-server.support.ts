import { Type, type Static } from "@sinclair/typebox";
import type { ModelEntry } from "../../config/app-config.ts";
import { Duration } from "../../config/config.schema.ts";
import type { EngineSupport } from "../engine.ts";

/* What the managed llama-server engine takes from its model entry (its own config fields) and what it can do. */

export const LlamaServerOptions = Type.Object(
  {
    /** llama.cpp's `llama-server` binary (e.g. built by ../shared/tools/peers/build-llama-server.sh). */
    binary: Type.String({ minLength: 1 }),
    /** CPU threads, for generation and for batches (`-t` and `-tb`). */
    threads: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, default: 1 })),
    /**
     * More llama-server flags, appended as given (`["-fa", "on"]`); the managed ones (model, host, port, -np, -c, -t)
     * are ours, and its log must stay on stderr (the port it bound is read there).
     */
    args: Type.Optional(Type.Array(Type.String(), { default: [] })),
    /** How long the process may take to answer /health after a start or a restart. */
    startTimeout: Type.Optional(Duration),
  },
  { additionalProperties: false },
);
export type LlamaServerOptions = Static<typeof LlamaServerOptions>;

export const llamaServerOptions = (entry: ModelEntry): LlamaServerOptions => entry.options as LlamaServerOptions;

/**
 * What a managed llama-server offers: chat with grammar-based tools and JSON (`--jinja`), logprobs and `<think>`
 * reasoning, raw-prompt completions (fill-in-the-middle through its /infill); or, for an entry without chat,
 * embeddings (`--embeddings`) or rerank (`--reranking`); and its tokenizer. Vision needs a projector file this engine
 * does not manage, so image inputs are refused with the capability 400. Its completions answer no logprobs of the
 * prompt itself, so echo with logprobs is refused too.
 */
const chatSupport: EngineSupport = {
  endpoints: ["chat", "completions", "tokenize"],
  features: ["tools", "json", "logprobs", "reasoning"],
  seededSampling: true,
  refuses: [
    {
      features: ["prompt_logprobs"],
      param: "echo",
      message: "echo with logprobs (the prompt's own logprobs) is not available on a llama-server model: its completions answer logprobs of generated tokens only.",
    },
  ],
};
const embeddingsSupport: EngineSupport = { endpoints: ["embeddings", "tokenize"], features: [], refuses: [] };
const rerankSupport: EngineSupport = { endpoints: ["rerank", "tokenize"], features: [], refuses: [] };

/** What the managed llama-server of this entry can do. */
export function llamaServerSupport(entry: ModelEntry): EngineSupport {
  return entry.capabilities.includes("chat") ? chatSupport : entry.capabilities.includes("rerank") ? rerankSupport : embeddingsSupport;
}
