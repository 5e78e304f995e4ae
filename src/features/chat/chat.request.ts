import type { Plan } from "../../config/app-config.ts";
import type { ChatMessage, ChatRequest, ContentPart } from "../../engines/engine.ts";
import { invalid, outputLength, toResponseFormat, toToolChoice } from "../generation/generation.request.ts";
import { decodeImagePart } from "../generation/image-parts.ts";
import type { ChatCompletionRequest, ChatMessageBody } from "./chat.schema.ts";

function toContent(message: ChatMessageBody, i: number): string | ContentPart[] | null {
  const content = message.content ?? null;
  if (content === null || typeof content === "string") return content;
  return content.map((part, j): ContentPart => {
    const param = `messages[${i}].content[${j}]`;
    if (part.type === "text") return { type: "text", text: part.text };
    return decodeImagePart(part.image_url.url, param);
  });
}

function toMessage(message: ChatMessageBody, i: number): ChatMessage {
  const content = toContent(message, i);
  const role = message.role === "developer" ? "system" : message.role;
  if (role === "tool") {
    if (!message.tool_call_id) invalid(`messages[${i}].tool_call_id`, "A tool message needs the tool_call_id it answers.");
    return { role, content: content ?? "", toolCallId: message.tool_call_id };
  }
  if (role === "assistant") {
    const toolCalls = (message.tool_calls ?? []).map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }));
    if (content === null && toolCalls.length === 0) invalid(`messages[${i}].content`, "An assistant message needs content or tool_calls.");
    return { role, content, toolCalls: toolCalls.length > 0 ? toolCalls : undefined };
  }
  if (content === null) invalid(`messages[${i}].content`, `A ${message.role} message needs content.`);
  if (message.tool_calls) invalid(`messages[${i}].tool_calls`, "Only assistant messages carry tool_calls.");
  return { role, content };
}

/**
 * Turns the wire request into the engine's typed request, checking what the schema cannot: role-specific message
 * rules, image data URLs, parameter combinations and the plan's output cap. These are parameter errors, so they
 * come before the model lookup (decisions.md order).
 */
export function toChatRequest(body: ChatCompletionRequest, plan: Plan): ChatRequest {
  const messages = body.messages.map((m, i) => toMessage(m, i));

  const maxTokensParam = body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
  const length = outputLength(body.max_completion_tokens ?? body.max_tokens ?? null, maxTokensParam, plan);

  if (body.top_logprobs != null && body.logprobs !== true) invalid("top_logprobs", "top_logprobs requires logprobs: true.");
  const format = toResponseFormat(body.response_format, "response_format");

  const tools = (body.tools ?? []).map((t) => ({ name: t.function.name, description: t.function.description, parameters: t.function.parameters }));
  const choice = body.tool_choice;
  const toolChoice = toToolChoice(tools, (i) => `tools[${i}].function.name`, typeof choice === "object" && choice ? { name: choice.function.name } : choice);

  const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  return {
    messages,
    ...length,
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
    seed: body.seed ?? null,
    stop,
    tools,
    toolChoice,
    ...format,
    topLogprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : null,
  };
}
