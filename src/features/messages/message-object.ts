import { createHash, randomUUID } from "node:crypto";
import type { FinishReason } from "../../engines/engine.ts";
import { AppError } from "../../errors/app-error.ts";
import type { Accumulator } from "../generation/accumulator.ts";
import type { ContentBlock, MessageObject, MessageUsage, StopReason } from "./messages.schema.ts";

/** `msg_…` and `toolu_…`: Anthropic's id prefixes on a random body. */
export function newId(prefix: "msg" | "toolu"): string {
  return `${prefix}_${randomUUID().replaceAll("-", "")}`;
}

/** How the generation ended, in Anthropic's terms: a stop string is `stop_sequence` when the engine said which. */
export function stopOf(reason: FinishReason, output: Accumulator): { stop_reason: StopReason; stop_sequence: string | null } {
  if (reason === "stop" && output.stopSequence !== null) return { stop_reason: "stop_sequence", stop_sequence: output.stopSequence };
  return { stop_reason: reason === "length" ? "max_tokens" : reason === "tool_calls" ? "tool_use" : "end_turn", stop_sequence: null };
}

/**
 * A thinking block's signature: Anthropic's proves its thought unaltered; this one only names it (a digest of the
 * text), and a thought given back is never checked, since it is dropped from the prompt.
 */
export function signatureOf(thinking: string): string {
  return createHash("sha256").update(thinking).digest("base64");
}

/**
 * A tool call's arguments as the object a tool_use block carries. Arguments that do not parse to an object are an
 * error, never a half block (the model's grammar makes this rare).
 */
export function toolInput(name: string, args: string): Record<string, unknown> {
  const input = parsedInput(args);
  if (!input) throw new AppError("internal_error", { message: `The model's call to '${name}' did not produce a JSON object of arguments.` });
  return input;
}

/** A call's arguments as an object, or null when they are not one (cut short, or not JSON). */
function parsedInput(args: string): Record<string, unknown> | null {
  if (args.trim().length === 0) return {};
  try {
    const input: unknown = JSON.parse(args);
    return typeof input === "object" && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Anthropic's usage: as there, `input_tokens` are the prompt tokens not read from the cache, and the prompt is
 * their sum with `cache_read_input_tokens` (what the engine reused of its KV cache, where it says). Nothing is
 * written to a cache on request, so `cache_creation_input_tokens` is 0. Usage rows and billing count the whole prompt.
 */
export function usageOf(promptTokens: number, completionTokens: number, cachedPromptTokens = 0): MessageUsage {
  const cached = Math.min(cachedPromptTokens, promptTokens);
  return { input_tokens: promptTokens - cached, output_tokens: completionTokens, cache_read_input_tokens: cached, cache_creation_input_tokens: 0 };
}

/**
 * The blocks of a finished generation, in the order a model produces them: thought, text, calls. A call that
 * max_tokens cut short is left out (stop_reason max_tokens says why); any other that does not parse is an error.
 */
export function contentOf(output: Accumulator): ContentBlock[] {
  const blocks: ContentBlock[] = [];
  const cut = output.finishReason === "length";
  const calls = output.toolCalls.filter((call, i) => !(cut && i === output.toolCalls.length - 1 && parsedInput(call.function.arguments) === null));
  if (output.reasoning.length > 0) blocks.push({ type: "thinking", thinking: output.reasoning, signature: signatureOf(output.reasoning) });
  if (output.content.length > 0 || calls.length === 0) blocks.push({ type: "text", text: output.content });
  for (const call of calls) {
    blocks.push({ type: "tool_use", id: toolUseId(call.id), name: call.function.name, input: toolInput(call.function.name, call.function.arguments) });
  }
  return blocks;
}

/** An engine's call id as a tool_use id (the client sends it back in tool_result, and it comes back to us as is). */
export function toolUseId(callId: string): string {
  return callId.length > 0 ? callId : newId("toolu");
}

/** The whole message of a finished generation. */
export function messageOf(id: string, model: string, output: Accumulator): MessageObject {
  return {
    id,
    type: "message",
    role: "assistant",
    model,
    content: contentOf(output),
    ...stopOf(output.finishReason ?? "stop", output),
    usage: usageOf(output.promptTokens, output.completionTokens, output.cachedPromptTokens),
  };
}
