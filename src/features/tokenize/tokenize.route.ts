import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { requestContext } from "../request-context.ts";
import { TokenCount } from "./tokenize.schema.ts";
import { countChatTokens } from "./tokenize.service.ts";

export default async function tokenizeRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: ChatCompletionRequest }>(
    "/tokenize",
    {
      schema: {
        operationId: "tokenizeChat",
        tags: ["chat"],
        summary: "Counts the prompt tokens of a chat request (the body of §4.2) with the model's template; takes no slot",
        body: Type.Ref(ChatCompletionRequest),
        response: { 200: Type.Ref(TokenCount), ...inferenceErrors },
      },
      // A chat key may count what it may send: the same scope and plan checks as chat.
      config: { endpoint: "chat" },
    },
    async (request, reply) => countChatTokens(app.ctx, requestContext(request, reply), request.body),
  );
}
