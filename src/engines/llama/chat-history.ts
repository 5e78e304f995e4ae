import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelResponse } from "node-llama-cpp";
import type { ChatMessage, ContentPart } from "../engine.ts";
import { AppError } from "../../errors/app-error.ts";

function textOf(content: string | ContentPart[] | null, index: number): string {
  if (content === null) return "";
  if (typeof content === "string") return content;
  return content
    .map((part, j) => {
      if (part.type === "text") return part.text;
      throw new AppError("invalid_parameter", {
        param: `messages[${index}].content[${j}]`,
        message: "This model does not accept image content parts.",
      });
    })
    .join("\n");
}

function parseResult(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * Maps OpenAI-style messages onto node-llama-cpp's chat history. An assistant message's tool calls become
 * function-call items of the model response; the `tool` messages that follow fill in their results (matched by
 * `tool_call_id`), and an assistant message right after them continues the same model response, which is how
 * the chat templates render a tool round trip. The history always ends in a model response to generate into.
 */
export function toChatHistory(messages: ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const pendingCalls = new Map<string, { call: ChatModelFunctionCall; param: string }>();
  let openResponse: ChatModelResponse | null = null;

  messages.forEach((message, i) => {
    if (message.role === "tool") {
      const id = message.toolCallId ?? "";
      const pending = pendingCalls.get(id);
      if (!pending) {
        throw new AppError("invalid_parameter", {
          param: `messages[${i}].tool_call_id`,
          message: `No preceding assistant tool call has the id '${id}'.`,
        });
      }
      pending.call.result = parseResult(textOf(message.content, i));
      pendingCalls.delete(id);
      return;
    }
    assertAnswered(pendingCalls);
    if (message.role === "system") {
      history.push({ type: "system", text: textOf(message.content, i) });
      openResponse = null;
    } else if (message.role === "user") {
      history.push({ type: "user", text: textOf(message.content, i) });
      openResponse = null;
    } else {
      const last: ChatModelResponse | null = openResponse;
      const continues = last !== null && last.response.length > 0 && typeof last.response.at(-1) === "object";
      const response: ChatModelResponse = continues ? last : { type: "model", response: [] };
      if (!continues) history.push(response);
      const text = textOf(message.content, i);
      if (text.length > 0) response.response.push(text);
      (message.toolCalls ?? []).forEach((call, j) => {
        let params: unknown;
        try {
          params = JSON.parse(call.arguments);
        } catch {
          throw new AppError("invalid_parameter", {
            param: `messages[${i}].tool_calls[${j}].function.arguments`,
            message: "Tool call arguments must be a JSON-encoded string.",
          });
        }
        const item: ChatModelFunctionCall = {
          type: "functionCall",
          name: call.name,
          params,
          result: undefined,
          startsNewChunk: j === 0 ? true : undefined,
        };
        response.response.push(item);
        pendingCalls.set(call.id, { call: item, param: `messages[${i}].tool_calls[${j}]` });
      });
      openResponse = response;
    }
  });
  assertAnswered(pendingCalls);
  const last = history.at(-1);
  const lastIsOpenModel = last?.type === "model" && (last.response.length === 0 || typeof last.response.at(-1) === "string");
  const lastIsAnsweredCalls = last?.type === "model" && typeof last.response.at(-1) === "object";
  if (!lastIsOpenModel && !lastIsAnsweredCalls) history.push({ type: "model", response: [] });
  return history;
}

function assertAnswered(pending: Map<string, { param: string }>): void {
  for (const { param } of pending.values()) {
    throw new AppError("invalid_parameter", {
      param,
      message: "Every assistant tool call must be answered by a `tool` message with its tool_call_id before the next message.",
    });
  }
}
