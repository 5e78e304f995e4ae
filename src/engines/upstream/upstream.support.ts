import { Type, type Static } from "@sinclair/typebox";
import { Duration } from "../../config/config.schema.ts";
import type { ModelEntry } from "../../config/app-config.ts";
import type { EngineSupport } from "../engine.ts";

/* What the upstream engine takes from its model entry (its own config fields) and what it can do, as data. */

const Upstream = Type.Object(
  {
    /** Base URL of the OpenAI-style API, `https://host:8000/v1`; root paths (/tokenize, TEI's /embed) drop the `/v1`. */
    url: Type.String({ pattern: "^https?://" }),
    /** Sent as `Authorization: Bearer`; write `${ENV_VAR}` to keep it out of the file. */
    apiKey: Type.Optional(Type.String({ minLength: 1 })),
    /** The model name the upstream knows. */
    model: Type.String({ minLength: 1 }),
    /** A PEM file of the CA that signed the upstream's certificate (private CAs, self-signed Modelgate nodes). */
    ca: Type.Optional(Type.String({ minLength: 1 })),
    /** Share of traffic relative to the pool's other upstreams (weighted routing). */
    weight: Type.Optional(Type.Number({ exclusiveMinimum: 0, default: 1 })),
    /** Requests in flight to this upstream at most. */
    maxInFlight: Type.Optional(Type.Integer({ minimum: 1, default: 64 })),
  },
  { additionalProperties: false },
);

export const UpstreamOptions = Type.Object(
  {
    upstreams: Type.Array(Upstream, { minItems: 1 }),
    /**
     * The wire: `openai` (vLLM, SGLang, llama-server, Ollama's /v1), `modelgate` (another Modelgate node: its §7
     * codes pass through, and prompts are counted with its /v1/tokenize), `tgi` (Hugging Face TGI and TEI: chat on
     * /v1/chat/completions, embeddings on /embed, rerank on /rerank with `texts`).
     */
    protocol: Type.Optional(Type.Union([Type.Literal("openai"), Type.Literal("modelgate"), Type.Literal("tgi")], { default: "openai" })),
    /**
     * How to count a chat prompt before sending it, to answer context_length_exceeded ourselves: `vllm` (and
     * SGLang: POST /tokenize with messages), `llama-server` (/apply-template then /tokenize), `modelgate`
     * (POST /v1/tokenize), or `none`: the upstream's own context error is mapped instead.
     */
    tokenize: Type.Optional(Type.Union([Type.Literal("vllm"), Type.Literal("llama-server"), Type.Literal("modelgate"), Type.Literal("none")])),
    /**
     * Where a completion with a `suffix` (fill-in-the-middle) goes: `completions` passes it to the upstream's
     * /v1/completions (the default), `llama-server` to llama-server's /infill, which builds the model's FIM prompt.
     */
    infill: Type.Optional(Type.Union([Type.Literal("completions"), Type.Literal("llama-server")])),
    timeouts: Type.Optional(
      Type.Object(
        {
          connect: Type.Optional(Duration),
          /** Until the response headers (and, for streams, the first event). */
          firstByte: Type.Optional(Duration),
          /** Between two reads of a response body. */
          idle: Type.Optional(Duration),
          total: Type.Optional(Duration),
        },
        { additionalProperties: false },
      ),
    ),
    /**
     * `prefix-affinity`: each conversation (its system prompt and first user message) goes back to the upstream
     * that holds its KV cache, by consistent hashing with bounded loads; embeddings, rerank and transcriptions, which
     * have no conversation, go to the least outstanding.
     */
    routing: Type.Optional(
      Type.Union([Type.Literal("least-outstanding"), Type.Literal("round-robin"), Type.Literal("weighted"), Type.Literal("prefix-affinity")], { default: "least-outstanding" }),
    ),
    affinity: Type.Optional(
      Type.Object(
        {
          /** No upstream takes more than ceil(loadFactor × the mean in flight); past it, a request spills clockwise. */
          loadFactor: Type.Optional(Type.Number({ exclusiveMinimum: 1, maximum: 100, default: 1.25 })),
        },
        { additionalProperties: false },
      ),
    ),
    health: Type.Optional(
      Type.Object(
        {
          interval: Type.Optional(Duration),
          unhealthyAfter: Type.Optional(Type.Integer({ minimum: 1 })),
          healthyAfter: Type.Optional(Type.Integer({ minimum: 1 })),
          /** Defaults per protocol: /health (openai, tgi, tei), /healthz (modelgate), / (Ollama: set it). */
          path: Type.Optional(Type.String({ pattern: "^/" })),
        },
        { additionalProperties: false },
      ),
    ),
    retry: Type.Optional(Type.Object({ attempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })), maxWait: Type.Optional(Duration) }, { additionalProperties: false })),
    breaker: Type.Optional(Type.Object({ failures: Type.Optional(Type.Integer({ minimum: 1 })), cooldown: Type.Optional(Duration) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type UpstreamOptions = Static<typeof UpstreamOptions>;
export type UpstreamConfig = Static<typeof Upstream>;

export const upstreamOptions = (entry: ModelEntry): UpstreamOptions => entry.options as UpstreamOptions;

export type TokenizeStrategy = NonNullable<UpstreamOptions["tokenize"]>;

/** How prompts are counted (and /v1/tokenize answered): `modelgate` for Modelgate upstreams, else `none` unless set. */
export function tokenizeStrategy(options: UpstreamOptions): TokenizeStrategy {
  return options.tokenize ?? (options.protocol === "modelgate" ? "modelgate" : "none");
}

/**
 * Whatever the upstream serves: the entry's `capabilities` say what this model is, the upstream decides the rest
 * (raw-prompt completions go to its /v1/completions); its tokenizer is there when `tokenize` names how to reach it.
 */
export const upstreamSupport: EngineSupport = {
  endpoints: ["chat", "embeddings", "rerank", "transcriptions", "completions", "tokenize"],
  features: ["vision", "tools", "json", "logprobs", "reasoning"],
  refuses: [],
};
const withoutTokenizer: EngineSupport = { ...upstreamSupport, endpoints: upstreamSupport.endpoints.filter((e) => e !== "tokenize") };

export function upstreamSupportOf(options: UpstreamOptions): EngineSupport {
  return tokenizeStrategy(options) === "none" ? withoutTokenizer : upstreamSupport;
}
