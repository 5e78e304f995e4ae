import type { FastifyInstance } from "fastify";
import { bearerKey, type KeyReader } from "../auth/api-key.plugin.ts";
import { apiKeyCallers, documentCallers } from "../auth/openapi-security.ts";
import { v1Routes } from "../features/index.ts";
import { notFound } from "../http/not-found.ts";
import { limitBody } from "../plugins/body-limit.ts";

/**
 * The /v1 checks, in decisions.md order: API key (401) → IP allowlist (403) → rate limit (429) → body size (413).
 * `keys` says where the scope's clients send their key (Anthropic's dialect: anthropic.scope.ts).
 */
export function addV1Checks(app: FastifyInstance, keys: KeyReader = bearerKey): void {
  app.addHook("onRequest", app.apiKeys.authenticateWith(keys));
  app.addHook("onRequest", app.apiKeys.checkIpAllowlist);
  app.addHook("onRequest", app.limits.key);
  app.addHook("preParsing", limitBody);
}

/** /v1 (registered with that prefix): every route and every unknown path under it goes through the /v1 checks. */
export default async function v1Scope(app: FastifyInstance): Promise<void> {
  addV1Checks(app);
  documentCallers(app, apiKeyCallers);
  app.setNotFoundHandler(notFound);
  for (const routes of v1Routes) await app.register(routes);
}
