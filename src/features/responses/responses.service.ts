import type { AppContext } from "../../app-context.ts";
import type { SseStream } from "../../http/sse.ts";
import { collectChat, streamChatTo } from "../generation/run-chat.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import { endStatus, outputItemsOf, ResponseHead } from "./response-object.ts";
import { ResponseStreamWriter } from "./response-stream.ts";
import type { CreateResponseRequest, ResponseObject } from "./responses.schema.ts";
import { toResponseChatRequest } from "./responses.request.ts";

/** POST /v1/responses without stream: the generation runs on the chat path, and the output comes back as items. */
export async function createResponse(ctx: AppContext, request: RequestContext, body: CreateResponseRequest): Promise<ResponseObject> {
  const req = toResponseChatRequest(body, request.auth.plan);
  const head = new ResponseHead(body, () => answerModel(request, body.model));
  const { output } = await collectChat(ctx, request, body.model, req);
  const reason = output.finishReason ?? "stop";
  const status = endStatus(reason);
  return head.snapshot(status, outputItemsOf(output, status), { output, finishReason: reason });
}

/** The writer whose `response.failed` ends this response's stream (the stream is built with its failure frame). */
export function responseStreamWriter(body: CreateResponseRequest, request: RequestContext): ResponseStreamWriter {
  return new ResponseStreamWriter(new ResponseHead(body, () => answerModel(request, body.model)));
}

/** POST /v1/responses with stream: true: the Responses API's event sequence (response-stream.ts). */
export async function streamResponse(ctx: AppContext, request: RequestContext, body: CreateResponseRequest, sse: SseStream, writer: ResponseStreamWriter): Promise<void> {
  const req = toResponseChatRequest(body, request.auth.plan);
  writer.attach(sse);
  await streamChatTo(ctx, request, body.model, req, sse, writer);
}
