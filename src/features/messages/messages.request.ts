import type { Plan } from "../../config/app-config.ts";
import type { ChatMessage, ChatRequest, ContentPart, ToolChoice, ToolDefinition } from "../../engines/engine.ts";
import { invalid, toToolChoice } from "../generation/generation.request.ts";
import { decodeImagePart } from "../generation/image-parts.ts";
import type { ContentBlockParam, CountTokensRequest, ImageBlockParam, MessageParam, MessagesRequest, TextBlockParam, ToolParam } from "./messages.schema.ts";

/*
 * Anthropic's Messages request as the engine's ChatRequest: the system prompt first (with any `role: "system"`
 * message folded into it), tool_result blocks as tool messages, tool_use blocks as the assistant turn's calls, and
 * thoughts given back dropped (as chat drops reasoning_content). Every 400 names the field as the client sent it.
 */

function imagePart(block: ImageBlockParam, param: string): ContentPart {
  const source = block.source;
  if (source.type === "url") return decodeImagePart(source.url, param, `${param}.source.url`);
  return decodeImagePart(`data:${source.media_type};base64,${source.data}`, param, `${param}.source.data`);
}

function textOf(blocks: readonly TextBlockParam[]): string {
  return blocks.map((b) => b.text).join("\n\n");
}

/** Text and images as a message's content: a string when it is all text. */
function contentOf(parts: ContentPart[]): string | ContentPart[] {
  return parts.every((p) => p.type === "text") ? parts.map((p) => p.text).join("") : parts;
}

function toolResult(block: Extract<ContentBlockParam, { type: "tool_result" }>, param: string): ChatMessage {
  const content = block.content ?? "";
  const parts: ContentPart[] =
    typeof content === "string" ? [{ type: "text", text: content }] : content.map((b, k) => (b.type === "text" ? { type: "text", text: b.text } : imagePart(b, `${param}.content[${k}]`)));
  // Marked, so the model reads a failed call as one (the templates have no field for it).
  if (block.is_error === true) parts.unshift({ type: "text", text: "Error: " });
  return { role: "tool", content: contentOf(parts), toolCallId: block.tool_use_id };
}

/** A user turn: its tool results become tool messages (in order), the rest of its text and images one user message. */
function userMessages(content: string | ContentBlockParam[], param: string): ChatMessage[] {
  if (typeof content === "string") return [{ role: "user", content }];
  const messages: ChatMessage[] = [];
  let parts: ContentPart[] = [];
  const flush = () => {
    if (parts.length > 0) messages.push({ role: "user", content: contentOf(parts) });
    parts = [];
  };
  content.forEach((block, j) => {
    const blockParam = `${param}.content[${j}]`;
    switch (block.type) {
      case "text":
        parts.push({ type: "text", text: block.text });
        return;
      case "image":
        parts.push(imagePart(block, blockParam));
        return;
      case "tool_result":
        flush();
        messages.push(toolResult(block, blockParam));
        return;
      case "tool_use":
        invalid(`${blockParam}.type`, "tool_use blocks belong to assistant messages.");
      // Thoughts are the assistant's; in a user turn they are dropped as well.
      case "thinking":
      case "redacted_thinking":
        return;
    }
  });
  flush();
  return messages;
}

/** An assistant turn: its text, and its tool_use blocks as calls (arguments as the JSON the wire carries). */
function assistantMessage(content: string | ContentBlockParam[], param: string): ChatMessage {
  if (typeof content === "string") return { role: "assistant", content };
  let text = "";
  const toolCalls: NonNullable<ChatMessage["toolCalls"]> = [];
  content.forEach((block, j) => {
    const blockParam = `${param}.content[${j}]`;
    switch (block.type) {
      case "text":
        text += block.text;
        return;
      case "tool_use":
        if (typeof block.input !== "object" || block.input === null || Array.isArray(block.input)) invalid(`${blockParam}.input`, "A tool_use block's input must be an object.");
        toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input) });
        return;
      case "image":
      case "tool_result":
        invalid(`${blockParam}.type`, `${block.type} blocks belong to user messages.`);
      case "thinking":
      case "redacted_thinking":
        return;
    }
  });
  return { role: "assistant", content: text.length > 0 || toolCalls.length === 0 ? text : null, toolCalls: toolCalls.length > 0 ? toolCalls : undefined };
}

function systemText(message: MessageParam, param: string): string {
  if (typeof message.content === "string") return message.content;
  return message.content
    .map((block, j) => (block.type === "text" ? block.text : invalid(`${param}.content[${j}].type`, "A system message holds text blocks only.")))
    .join("\n\n");
}

/**
 * Anthropic's rule for calls, checked here so the 400 names its blocks: each tool_use is answered by a tool_result
 * in the user turn right after it, and a tool_result answers a tool_use of the turn before.
 */
class CallLedger {
  private pending = new Map<string, string>();

