import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { apiKeyCallers, documentCallers } from "../auth/openapi-security.ts";
import { anthropicKey } from "../auth/api-key.plugin.ts";
import { toAnthropicError } from "../errors/anthropic-envelope.ts";
import { anthropicHeaders } from "../http/anthropic-headers.ts";
import { notFound } from "../http/not-found.ts";
import { errorHandler } from "../plugins/error-handler.ts";
import { anthropicRoutes } from "../features/index.ts";
import { addV1Checks } from "./v1.scope.ts";

function addAnthropicHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.header("request-id", request.id);
  reply.headers(anthropicHeaders(reply.getHeaders(), Date.now()));
}

/**
 * /v1/messages (registered with that prefix): Anthropic's Messages API. The /v1 checks in the same order (API key
 * → IP allowlist → rate limit → body size), its errors in Anthropic's envelope and statuses, and on every answer
 * `request-id` beside `x-request-id`, Retry-After, and the anthropic-ratelimit-* headers beside ours. `?beta=true`
 * and `anthropic-beta` / `anthropic-version` headers are accepted and change nothing.
 */
export default async function anthropicScope(app: FastifyInstance): Promise<void> {
  app.setErrorHandler(errorHandler(toAnthropicError));
  addV1Checks(app, anthropicKey);
  // A stream's headers go out with its first event, past onSend: they are set before its handler.
  app.addHook("preHandler", (request, reply, done) => {
    if ((request.body as { stream?: unknown } | undefined)?.stream === true) addAnthropicHeaders(request, reply);
    done();
  });
  app.addHook("onSend", (request, reply, payload, done) => {
    addAnthropicHeaders(request, reply);
    done(null, payload);
  });
  documentCallers(app, apiKeyCallers);
  app.setNotFoundHandler(notFound);
  for (const routes of anthropicRoutes) await app.register(routes);
}
