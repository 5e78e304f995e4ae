import { randomUUID } from "node:crypto";
import type { ChatDelta, ChatMessage, ChatRequest, FinishReason, TokenLogprob } from "../engine.ts";

/** The OpenAI wire form of our validated chat request (§4.2): only fields every OpenAI-style server understands. */
export function toWireMessages(messages: ChatMessage[]): Record<string, unknown>[] {
  return messages.map((m) => {
    const wire: Record<string, unknown> = { role: m.role };
    if (typeof m.content === "string" || m.content === null) wire.content = m.content;
    else {
      wire.content = m.content.map((part) =>
        part.type === "text"
          ? { type: "text", text: part.text }
          : { type: "image_url", image_url: { url: `data:${part.mime};base64,${Buffer.from(part.data).toString("base64")}` } },
      );
    }
    if (m.toolCalls?.length) {
      wire.tool_calls = m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
    }
    if (m.toolCallId) wire.tool_call_id = m.toolCallId;
    return wire;
  });
}

export function toWireTools(req: ChatRequest): Record<string, unknown> {
  if (req.tools.length === 0) return {};
  return {
    tools: req.tools.map((t) => ({
      type: "function",
      function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.parameters ?? { type: "object", properties: {} } },
    })),
    tool_choice: typeof req.toolChoice === "string" ? req.toolChoice : { type: "function", function: { name: req.toolChoice.name } },
  };
}

export interface WireOptions {
  model: string;
  /** The completion budget to send, or null to leave it to the upstream. */
  maxTokens: number | null;
  defaults: { temperature?: number; topP?: number };
}

function toWireResponseFormat(req: ChatRequest): Record<string, unknown> {
  if (req.responseFormat === "json_object" || (req.responseFormat === "json_schema" && !req.jsonSchema?.schema)) {
    return { response_format: { type: "json_object" } };
  }
  if (req.responseFormat !== "json_schema" || !req.jsonSchema) return {};
  const { name, schema, strict } = req.jsonSchema;
  return { response_format: { type: "json_schema", json_schema: { name, schema, strict } } };
}

/** The upstream body: always streamed, with usage asked for, whatever our client asked. */
export function toWireChat(req: ChatRequest, options: WireOptions): Record<string, unknown> {
  const temperature = req.temperature ?? options.defaults.temperature;
  const topP = req.topP ?? options.defaults.topP;
  return {
    model: options.model,
    messages: toWireMessages(req.messages),
    stream: true,
    stream_options: { include_usage: true },
    ...(options.maxTokens !== null ? { max_tokens: options.maxTokens } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(topP !== undefined ? { top_p: topP } : {}),
    ...(req.seed !== null ? { seed: req.seed } : {}),
    ...(req.stop.length > 0 ? { stop: req.stop } : {}),
    ...toWireTools(req),
    ...toWireResponseFormat(req),
    ...(req.topLogprobs !== null ? { logprobs: true, top_logprobs: req.topLogprobs } : {}),
  };
}

interface WireToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

export interface WireChunk {
  choices?: {
    delta?: { content?: string | null; reasoning_content?: string | null; reasoning?: string | null; tool_calls?: WireToolCallDelta[] };
    logprobs?: { content?: TokenLogprob[] | null } | null;
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
  error?: unknown;
}

/** Finish reasons of the engines we front, in §6's three words. */
export function toFinishReason(reason: string): FinishReason {
  if (reason === "length") return "length";
  if (reason === "tool_calls" || reason === "function_call") return "tool_calls";
  return "stop";
}

/**
 * Turns an upstream's chunks into our deltas. Tool calls keep the upstream's ids, or get one when the upstream
 * sends none; reasoning arrives as `reasoning_content` (llama-server, vLLM ≤ 0.10, SGLang) or `reasoning` (vLLM ≥ 0.11).
 */
export class ChunkReader {
  finishReason: FinishReason | null = null;
  usage: { promptTokens: number; completionTokens: number } | null = null;
  /** The prompt tokens the upstream took from its cache, when it says (OpenAI's `prompt_tokens_details.cached_tokens`). */
  cachedPromptTokens: number | undefined;
  /** Content and reasoning pieces seen: the completion estimate when the upstream reports no usage. */
  pieces = 0;
  private readonly callsSeen = new Set<number>();

  read(chunk: WireChunk): ChatDelta[] {
    const out: ChatDelta[] = [];
    if (chunk.usage && typeof chunk.usage.prompt_tokens === "number") {
      this.usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens ?? 0 };
      const cached = chunk.usage.prompt_tokens_details?.cached_tokens;
      if (typeof cached === "number" && cached >= 0) this.cachedPromptTokens = cached;
    }
    const choice = chunk.choices?.[0];
    if (!choice) return out;
    const delta = choice.delta ?? {};
    const reasoning = delta.reasoning_content ?? delta.reasoning;
    if (reasoning) {
      this.pieces++;
      out.push({ type: "reasoning", text: reasoning });
    }
    const logprobs = choice.logprobs?.content ?? undefined;
    if (delta.content || logprobs?.length) {
      this.pieces += logprobs?.length || 1;
      out.push({ type: "content", text: delta.content ?? "", ...(logprobs ? { logprobs } : {}) });
    }
    for (const [position, call] of (delta.tool_calls ?? []).entries()) {
      const index = call.index ?? position;
      const first = !this.callsSeen.has(index);
      this.callsSeen.add(index);
      out.push(
        first
          ? { type: "tool_call", index, id: call.id || `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`, name: call.function?.name ?? "", arguments: call.function?.arguments ?? "" }
          : { type: "tool_call", index, arguments: call.function?.arguments ?? "" },
      );
    }
    if (choice.finish_reason) this.finishReason = toFinishReason(choice.finish_reason);
    return out;
  }
}
