import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { SseStream } from "../../http/sse.ts";
import { requestContext } from "../request-context.ts";
import { CreateResponseRequest, ResponseObject, ResponseStreamEvent } from "./responses.schema.ts";
import { createResponse, responseStreamWriter, streamResponse } from "./responses.service.ts";

export default async function responsesRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: CreateResponseRequest }>(
    "/responses",
    {
      schema: {
        operationId: "createResponse",
        tags: ["chat"],
        summary: "The stateless subset of the Responses API on the chat path (the chat endpoint scope covers it)",
        body: Type.Ref(CreateResponseRequest),
        response: {
          200: {
            description: "The response (application/json), or with stream: true a text/event-stream of named events ending in response.completed, response.incomplete or response.failed",
            content: {
              "application/json": { schema: Type.Ref(ResponseObject) },
              "text/event-stream": { schema: Type.Ref(ResponseStreamEvent) },
            },
          },
          ...inferenceErrors,
        },
      },
      config: { endpoint: "chat" },
    },
    async (request, reply) => {
      const context = requestContext(request, reply);
      if (request.body.stream !== true) return createResponse(app.ctx, context, request.body);
      const writer = responseStreamWriter(request.body, context);
      await streamResponse(app.ctx, context, request.body, new SseStream(reply, undefined, app.ctx.streams, writer.failureFrame), writer);
      return reply;
    },
  );
}
