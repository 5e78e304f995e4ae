import { Type, type TSchema } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { SseStream } from "../../http/sse.ts";
import { requestContext } from "../request-context.ts";
import { AnthropicErrorEnvelope, CountTokensRequest, CountTokensResponse, MessageObject, MessagesRequest, MessageStreamEvent } from "./messages.schema.ts";
import { countTokens, createMessage, messageStreamWriter, streamMessage } from "./messages.service.ts";
import { MessageStreamWriter } from "./message-stream.ts";

const meaning: Record<number, string> = {
  400: "invalid_request_error: a malformed request, an invalid parameter, or a prompt too long for the model",
  401: "authentication_error: the key is missing, malformed or revoked",
  403: "permission_error: the model or endpoint is outside the key's plan, or the address is not allowed",
  404: "not_found_error: an unknown model or path",
  413: "request_too_large: the body is over the plan's size limit",
  429: "rate_limit_error: see Retry-After and the anthropic-ratelimit-* headers",
  500: "api_error: an unexpected server error",
  529: "overloaded_error: the model is loading or at capacity (our 503); see Retry-After",
};

/** Every error of these routes, in Anthropic's envelope (the anthropic scope's error handler writes it). */
const anthropicErrors: Record<number, TSchema> = Object.fromEntries(Object.entries(meaning).map(([status, description]) => [status, Type.Ref(AnthropicErrorEnvelope, { description })]));

/** Routes under /v1/messages (src/scopes/anthropic.scope.ts): Anthropic's Messages API on the chat path. */
export default async function messagesRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: MessagesRequest }>(
    "",
    {
      schema: {
        operationId: "createMessage",
        tags: ["chat"],
        summary: "Anthropic's Messages API on the chat path (the chat endpoint scope covers it); a key in x-api-key or Authorization: Bearer",
        body: Type.Ref(MessagesRequest),
        response: {
          200: {
            description: "The message (application/json), or with stream: true a text/event-stream of named events ending in message_stop or error",
            content: {
              "application/json": { schema: Type.Ref(MessageObject) },
              "text/event-stream": { schema: Type.Ref(MessageStreamEvent) },
            },
          },
          ...anthropicErrors,
        },
      },
      config: { endpoint: "chat" },
    },
    async (request, reply) => {
      const context = requestContext(request, reply);
      if (request.body.stream !== true) return createMessage(app.ctx, context, request.body);
      const writer = messageStreamWriter(request.body, context);
      const sse = new SseStream(reply, undefined, app.ctx.streams, writer.failureFrame, MessageStreamWriter.ping);
      await streamMessage(app.ctx, context, request.body, sse, writer);
      return reply;
    },
  );

  app.post<{ Body: CountTokensRequest }>(
    "/count_tokens",
    {
      schema: {
        operationId: "countMessageTokens",
        tags: ["chat"],
        summary: "Anthropic's token count: the input tokens of a Messages body with the model's own template and tokenizer; takes no slot",
        body: Type.Ref(CountTokensRequest),
        response: { 200: Type.Ref(CountTokensResponse), ...anthropicErrors },
      },
      config: { endpoint: "chat" },
    },
    async (request, reply) => countTokens(app.ctx, requestContext(request, reply), request.body),
  );
}
