import type { Capability } from "../config/config.schema.ts";

/**
 * The one interface every engine implements. Engines know nothing of HTTP: they take typed requests and an
 * AbortSignal, throw AppError for request problems they detect (context_length_exceeded, invalid_parameter),
 * and yield typed deltas. The scheduler (src/scheduler) bounds how many calls run at once.
 */

export type ImagePart = { type: "image"; data: Uint8Array; mime: "image/png" | "image/jpeg"; param: string };
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
}

export type ToolChoice = "auto" | "none" | "required" | { name: string };

export interface ChatRequest {
  messages: ChatMessage[];
  maxTokens: number | null;
  temperature: number | null;
  topP: number | null;
  seed: number | null;
  stop: string[];
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  responseFormat: "text" | "json_object";
  /** null: no logprobs; otherwise how many alternatives per token (0..20). */
  topLogprobs: number | null;
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
  | { type: "done"; finishReason: FinishReason; usage: Usage };

/** A chat request after the engine has templated and tokenized it, ready to run. */
export interface PreparedChat {
  promptTokens: number;
  /** Effective completion budget (max_tokens or what the context leaves). */
  maxTokens: number;
}

export interface EmbedRequest {
  inputs: string[];
}
export interface EmbedResult {
  vectors: Float32Array[];
  promptTokens: number;
}

export interface RerankRequest {
  query: string;
  documents: string[];
}
export interface RerankResult {
  /** One score per document, in request order. */
  scores: number[];
  promptTokens: number;
}

export interface TranscribeRequest {
  /** 16 kHz mono PCM. */
  audio: Float32Array;
  /** ISO-639-1 code, or null to detect. */
  language: string | null;
  prompt: string | null;
  temperature: number;
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
  duration: number;
  segments: TranscriptSegment[];
  /** Text tokens generated, for usage. */
  completionTokens: number;
}

export interface Engine {
  readonly capabilities: ReadonlySet<Capability>;
  /** The served context window in tokens, once loaded. */
  readonly contextSize: number | null;
  load(signal?: AbortSignal): Promise<void>;
  unload(): Promise<void>;
  /** Templates and tokenizes; throws context_length_exceeded before any work is queued. */
  prepareChat?(req: ChatRequest): Promise<PreparedChat>;
  chat?(req: ChatRequest, prepared: PreparedChat, signal: AbortSignal): AsyncIterable<ChatDelta>;
  /** Tokenizes and checks input lengths before capacity is taken (400 before 503); throws invalid_parameter. */
  prepareEmbed?(req: EmbedRequest): unknown;
  embed?(req: EmbedRequest, signal: AbortSignal): Promise<EmbedResult>;
  transcribe?(req: TranscribeRequest, signal: AbortSignal): Promise<Transcript>;
  /** Checks input lengths before capacity is taken (a 400 must answer before a 503); throws invalid_parameter. */
  prepareRerank?(req: RerankRequest): { promptTokens: number };
  rerank?(req: RerankRequest, signal: AbortSignal): Promise<RerankResult>;
}