  called(content: MessageParam["content"], param: string): void {
    this.settle();
    if (typeof content === "string") return;
    content.forEach((block, j) => {
      if (block.type === "tool_use") this.pending.set(block.id, `${param}.content[${j}]`);
    });
  }

  answered(content: MessageParam["content"], param: string): void {
    if (typeof content !== "string") {
      content.forEach((block, j) => {
        if (block.type !== "tool_result") return;
        if (!this.pending.delete(block.tool_use_id)) invalid(`${param}.content[${j}].tool_use_id`, `No tool_use block of the assistant turn before has the id '${block.tool_use_id}'.`);
      });
    }
    this.settle();
  }

  /** A turn went by: every call before it must have had its result. */
  settle(): void {
    for (const where of this.pending.values()) invalid(where, "Every tool_use block must be answered by a tool_result block with its id in the next user message.");
  }
}

function toMessages(body: CountTokensRequest): ChatMessage[] {
  const system: string[] = [];
  if (body.system !== undefined) system.push(typeof body.system === "string" ? body.system : textOf(body.system));
  const turns: ChatMessage[] = [];
  const calls = new CallLedger();
  body.messages.forEach((message, i) => {
    const param = `messages[${i}]`;
    if (message.role === "system") system.push(systemText(message, param));
    else if (message.role === "user") {
      calls.answered(message.content, param);
      turns.push(...userMessages(message.content, param));
    } else {
      calls.called(message.content, param);
      turns.push(assistantMessage(message.content, param));
    }
  });
  calls.settle();
  if (turns.length === 0) invalid("messages", "messages needs at least one user or assistant message.");
  const prompt = system.filter((s) => s.length > 0).join("\n\n");
  return prompt.length > 0 ? [{ role: "system", content: prompt }, ...turns] : turns;
}

/** Custom tools as function definitions; Anthropic's own server tools (typed, without a schema) are not served here. */
function toTools(tools: ToolParam[] | undefined): { tools: ToolDefinition[]; served: number[] } {
  const served: number[] = [];
  const definitions: ToolDefinition[] = [];
  (tools ?? []).forEach((tool, i) => {
    if (tool.type !== undefined && tool.type !== "custom") return;
    served.push(i);
    definitions.push({
      name: tool.name,
      description: tool.description,
      parameters: tool.input_schema ?? { type: "object", properties: {} },
      parametersParam: `tools[${i}].input_schema`,
      // Anthropic guarantees a tool's schema only with strict: true; without it, the schema guides the call.
      looseParameters: tool.strict !== true,
    });
  });
  return { tools: definitions, served };
}

function toChoice(body: CountTokensRequest, tools: ToolDefinition[], served: number[]): ToolChoice {
  const choice = body.tool_choice;
  const wire: ToolChoice | null = choice === undefined ? null : choice.type === "tool" ? { name: choice.name } : choice.type === "any" ? "required" : choice.type;
  if (tools.length === 0 && (wire === null || wire === "auto" || wire === "none")) return "none";
  return toToolChoice(tools, (i) => `tools[${served[i]}].name`, wire);
}

/**
 * The request's conversation, tools and thinking as the engine takes them (what count_tokens counts, and messages
 * runs). `thinking: disabled` switches a reasoning model's thought off where the engine can; `enabled` and
 * `adaptive` leave the model's default (a reasoning model thinks).
 */
function toConversation(body: CountTokensRequest): Pick<ChatRequest, "messages" | "tools" | "toolChoice" | "reasoning"> {
  const messages = toMessages(body);
  const { tools, served } = toTools(body.tools);
  return { messages, tools, toolChoice: toChoice(body, tools, served), ...(body.thinking?.type === "disabled" ? { reasoning: false } : {}) };
}

/**
 * POST /v1/messages as a ChatRequest. `max_tokens` is a ceiling, not a demand: it is passed as the output cap (with
 * the plan's), so the engine fits it to what the window leaves after the prompt instead of refusing, as llama-server
 * and Ollama do; only a prompt that alone fills the window is refused ("prompt is too long").
 */
export function toMessagesChatRequest(body: MessagesRequest, plan: Plan): ChatRequest {
  return {
    ...toConversation(body),
    maxTokens: null,
    outputCap: Math.min(body.max_tokens, plan.maxOutputTokens ?? Number.MAX_SAFE_INTEGER),
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
    seed: null,
    stop: body.stop_sequences ?? [],
    responseFormat: "text",
    topLogprobs: null,
  };
}

/** POST /v1/messages/count_tokens: the same conversation, templated and counted, nothing generated. */
export function toCountTokensChatRequest(body: CountTokensRequest, plan: Plan): ChatRequest {
  return { ...toConversation(body), maxTokens: null, outputCap: plan.maxOutputTokens, temperature: null, topP: null, seed: null, stop: [], responseFormat: "text", topLogprobs: null };
}
