import cookie from "@fastify/cookie";
import type { FastifyInstance } from "fastify";
import { anyone, documentCallers } from "../auth/openapi-security.ts";
import { consoleRoutes } from "../features/index.ts";
import { limitBody } from "../plugins/body-limit.ts";

/** /console: the web console's page, files and login (features/console/); its admin calls go to /admin/v1. */
export default async function consoleScope(app: FastifyInstance): Promise<void> {
  // Every answer carries the per-address limiter's headers (§8), as on the admin API; failed logins are counted.
  app.addHook("onRequest", (request, reply) => app.limits.anonymousHeadersOnly(request, reply));
  await app.register(cookie);
  // The page, its files and the login take no credentials; the session and logout routes say what they take.
  documentCallers(app, anyone);
  app.addHook("preParsing", limitBody);
  for (const routes of consoleRoutes) await app.register(routes);
}
