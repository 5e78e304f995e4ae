import type { FastifyInstance } from "fastify";
import { anyone, documentCallers } from "../auth/openapi-security.ts";
import { publicRoutes } from "../features/index.ts";

/** Paths that take no credentials: liveness and readiness. */
export default async function publicScope(app: FastifyInstance): Promise<void> {
  documentCallers(app, anyone);
  for (const routes of publicRoutes) await app.register(routes);
}
