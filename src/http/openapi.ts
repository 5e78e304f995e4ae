import swagger from "@fastify/swagger";
import type { FastifyInstance, FastifySchema } from "fastify";
import type { TSchema } from "@sinclair/typebox";
import { ErrorEnvelope } from "../errors/error.schema.ts";
import { consoleCookie } from "../auth/console-sessions.ts";
import { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "../features/chat/chat.schema.ts";
import { EmbeddingList, EmbeddingsRequest } from "../features/embeddings/embeddings.schema.ts";
import { CreateResponseRequest, ResponseObject, ResponseStreamEvent } from "../features/responses/responses.schema.ts";
import { Model, ModelList } from "../features/models/models.schema.ts";
import { RerankRequestBody, RerankResponse } from "../features/rerank/rerank.schema.ts";
import { TokenCount } from "../features/tokenize/tokenize.schema.ts";
import { TranscriptionJson, TranscriptionVerbose } from "../features/transcription/transcription.schema.ts";
import {
  AccountList,
  AccountSchema,
  AdminModel,
  AdminModelList,
  CreatedKeySchema,
  KeyList,
  KeySchema,
  RevokedKeySchema,
  UsageList,
  DailyUsageList,
  AuditList,
} from "../features/admin/admin.schema.ts";
import { CreatedLinkSchema, InviteSchema, PlanLimitsSchema, UserList, UserSchema } from "../features/admin/members.schema.ts";
import { SessionAnswer } from "../features/console/console.schema.ts";

/**
 * The shared schemas: routes refer to them by `$id`, Fastify validates and serialises with them, and the OpenAPI
 * document lists them under `components.schemas` by the same names.
 */
const components: TSchema[] = [
  ErrorEnvelope,
  ChatCompletionRequest,
  ChatCompletion,
  ChatCompletionChunk,
  CreateResponseRequest,
  ResponseObject,
  ResponseStreamEvent,
  EmbeddingsRequest,
  EmbeddingList,
  TranscriptionJson,
  TranscriptionVerbose,
  RerankRequestBody,
  RerankResponse,
  TokenCount,
  Model,
  ModelList,
  AccountSchema,
  AccountList,
  KeySchema,
  KeyList,
  CreatedKeySchema,
  RevokedKeySchema,
  UsageList,
  DailyUsageList,
  AuditList,
  AdminModel,
  AdminModelList,
  UserSchema,
  InviteSchema,
  UserList,
  CreatedLinkSchema,
  PlanLimitsSchema,
  SessionAnswer,
];

const readMethods = new Set(["GET", "HEAD", "OPTIONS"]);

/** Who may call a path, for the document's `security`: derived from the scope that owns it. */
function securityFor(url: string, method: string): Record<string, string[]>[] {
  // The console's login cookie stands in for the admin token; a change also needs the login's CSRF token.
  const consoleLogin: Record<string, string[]> = readMethods.has(method) ? { consoleCookie: [] } : { consoleCookie: [], csrfToken: [] };
  if (url.startsWith("/v1/")) return [{ apiKey: [] }];
  if (url.startsWith("/admin/")) return [{ adminToken: [] }, consoleLogin];
  if (url === "/console/api/session") return [{ consoleCookie: [] }];
  if (url === "/console/api/logout" || url === "/console/api/logout-everywhere" || url.startsWith("/console/api/totp/")) return [consoleLogin];
  if (url === "/metrics") return [{ adminToken: [] }, { metricsToken: [] }];
  return [];
}

/**
 * Registers the shared schemas and @fastify/swagger, which builds the OpenAPI 3.1 document from the routes' own
 * TypeBox schemas (request bodies, every response, operationIds, tags). Call before any route is added.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  for (const schema of components) app.addSchema(schema);
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Modelgate inference API",
        version: "1",
        description: "OpenAI-style chat, embeddings, transcription and rerank (the spec's §4), plus the admin API.",
      },
      servers: [{ url: "/" }],
      tags: [
        { name: "models", description: "§4.1" },
        { name: "chat", description: "§4.2, streaming §6" },
        { name: "embeddings", description: "§4.3" },
        { name: "audio", description: "§4.4" },
        { name: "rerank", description: "§4.5" },
        { name: "admin", description: "Accounts, keys, usage, the audit log and models (admin token, or the console's login)" },
        { name: "console", description: "The web console's sign-in (§2.9): members and operators, sessions, invites, TOTP, OpenID Connect" },
        { name: "health", description: "Liveness and readiness (no credentials)" },
      ],
      components: {
        securitySchemes: {
          apiKey: { type: "http", scheme: "bearer", description: "Authorization: Bearer <API key>" },
          adminToken: { type: "http", scheme: "bearer", description: "Authorization: Bearer <adminToken> (or x-admin-token)" },
          metricsToken: { type: "http", scheme: "bearer", description: "Authorization: Bearer <metrics.token>: GET /metrics only" },
          consoleCookie: { type: "apiKey", in: "cookie", name: consoleCookie, description: "A console session (POST /console/api/login, an invite, or OpenID Connect): a member is confined to their account and role" },
          csrfToken: { type: "apiKey", in: "header", name: "X-CSRF-Token", description: "The console login's CSRF token: every call with the cookie that changes something" },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const documented = { ...(schema as FastifySchema & Record<string, unknown>) };
      // A multipart form is read part by part, not validated as a body, so it is documented from its own schema.
      if (documented.multipartBody) documented.body = documented.multipartBody;
      delete documented.multipartBody;
      documented.security = securityFor(url, String(route.method));
      return { schema: documented as FastifySchema, url };
    },
  });
}
