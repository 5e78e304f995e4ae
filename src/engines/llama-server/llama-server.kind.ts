import path from "node:path";
import { Type, type Static } from "@sinclair/typebox";
import type { ModelEntry } from "../../config/app-config.ts";
import { Duration } from "../../config/config.schema.ts";
import type { EngineKind } from "../engine-kind.ts";
import type { EngineSupport } from "../engine.ts";

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
 * reasoning; or, for an entry without chat, embeddings (`--embeddings`) or rerank (`--reranking`). Vision needs a
 * projector file this engine does not manage, so image inputs are refused with the capability 400.
 */
const chatSupport: EngineSupport = { endpoints: ["chat"], features: ["tools", "json", "logprobs", "reasoning"], refuses: [] };
const embeddingsSupport: EngineSupport = { endpoints: ["embeddings"], features: [], refuses: [] };
const rerankSupport: EngineSupport = { endpoints: ["rerank"], features: [], refuses: [] };

export const llamaServerKind: EngineKind = {
  name: "llama-server",
  options: LlamaServerOptions,
  localFiles: true,
  defaultParallel: () => 4,
  support: (entry) => (entry.capabilities.includes("chat") ? chatSupport : entry.capabilities.includes("rerank") ? rerankSupport : embeddingsSupport),
  resolvePaths(options, configDir) {
    const own = options as LlamaServerOptions;
    return { ...own, binary: path.resolve(configDir, own.binary) };
  },
  async create(entry, log) {
    const { ManagedLlamaServerEngine } = await import("./managed-llama-server-engine.ts");
    return new ManagedLlamaServerEngine(entry, log);
  },
};
