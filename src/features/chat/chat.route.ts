import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { requestSignal } from "../../http/request-signal.ts";
import { SseStream } from "../../http/sse.ts";
import { ChatCompletionRequest } from "./chat.schema.ts";
import { completeChat, streamChat } from "./chat.service.ts";

export default async function chatRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: ChatCompletionRequest }>(
    "/v1/chat/completions",
    { schema: { body: ChatCompletionRequest, response: inferenceErrors }, config: { endpoint: "chat" } },
    async (request, reply) => {
      const signalFor = (deadlineMs: number) => requestSignal(request, reply, deadlineMs);
      if (request.body.stream !== true) return completeChat(app.ctx, request.auth!, request.body, signalFor);
      await streamChat(app.ctx, request.auth!, request.body, new SseStream(reply), signalFor);
      return reply;
    },
  );
}
