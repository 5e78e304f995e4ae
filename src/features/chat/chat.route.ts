import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { SseStream } from "../../http/sse.ts";
import { requestContext } from "../request-context.ts";
import { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "./chat.schema.ts";
import { completeChat, streamChat } from "./chat.service.ts";

export default async function chatRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: ChatCompletionRequest }>(
    "/chat/completions",
    {
      schema: {
        operationId: "createChatCompletion",
        tags: ["chat"],
        summary: "§4.2 chat completion, or an event stream of chunks with stream: true (§6)",
        body: Type.Ref(ChatCompletionRequest),
        response: {
          200: {
            description: "The completion (application/json), or with stream: true a text/event-stream of chunks ending in data: [DONE]",
            content: {
              "application/json": { schema: Type.Ref(ChatCompletion) },
              "text/event-stream": { schema: Type.Ref(ChatCompletionChunk) },
            },
          },
          ...inferenceErrors,
        },
      },
      config: { endpoint: "chat" },
    },
    async (request, reply) => {
      const context = requestContext(request, reply);
      if (request.body.stream !== true) return completeChat(app.ctx, context, request.body);
      await streamChat(app.ctx, context, request.body, new SseStream(reply, undefined, app.ctx.streams));
      return reply;
    },
  );
}
