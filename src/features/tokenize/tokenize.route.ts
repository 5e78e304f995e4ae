import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { requestContext } from "../request-context.ts";
import { DetokenizeRequest, DetokenizeResponse, TokenCount, TokenizeRequest } from "./tokenize.schema.ts";
import { detokenize, tokenize } from "./tokenize.service.ts";

export default async function tokenizeRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: TokenizeRequest }>(
    "/tokenize",
    {
      schema: {
        operationId: "tokenize",
        tags: ["tokenize"],
        summary: "vLLM's tokenize: a prompt, or messages after the model's chat template (the body of §4.2 too), to token ids; takes no slot",
        body: Type.Ref(TokenizeRequest),
        response: { 200: Type.Ref(TokenCount), ...inferenceErrors },
      },
      // Messages need a chat key (what a chat may send); a prompt, any endpoint of the model (tokenize.service.ts).
      config: { endpoint: "chat" },
    },
    async (request, reply) => tokenize(app.ctx, requestContext(request, reply), request.body),
  );
  app.post<{ Body: DetokenizeRequest }>(
    "/detokenize",
    {
      schema: {
        operationId: "detokenize",
        tags: ["tokenize"],
        summary: "vLLM's detokenize: token ids back to text with the model's tokenizer; takes no slot",
        body: Type.Ref(DetokenizeRequest),
        response: { 200: Type.Ref(DetokenizeResponse), ...inferenceErrors },
      },
      config: { endpoint: "chat" },
    },
    async (request, reply) => detokenize(app.ctx, requestContext(request, reply), request.body),
  );
}
