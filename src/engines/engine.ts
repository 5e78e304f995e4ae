import type { Capability } from "../config/config.schema.ts";

/** The typed requests, results and deltas engines speak; `Engine` (below) is the interface they implement. */

/** `param` names the content part (for the capability check), `urlParam` its data URL (for errors about the image). */
export type ImagePart = { type: "image"; data: Uint8Array; mime: "image/png" | "image/jpeg"; param: string; urlParam: string };
export type TextPart = { type: "text"; text: string };
export type ContentPart = TextPart | ImagePart;

export interface ToolCall {
  id: string;
  name: string;
  /** JSON-encoded arguments, as the wire carries them. */
  arguments: string;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | ContentPart[] | null;
  toolCalls?: ToolCall[];
  toolCallId?: string;
}

export interface ToolDefinition {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  /** Where the parameters' schema is in the request, for a 400 about it (chat's `tools[i].function.parameters` by default). */
  parametersParam?: string;
  /**
   * The schema guides the call and is not a contract (Anthropic's tools without `strict: true`): a keyword an
   * engine's grammar cannot enforce (`minimum`, `pattern`, …) is dropped instead of refused.
   */
  looseParameters?: boolean;
}

export interface JsonSchemaFormat {
  name: string;
  schema: Record<string, unknown> | null;
  strict: boolean;
}

export type ToolChoice = "auto" | "none" | "required" | { name: string };

