import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import type { ModelCatalog } from "../../catalog/model-catalog.ts";
import type { ModelRoute } from "../../catalog/model-route.ts";
import { AppError } from "../../errors/app-error.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { ModelIdParams } from "./models-admin.route.ts";
import { AdminRoute, AdminRouteList } from "./routes-admin.schema.ts";

/** A route with its models' load states and its last minute (the split it served and its fallbacks). */
function view(catalog: ModelCatalog, route: ModelRoute): AdminRoute {
  const { config } = route;
  const { served, fallbacks } = route.activity();
  const state = (model: string) => catalog.find(model)?.state ?? "missing";
  const total = config.targets.reduce((sum, t) => sum + t.weight, 0);
  return {
    id: route.id,
    object: "route",
    targets: config.targets.map((t) => ({ model: t.model, weight: t.weight, share: t.weight / total, state: state(t.model), servedLastMinute: served[t.model] ?? 0 })),
    fallbacks: config.fallbacks.map((model) => ({ model, state: state(model), servedLastMinute: served[model] ?? 0 })),
    fallbackOn: [...config.fallbackOn],
    capabilities: config.capabilities,
    contextSize: config.contextSize,
    fallbacksLastMinute: fallbacks,
  };
}

/**
 * The routes (issue 45) under /admin/v1, for operators: `GET /admin/v1/routes` lists each route with its split,
 * fallbacks and last minute; `GET /admin/v1/routes/{id}` one of them.
 */
export default async function routesAdminRoutes(app: FastifyInstance): Promise<void> {
  const tags = ["admin"];
  const errors = errorResponses(401, 403, 404, 429);

  app.get("/routes", { schema: { operationId: "listAdminRoutes", tags, response: { 200: Type.Ref(AdminRouteList), ...errors } } }, async () => ({
    object: "list" as const,
    data: app.ctx.catalog.routeList().map((route) => view(app.ctx.catalog, route)),
  }));

  app.get<{ Params: ModelIdParams }>(
    "/routes/:id",
    { schema: { operationId: "getAdminRoute", tags, params: ModelIdParams, response: { 200: Type.Ref(AdminRoute), ...errors } } },
    async (request) => {
      const route = app.ctx.catalog.route(request.params.id);
      if (!route) throw new AppError("model_not_found", { param: "model", message: `The route '${request.params.id}' does not exist.` });
      return view(app.ctx.catalog, route);
    },
  );
}
