import { createHash, randomUUID } from "node:crypto";
import type { FinishReason } from "../../engines/engine.ts";
import { AppError } from "../../errors/app-error.ts";
import type { Accumulator } from "../generation/accumulator.ts";
import type { ContentBlock, MessageObject, MessageUsage, StopReason } from "./messages.schema.ts";

/** `msg_…` and `toolu_…`: Anthropic's id prefixes on a random body. */
export function newId(prefix: "msg" | "toolu"): string {
  return `${prefix}_${randomUUID().replaceAll("-", "")}`;
}

/** Our finish reason in Anthropic's terms. */
export function stopReasonOf(reason: FinishReason): StopReason {
  return reason === "length" ? "max_tokens" : reason === "tool_calls" ? "tool_use" : "end_turn";
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
  if (args.trim().length === 0) return {};
  let input: unknown;
  try {
    input = JSON.parse(args);
  } catch {
    input = undefined;
  }
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new AppError("internal_error", { message: `The model's call to '${name}' did not produce a JSON object of arguments.` });
  }
  return input as Record<string, unknown>;
}

export function usageOf(promptTokens: number, completionTokens: number): MessageUsage {
  // Prefix reuse happens in the engines, which do not report it: no cached reads are claimed.
  return { input_tokens: promptTokens, output_tokens: completionTokens, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
}

/** The blocks of a finished generation, in the order a model produces them: thought, text, calls. */
export function contentOf(output: Accumulator): ContentBlock[] {
  const blocks: ContentBlock[] = [];
  if (output.reasoning.length > 0) blocks.push({ type: "thinking", thinking: output.reasoning, signature: signatureOf(output.reasoning) });
  if (output.content.length > 0 || output.toolCalls.length === 0) blocks.push({ type: "text", text: output.content });
  for (const call of output.toolCalls) {
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
  const reason = output.finishReason ?? "stop";
  return {
    id,
    type: "message",
    role: "assistant",
    model,
    content: contentOf(output),
    stop_reason: stopReasonOf(reason),
    stop_sequence: null,
    usage: usageOf(output.promptTokens, output.completionTokens),
  };
}
