import type { AppContext } from "../../app-context.ts";
import type { ChatRequest } from "../../engines/engine.ts";
import type { SseStream } from "../../http/sse.ts";
import { collectChat, streamChatTo } from "../generation/run-chat.ts";
import { prepareInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import { messageOf, newId } from "./message-object.ts";
import { MessageStreamWriter } from "./message-stream.ts";
import type { CountTokensRequest, CountTokensResponse, MessageObject, MessagesRequest } from "./messages.schema.ts";
import { toCountTokensChatRequest, toMessagesChatRequest } from "./messages.request.ts";

/**
 * Anthropic's clients send their tools with every request (Claude Code sends a few dozen). A model (or route)
 * without the `tools` capability may still answer in text: its tools are left out, unless the request asks for a
 * call (`any`, or a named tool), which the capability check then refuses naming `tools`.
 */
function toolsItCanTake(ctx: AppContext, model: string, req: ChatRequest): ChatRequest {
  if (req.tools.length === 0 || req.toolChoice === "required" || typeof req.toolChoice === "object") return req;
  const capabilities = ctx.catalog.named(model)?.entry.capabilities;
  if (!capabilities || capabilities.includes("tools")) return req;
  return { ...req, tools: [], toolChoice: "none" };
}

function chatRequestOf(ctx: AppContext, request: RequestContext, body: MessagesRequest): ChatRequest {
  return toolsItCanTake(ctx, body.model, toMessagesChatRequest(body, request.auth.plan));
}

/** POST /v1/messages without stream: the generation runs on the chat path, and the output comes back as blocks. */
export async function createMessage(ctx: AppContext, request: RequestContext, body: MessagesRequest): Promise<MessageObject> {
  const req = chatRequestOf(ctx, request, body);
  const { output } = await collectChat(ctx, request, body.model, req);
  return messageOf(newId("msg"), answerModel(request, body.model), output);
}

/** The writer whose `error` event ends this message's stream (the stream is built with its failure frame). */
export function messageStreamWriter(body: MessagesRequest, request: RequestContext): MessageStreamWriter {
  return new MessageStreamWriter(newId("msg"), () => answerModel(request, body.model));
}

/**
 * POST /v1/messages with stream: true: Anthropic's event sequence (message-stream.ts). Pings start at once, not only
 * once queued: a long prompt's prefill is a wait as well, and Anthropic's clients time out a silent stream.
 */
export async function streamMessage(ctx: AppContext, request: RequestContext, body: MessagesRequest, sse: SseStream, writer: MessageStreamWriter): Promise<void> {
  const req = chatRequestOf(ctx, request, body);
  writer.attach(sse);
  sse.keepAliveUntilFirstFrame();
  await streamChatTo(ctx, request, body.model, req, sse, writer);
}

/**
 * POST /v1/messages/count_tokens: the conversation templated and counted by the model's engine, as a message would
 * be before it runs (the same checks and 400s), without a slot, a reservation or usage; counted as a request.
 */
export async function countTokens(ctx: AppContext, request: RequestContext, body: CountTokensRequest): Promise<CountTokensResponse> {
  const req = toolsItCanTake(ctx, body.model, toCountTokensChatRequest(body, request.auth.plan));
  const { prepared } = await prepareInference(ctx, request, {
    model: body.model,
    port: "chat",
    chat: req,
    input: { kind: "chat", req },
    prepare: (port, signal) => port.prepareChat(req, signal),
  });
  return { input_tokens: prepared.promptTokens };
}
