import type { Plan } from "../../config/app-config.ts";
import type { ChatMessage, ChatRequest, ContentPart } from "../../engines/engine.ts";
import { invalid, outputLength, toResponseFormat, toToolChoice } from "../generation/generation.request.ts";
import { decodeImagePart } from "../generation/image-parts.ts";
import type { CreateResponseRequest, InputItem } from "./responses.schema.ts";

type Message = Extract<InputItem, { role: string }>;

function toContent(item: Message, param: string): string | ContentPart[] {
  if (typeof item.content === "string") return item.content;
  return item.content.map((part, j): ContentPart => {
    const partParam = `${param}.content[${j}]`;
    switch (part.type) {
      case "input_text":
      case "output_text":
        return { type: "text", text: part.text };
      case "refusal":
        return { type: "text", text: part.refusal };
      case "input_image": {
        if (item.role === "assistant") invalid(`${partParam}.type`, "Only user, system and developer messages carry images.");
        return decodeImagePart(part.image_url, partParam, `${partParam}.image_url`);
      }
    }
  });
}

function textOf(content: string | ContentPart[]): string {
  return typeof content === "string" ? content : content.map((p) => (p.type === "text" ? p.text : "")).join("");
}

/** The conversation as chat messages: function calls join the assistant turn they belong to, outputs become tool messages. */
function toMessages(body: CreateResponseRequest): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") {
    messages.push({ role: "user", content: body.input });
    return messages;
  }
  body.input.forEach((item, i) => {
    const param = `input[${i}]`;
    if ("role" in item) {
      const content = toContent(item, param);
      if (item.role === "assistant") messages.push({ role: "assistant", content: textOf(content) });
      else messages.push({ role: item.role === "developer" ? "system" : item.role, content });
      return;
    }
    switch (item.type) {
      case "function_call": {
        const call = { id: item.call_id, name: item.name, arguments: item.arguments };
        const last = messages.at(-1);
        if (last?.role === "assistant") (last.toolCalls ??= []).push(call);
        else messages.push({ role: "assistant", content: null, toolCalls: [call] });
        return;
      }
      case "function_call_output": {
        const output = typeof item.output === "string" ? item.output : item.output.map((p) => p.text).join("");
        messages.push({ role: "tool", content: output, toolCallId: item.call_id });
        return;
      }
      case "reasoning":
        return;
      case "item_reference":
        invalid(param, "item_reference needs a stored response, and responses are not stored here: send the item itself (with the AI SDK, providerOptions.openai.store: false).");
    }
  });
  if (messages.length === 0 || messages.every((m) => m.role === "system")) invalid("input", "input needs at least one message.");
  return messages;
}

/** What needs stored state, or a background worker, is refused naming the field (the subset is stateless). */
function refuseStateful(body: CreateResponseRequest): void {
  if (body.previous_response_id != null) invalid("previous_response_id", "previous_response_id is not supported: responses are not stored; send the whole conversation in input.");
  if (body.store === true) invalid("store", "store: true is not supported: responses are not stored; omit store or set it to false.");
  if (body.background === true) invalid("background", "background responses are not supported.");
}

/** Turns a Responses API request into the engine's chat request (the checks chat makes, with this API's parameter names). */
export function toResponseChatRequest(body: CreateResponseRequest, plan: Plan): ChatRequest {
  refuseStateful(body);
  const messages = toMessages(body);
  const length = outputLength(body.max_output_tokens ?? null, "max_output_tokens", plan);

  const format = body.text?.format;
  if (format?.type === "json_schema" && !format.name) invalid("text.format.name", "text.format json_schema needs a name.");
  const responseFormat = toResponseFormat(
    format ? { type: format.type, ...(format.type === "json_schema" ? { json_schema: { name: format.name!, schema: format.schema, strict: format.strict } } : {}) } : null,
    "text.format",
  );

  const tools = (body.tools ?? []).map((t, i) => {
    if (t.type !== "function") invalid(`tools[${i}].type`, `Built-in tools (${t.type}) are not served here; only function tools.`);
    return { name: t.name, description: t.description ?? undefined, parameters: t.parameters ?? undefined };
  });
  const choice = body.tool_choice;
  const toolChoice = toToolChoice(tools, (i) => `tools[${i}].name`, typeof choice === "object" && choice ? { name: choice.name } : choice);

  return {
    messages,
    ...length,
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
    seed: null,
    stop: [],
    tools,
    toolChoice,
    ...responseFormat,
    topLogprobs: null,
  };
}
