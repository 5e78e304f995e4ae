import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { SseStream } from "../../http/sse.ts";
import { requestContext } from "../request-context.ts";
import { Completion, CreateCompletionRequest } from "./completions.schema.ts";
import { completeText, streamText } from "./completions.service.ts";

export default async function completionsRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: CreateCompletionRequest }>(
    "/completions",
    {
      schema: {
        operationId: "createCompletion",
        tags: ["completions"],
        summary: "Legacy text completion of a raw prompt (no chat template): fill-in-the-middle with suffix, the prompt's own logprobs with echo",
        body: Type.Ref(CreateCompletionRequest),
        response: {
          200: {
            description: "The completion (application/json), or with stream: true a text/event-stream of completion events ending in data: [DONE]",
            content: {
              "application/json": { schema: Type.Ref(Completion) },
              "text/event-stream": { schema: Type.Ref(Completion) },
            },
          },
          ...inferenceErrors,
        },
      },
      // Text generation, as chat: a chat key may call it, under the same plan, limits and usage.
      config: { endpoint: "chat" },
    },
    async (request, reply) => {
      const context = requestContext(request, reply);
      if (request.body.stream !== true) return completeText(app.ctx, context, request.body);
      await streamText(app.ctx, context, request.body, new SseStream(reply, undefined, app.ctx.streams));
      return reply;
    },
  );
}
