import type { TSchema } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { adminSchemas } from "./admin/admin.schema.ts";
import { chatSchemas } from "./chat/chat.schema.ts";
import { embeddingsSchemas } from "./embeddings/embeddings.schema.ts";
import { modelsSchemas } from "./models/models.schema.ts";
import { rerankSchemas } from "./rerank/rerank.schema.ts";
import { responsesSchemas } from "./responses/responses.schema.ts";
import { tokenizeSchemas } from "./tokenize/tokenize.schema.ts";
import { transcriptionSchemas } from "./transcription/transcription.schema.ts";
import { membersSchemas } from "./admin/members.schema.ts";
import { consoleSchemas } from "./console/console.schema.ts";
import modelsRoutes from "./models/models.route.ts";
import healthRoutes from "./health/health.route.ts";
import openapiRoutes from "./openapi/openapi.route.ts";
import rerankRoutes from "./rerank/rerank.route.ts";
import chatRoutes from "./chat/chat.route.ts";
import embeddingsRoutes from "./embeddings/embeddings.route.ts";
import adminRoutesOfAccounts from "./admin/admin.route.ts";
import transcriptionRoutes from "./transcription/transcription.route.ts";
import modelsAdminRoutes from "./admin/models-admin.route.ts";
import tokenizeRoutes from "./tokenize/tokenize.route.ts";
import responsesRoutes from "./responses/responses.route.ts";
import consolePageRoutes from "./console/console.route.ts";
import consoleSessionRoutes from "./console/console-session.route.ts";
import consoleTotpRoutes from "./console/console-totp.route.ts";
import consoleOidcRoutes from "./console/console-oidc.route.ts";
import membersAdminRoutes from "./admin/members-admin.route.ts";
import cacheAdminRoutes from "./admin/cache-admin.route.ts";
import filesRoutes from "./batches/files.route.ts";
import batchesRoutes from "./batches/batches.route.ts";
import { batchesSchemas } from "./batches/batches.schema.ts";
import routesAdminRoutes from "./admin/routes-admin.route.ts";
import { routesAdminSchemas } from "./admin/routes-admin.schema.ts";
import completionsRoutes from "./completions/completions.route.ts";
import { completionsSchemas } from "./completions/completions.schema.ts";
import messagesRoutes from "./messages/messages.route.ts";
import { messagesSchemas } from "./messages/messages.schema.ts";

type Routes = (app: FastifyInstance) => Promise<void>;

/** Routes under /v1 (paths relative to it): API key, allowlist, rate limit and body limit (src/scopes/v1.scope.ts). */
export const v1Routes: Routes[] = [modelsRoutes, openapiRoutes, chatRoutes, responsesRoutes, embeddingsRoutes, transcriptionRoutes, rerankRoutes, tokenizeRoutes, filesRoutes, batchesRoutes, completionsRoutes];

/** Routes under /v1/messages (paths relative to it): Anthropic's Messages API, its key header and error envelope (src/scopes/anthropic.scope.ts). */
export const anthropicRoutes: Routes[] = [messagesRoutes];

/** Routes under /admin/v1 (paths relative to it): the admin token or a console session, by role (src/scopes/admin.scope.ts). */
export const adminRoutes: Routes[] = [adminRoutesOfAccounts, membersAdminRoutes, modelsAdminRoutes, cacheAdminRoutes, routesAdminRoutes];

/** The web console: its page and files, sign-in, sessions, invites, TOTP and OIDC (src/scopes/console.scope.ts). */
export const consoleRoutes: Routes[] = [consolePageRoutes, consoleSessionRoutes, consoleTotpRoutes, consoleOidcRoutes];

/** Routes that take no credentials (src/scopes/public.scope.ts). */
export const publicRoutes: Routes[] = [healthRoutes];

/** Every feature's shared schemas, registered before the routes and listed in the OpenAPI document (openapi/openapi-document.ts). */
export const featureSchemas: TSchema[] = [
  ...chatSchemas,
  ...responsesSchemas,
  ...embeddingsSchemas,
  ...transcriptionSchemas,
  ...rerankSchemas,
  ...tokenizeSchemas,
  ...modelsSchemas,
  ...adminSchemas,
  ...membersSchemas,
  ...consoleSchemas,
  ...batchesSchemas,
  ...routesAdminSchemas,
  ...completionsSchemas,
  ...messagesSchemas,
];