export interface ChatRequest {
  messages: ChatMessage[];
  /** The client's max_tokens (or max_completion_tokens, max_output_tokens); null when it set none. */
  maxTokens: number | null;
  /**
   * The plan's `maxOutputTokens`: it bounds an omitted max_tokens (an explicit one above it was refused before the
   * engine); absent or null, no cap. The engine's prepare fits both to the window (context-window.ts).
   */
  outputCap?: number | null;
  temperature: number | null;
  topP: number | null;
  seed: number | null;
  stop: string[];
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  responseFormat: "text" | "json_object" | "json_schema";
  /** With responseFormat json_schema: the schema the output must validate against (null: any JSON object). */
  jsonSchema?: JsonSchemaFormat;
  /** null: no logprobs; otherwise how many alternatives per token (0..20). */
  topLogprobs: number | null;
  /**
   * false: a reasoning model answers without thinking first (Anthropic's `thinking: disabled`), on engines that can
   * switch it (llama); absent or true: the model's default (a reasoning model thinks).
   */
  reasoning?: boolean;
  /**
   * The caller sends nothing to its client before the generation ends (a non-stream completion), so an engine may
   * start the generation over (an upstream engine retries it elsewhere) without anyone seeing a partial answer.
   */
  buffered?: boolean;
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export type FinishReason = "stop" | "length" | "tool_calls";

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

export type ChatDelta =
  | { type: "content"; text: string; logprobs?: TokenLogprob[] }
  | { type: "reasoning"; text: string }
  /** The first delta of a call has id and name; later ones only argument fragments. */
  | { type: "tool_call"; index: number; id?: string; name?: string; arguments: string }
  /**
   * `stopSequence`: the request's stop string that ended the generation, where the engine says which one did;
   * `cachedPromptTokens`: how many of the prompt's tokens came from the KV cache (prefix reuse), where it knows.
   */
  | { type: "done"; finishReason: FinishReason; usage: Usage; stopSequence?: string; cachedPromptTokens?: number };

/**
 * A raw-prompt completion (/v1/completions): the prompt is the prompt, no chat template is applied, and the text of
 * a special token in it (`<|fim_prefix|>`, `</s>`) is read as that token, as llama-server and vLLM read it.
 */
export interface CompletionRequest {
  prompt: string;
  /** Where a 400 about this prompt points (`prompt`, or `prompt[2]` for the third of several). */
  promptParam: string;
  /** Fill-in-the-middle: the text after the gap (the prompt is the text before it), or null. */
  suffix: string | null;
  /** The completion length asked for (0 with echo: only the prompt's own logprobs). */
  maxTokens: number;
  /** The plan's `maxOutputTokens`, as in ChatRequest. */
  outputCap?: number | null;
  temperature: number | null;
  topP: number | null;
  seed: number | null;
  stop: string[];
  /** OpenAI's penalties over the tokens generated so far (0: none). */
  presencePenalty: number;
  frequencyPenalty: number;
  /** Logits added to tokens by id (-100..100), checked against the vocabulary by the engine. */
  logitBias: ReadonlyMap<number, number>;
  /** null: no logprobs; otherwise how many alternatives per token (0..5). */
  logprobs: number | null;
  /** The prompt's own token logprobs come first (echo with logprobs), as a `prompt` delta. */
  promptLogprobs: boolean;
  /** As in ChatRequest: nothing reaches the client before the end, so the engine may start over elsewhere. */
  buffered?: boolean;
}

/** A token of a completion (or of its prompt) with its logprob and the most likely alternatives at its place. */
export interface CompletionLogprob {
  token: string;
  /** null for the prompt's first token, which nothing before it predicts. */
  logprob: number | null;
  /** The alternatives, most likely first (empty where `logprob` is null). */
  top: { token: string; logprob: number }[];
}

export type CompletionDelta =
  /** The prompt's tokens with their logprobs (asked with `promptLogprobs`), before any generated text. */
  | { type: "prompt"; logprobs: CompletionLogprob[] }
  | { type: "text"; text: string; logprobs?: CompletionLogprob[] }
  | { type: "done"; finishReason: "stop" | "length"; usage: Usage };

/** What /v1/tokenize asks a model's tokenizer: text as it is, or a chat request after the model's template. */
export type TokenizeRequest = { text: string; addSpecial: boolean } | { chat: ChatRequest };

/** A chat request after the engine has templated and tokenized it, ready to run. */
export interface PreparedChat {
  promptTokens: number;
  /** The completion budget (context-window.ts fitCompletion): max_tokens, or what the window leaves, within the plan's cap. */
  maxTokens: number;
}

export interface EmbedRequest {
  inputs: string[];
}
/** Embedding inputs after the engine has tokenized and checked them. */
export interface PreparedEmbed {
  promptTokens: number;
}
export interface EmbedResult {
  vectors: Float32Array[];
  promptTokens: number;
}

export interface RerankRequest {
  query: string;
  documents: string[];
}
/** A rerank request after the engine has tokenized and checked every query/document pair. */
export interface PreparedRerank {
  promptTokens: number;
}
export interface RerankResult {
  /** One score per document, in request order. */
  scores: number[];
  promptTokens: number;
}

/** An uploaded audio file as it came: engines that run the model decode it, an upstream gets it as is. */
export interface AudioUpload {
  bytes: Uint8Array;
  filename: string | null;
  mimetype: string | null;
}

export interface TranscribeRequest {
  file: AudioUpload;
  /** ISO-639-1 code, or null to detect. */
  language: string | null;
  prompt: string | null;
  temperature: number;
}
/** A transcription after the engine's prepare step: the decoded audio (when it decodes) and how many windows it makes. */
export interface PreparedTranscription {
  /** 16 kHz mono PCM, or null when the engine does not decode (an upstream). */
  audio: Float32Array | null;
  /** Slots the work can use at once: one per window of the recording. */
  windows: number;
}

export interface TranscriptSegment {
  id: number;
  start: number;
  end: number;
  text: string;
}
export interface Transcript {
  text: string;
  /** ISO-639-1 code of the language used. */
  language: string;
  /** Seconds of audio; null when an upstream does not say. */
  duration: number | null;
  segments: TranscriptSegment[];
  /** Text tokens generated, for usage. */
  completionTokens: number;
}

/**
 * What an engine can do, as data: the endpoints it serves, the chat features it honours, and the parameter
 * combinations it refuses even when the model has both capabilities. `src/engines/capabilities.ts` checks requests
 * against it (one function, one order), and the config loader checks every model entry's `capabilities` against it
 * at start.
 */
export interface EngineSupport {
  endpoints: readonly EnginePort[];
  features: readonly FeatureCapability[];
  refuses: readonly RefusedCombination[];
  /**
   * True when `prepare` is costly (image processing): the scheduler then bounds how many requests prepare at once
   * and answers 503 overloaded past that, instead of letting a burst pile up before the queue.
   */
  expensivePrepare?: boolean;
  /**
   * True when a request's `seed` makes its sampling repeat exactly: the response cache (issue 45) then stores
   * seeded requests at any temperature. Unset (an upstream, whose servers may not honour it): only temperature 0.
   */
  seededSampling?: boolean;
}

export type EndpointCapability = Extract<Capability, "chat" | "embeddings" | "rerank" | "transcriptions">;
/**
 * The ports an engine may serve: one per endpoint capability, plus raw-prompt completion (/v1/completions, for models
 * with `chat`) and the model's tokenizer (/v1/tokenize and /v1/detokenize).
 */
export type EnginePort = EndpointCapability | "completions" | "tokenize";
export type FeatureCapability = Extract<Capability, "vision" | "tools" | "json" | "logprobs" | "reasoning">;
/**
 * A feature as a request uses it; `tools` counts only when tool_choice is not `none`; `prompt_logprobs` is a
 * completion's echo with logprobs (the prompt's own logprobs).
 */
export type RequestFeature = "images" | "tools" | "json" | "logprobs" | "prompt_logprobs";

export interface RefusedCombination {
  /** The features that together are refused (one alone: a feature the engine lacks although the model has it). */
  features: readonly RequestFeature[];
  /** The parameter the 400 names. */
  param: string;
  message: string;
}

/** How much of the prompts an engine took from its KV cache instead of evaluating them (prefix reuse across turns). */
export interface PromptCacheStats {
  /** Prompt tokens of the chats run. */
  promptTokens: number;
  /** Of those, the tokens already in the chosen sequence's cache. */
  reusedTokens: number;
}

/** One upstream of an engine that forwards to other servers, as the admin API and /readyz show it. */
export interface UpstreamStats {
  url: string;
  state: "healthy" | "ejected" | "probing";
  inFlight: number;
  maxInFlight: number;
  weight: number;
  /** Failures (requests and health checks) in the last minute. */
  recentFailures: number;
  /** Moving average of the time to an answer (headers and first event), ms. */
  latencyMs: number | null;
  /** Failed calls and health checks since start. */
  failuresTotal: number;
  /** Pools with `routing: prefix-affinity`: attempts placed here since load, by why it was chosen. */
  affinity?: AffinityPlacements;
}

/** Attempts placed on an upstream: as the key's home (its ring owner, or where it settled after a spill), spilled from a busier one, or as a retry. */
export interface AffinityPlacements {
  owner: number;
  spill: number;
  retry: number;
}

/*
 * Each endpoint an engine serves is a port of two steps, generic over the engine's own prepared value: prepare
 * templates, tokenizes and validates (400s, context_length_exceeded) on a loaded engine before any capacity is
 * taken; the run step does the work on the slot(s) the scheduler leased. A prepared value goes back only to the
 * engine that made it (the scheduler answers 503 model_loading when the model was reloaded in between), so each
 * engine's run step takes its own prepared type, without a cast.
 */

/**
 * Where a generation stands in its model's fair share (the scheduler's lease answers it). Engines that can pause a
 * generation between decode steps (in-process llama) ask it at every step: while a favoured generation is open,
 * those over their share wait for it.
 */
export interface ShareStanding {
  /** Its account runs more than its share of the model (or it is batch work beside interactive work). */
  readonly overShare: boolean;
  /** Within its share, and not yet past its burst of service ahead of the others: the others over their share wait. */
  readonly favoured: boolean;
}

export interface ChatPort<P extends PreparedChat = PreparedChat> {
  prepareChat(req: ChatRequest, signal?: AbortSignal): Promise<P>;
  /**
   * The generation as runs of deltas, in order: each run is what the engine had at once (one token in process; all
   * the events of one read of an upstream's stream), so a caller pays one step of the iteration per run, not per
   * delta. The last delta of the last run is `done`. A run is never empty.
   */
  chat(req: ChatRequest, prepared: P, signal: AbortSignal, standing?: ShareStanding): AsyncIterable<ChatDelta[]>;
}

export interface EmbedPort<P extends PreparedEmbed = PreparedEmbed> {
  prepareEmbed(req: EmbedRequest): P | Promise<P>;
  embed(req: EmbedRequest, prepared: P, signal: AbortSignal): Promise<EmbedResult>;
}

export interface RerankPort<P extends PreparedRerank = PreparedRerank> {
  prepareRerank(req: RerankRequest): P | Promise<P>;
  rerank(req: RerankRequest, prepared: P, signal: AbortSignal): Promise<RerankResult>;
}

export interface TranscribePort<P extends PreparedTranscription = PreparedTranscription> {
  /** Decodes and checks the upload (400 param file) before the request waits for a slot. */
  prepareTranscribe(req: TranscribeRequest, signal: AbortSignal): Promise<P>;
  /** `slots` is how many of the model's slots the request leased: windows of one recording run that wide. */
  transcribe(req: TranscribeRequest, prepared: P, signal: AbortSignal, slots: number): Promise<Transcript>;
}

/** A completion after the engine has tokenized the prompt (and built the FIM prompt), ready to run. */
export type PreparedCompletion = PreparedChat;

export interface CompletionPort<P extends PreparedCompletion = PreparedCompletion> {
  /** Tokenizes the prompt (a suffix: the model's FIM prompt; 400 `suffix` for a model without FIM tokens) and fits the window. */
  prepareCompletion(req: CompletionRequest, signal?: AbortSignal): Promise<P>;
  complete(req: CompletionRequest, prepared: P, signal: AbortSignal, standing?: ShareStanding): AsyncIterable<CompletionDelta>;
}

/** The model's own tokenizer; it takes no slot (the scheduler's prepare step runs it). */
export interface TokenizePort {
  tokenize(req: TokenizeRequest, signal: AbortSignal): Promise<number[]>;
  /** 400 naming `tokens[i]` for an id outside the vocabulary. */
  detokenize(tokens: readonly number[], signal: AbortSignal): Promise<string>;
}

/** The port that serves each endpoint. */
export interface EndpointPorts {
  chat: ChatPort;
  embeddings: EmbedPort;
  rerank: RerankPort;
  transcriptions: TranscribePort;
  completions: CompletionPort;
  tokenize: TokenizePort;
}

/**
 * The one interface every engine implements: the ports of the endpoints its `support` lists (`portOf` in
 * capabilities.ts finds them), loading, and diagnostics. Engines know nothing of HTTP and never bound their own
 * concurrency: `src/scheduler` does.
 */
export interface Engine extends Partial<ChatPort>, Partial<EmbedPort>, Partial<RerankPort>, Partial<TranscribePort>, Partial<CompletionPort>, Partial<TokenizePort> {
  readonly support: EngineSupport;
  /** The served context window in tokens, once loaded. */
  readonly contextSize: number | null;
  load(signal?: AbortSignal): Promise<void>;
  unload(): Promise<void>;
  /** The upstreams behind the engine and their health, for engines that forward (diagnostics only). */
  upstreamStats?(): UpstreamStats[];
  /** Times to an upstream's answer (seconds) since the last call, per upstream URL, for the latency histogram. */
  takeUpstreamLatencies?(): Map<string, number[]>;
  /** Prompt tokens served from the KV cache, for engines that keep one per sequence (diagnostics and metrics). */
  promptCacheStats?(): PromptCacheStats;
  /**
   * Chat requests the engine can hold beyond `parallel` while it pauses generations over their share (see
   * ShareStanding): the scheduler starts an account under its share through them at once, instead of after a slot frees.
   */
  readonly pausableSlots?: number;
}
