import cookie from "@fastify/cookie";
import type { FastifyInstance } from "fastify";
import { adminCallers, documentCallers } from "../auth/openapi-security.ts";
import { adminRoutes } from "../features/index.ts";
import { notFound } from "../http/not-found.ts";
import { authenticateAdmin } from "../auth/admin-auth.plugin.ts";
import { limitBody } from "../plugins/body-limit.ts";

/**
 * /admin/v1 (registered with that prefix): the admin token (never an API key) or the console's login cookie with
 * its CSRF token, then the body size limit. Cookies are parsed in this scope and the console's only.
 */
export default async function adminScope(app: FastifyInstance): Promise<void> {
  await app.register(cookie);
  app.addHook("onRequest", authenticateAdmin);
  documentCallers(app, adminCallers);
  app.addHook("preParsing", limitBody);
  app.setNotFoundHandler(notFound);
  for (const routes of adminRoutes) await app.register(routes);
}
