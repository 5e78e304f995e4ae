import swagger from "@fastify/swagger";
import type { FastifyInstance, FastifySchema } from "fastify";
import type { TSchema } from "@sinclair/typebox";
import { ErrorEnvelope } from "../../errors/error.schema.ts";
import { securitySchemes } from "../../auth/openapi-security.ts";

/**
 * The rate-limit headers every /v1 answer carries, errors included (§8; the token ones, issue 32, when the key's
 * plan has `tokenLimit` or `accountTokenLimit`): the most constraining of the key's and the account's windows.
 */
const rateLimitHeaders = {
  "x-ratelimit-limit-requests": { type: "integer", description: "Requests allowed in the window (the key's or the account's, whichever has fewer left)" },
  "x-ratelimit-remaining-requests": { type: "integer", description: "Requests left in the window" },
  "x-ratelimit-reset-requests": { type: "string", description: "Time until the window resets, e.g. 6m0s" },
  "x-ratelimit-limit-tokens": { type: "integer", description: "Tokens allowed in the window (plans with tokenLimit or accountTokenLimit)" },
  "x-ratelimit-remaining-tokens": {
    type: "integer",
    description: "Tokens left in the window; a request reserves its prompt plus its completion cap at admission and is settled to its usage after",
  },
  "x-ratelimit-reset-tokens": { type: "string", description: "Time until the token window resets, e.g. 59s" },
};
const retryAfterHeader = { "retry-after": { type: "integer", description: "Seconds to wait: when the window, quota period or budget period resets" } };

/** What Anthropic's Messages API answers carry beside ours (src/scopes/anthropic.scope.ts), on every status. */
const anthropicHeaders = {
  "request-id": { type: "string", description: "The request's id (as x-request-id)" },
  "retry-after": { type: "integer", description: "Seconds to wait: on a 429 or 529 the wait; otherwise until the key's request window admits another request (0 while it has room)" },
  "anthropic-ratelimit-requests-limit": { type: "integer", description: "As x-ratelimit-limit-requests" },
  "anthropic-ratelimit-requests-remaining": { type: "integer", description: "As x-ratelimit-remaining-requests" },
  "anthropic-ratelimit-requests-reset": { type: "string", format: "date-time", description: "When the request window resets (RFC 3339)" },
  "anthropic-ratelimit-tokens-limit": { type: "integer", description: "As x-ratelimit-limit-tokens (plans that meter tokens)" },
  "anthropic-ratelimit-tokens-remaining": { type: "integer", description: "As x-ratelimit-remaining-tokens" },
  "anthropic-ratelimit-tokens-reset": { type: "string", format: "date-time", description: "When the token window resets (RFC 3339)" },
};

/** Each /v1 response documented with the rate-limit headers (and Retry-After on 429 and 503, on all of /v1/messages). */
function withRateLimitHeaders(url: string, response: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!response) return response;
  const anthropic = url.startsWith("/v1/messages");
  return Object.fromEntries(
    Object.entries(response).map(([status, schema]) => [
      status,
      { ...(schema as object), headers: { ...rateLimitHeaders, ...(anthropic ? anthropicHeaders : status === "429" || status === "503" ? retryAfterHeader : {}) } },
    ]),
  );
}

/**
 * Registers the shared schemas and @fastify/swagger, which builds the OpenAPI 3.1 document from the routes' own
 * TypeBox schemas (request bodies, every response, operationIds, tags, and `security`, which each scope stamps on
 * its routes). `schemas` are the features' shared schemas (features/index.ts): routes refer to them by `$id`,
 * Fastify validates and serialises with them, and the document lists them under `components.schemas`. Call before
 * any route is added.
 */
export async function registerOpenApi(app: FastifyInstance, schemas: TSchema[]): Promise<void> {
  for (const schema of [ErrorEnvelope, ...schemas]) app.addSchema(schema);
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Modelgate inference API",
        version: "1",
        description: "OpenAI-style chat, embeddings, transcription and rerank (the spec's §4), Anthropic's Messages API, plus the admin API.",
      },
      servers: [{ url: "/" }],
      tags: [
        { name: "models", description: "§4.1" },
        { name: "chat", description: "§4.2, streaming §6" },
        { name: "embeddings", description: "§4.3" },
        { name: "audio", description: "§4.4" },
        { name: "rerank", description: "§4.5" },
        { name: "completions", description: "Legacy completions: a raw prompt, fill-in-the-middle, the prompt's own logprobs" },
        { name: "tokenize", description: "The model's tokenizer, in vLLM's shapes" },
        { name: "admin", description: "Accounts, keys, members, usage, the audit log and models (admin token, or a console session by role)" },
        { name: "console", description: "The web console's sign-in (§2.9): members and operators, sessions, invites, TOTP, OpenID Connect" },
        { name: "health", description: "Liveness and readiness (no credentials)" },
      ],
      components: { securitySchemes: { ...securitySchemes } },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transform: ({ schema, url }) => {
      const documented = { ...(schema as FastifySchema & Record<string, unknown>) };
      // A multipart form is read part by part, not validated as a body, so it is documented from its own schema.
      if (documented.multipartBody) documented.body = documented.multipartBody;
      delete documented.multipartBody;
      if (url.startsWith("/v1/")) documented.response = withRateLimitHeaders(url, documented.response as Record<string, unknown> | undefined);
      return { schema: documented as FastifySchema, url };
    },
  });
}
