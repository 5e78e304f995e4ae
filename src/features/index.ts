import type { FastifyInstance } from "fastify";
import modelsRoutes from "./models/models.route.ts";
import healthRoutes from "./health/health.route.ts";
import openapiRoutes from "./openapi/openapi.route.ts";
import rerankRoutes from "./rerank/rerank.route.ts";

/** Every feature's routes; server.ts registers them all. Append one entry per feature. */
export const featureRoutes: ((app: FastifyInstance) => Promise<void>)[] = [
  modelsRoutes,
  healthRoutes,
  openapiRoutes,
  rerankRoutes,
];
