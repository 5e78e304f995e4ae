import type { FastifyInstance } from "fastify";
import modelsRoutes from "./models/models.route.ts";
import healthRoutes from "./health/health.route.ts";
import openapiRoutes from "./openapi/openapi.route.ts";
import rerankRoutes from "./rerank/rerank.route.ts";
import chatRoutes from "./chat/chat.route.ts";
import embeddingsRoutes from "./embeddings/embeddings.route.ts";
import adminRoutes from "./admin/admin.route.ts";
import transcriptionRoutes from "./transcription/transcription.route.ts";
import modelsAdminRoutes from "./admin/models-admin.route.ts";

/** Every feature's routes; server.ts registers them all. Append one entry per feature. */
export const featureRoutes: ((app: FastifyInstance) => Promise<void>)[] = [
  modelsRoutes,
  healthRoutes,
  openapiRoutes,
  rerankRoutes,
  chatRoutes,
  embeddingsRoutes,
  adminRoutes,
  transcriptionRoutes,
  modelsAdminRoutes,
];
