import type { FastifyInstance } from "fastify";
import { ModelList, Model, modelErrors } from "./models.schema.ts";
import { listModels, retrieveModel } from "./models.service.ts";
import { AppError } from "../../errors/app-error.ts";
import { endpointAllowed } from "../../auth/scope.ts";

export default async function modelsRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    "/v1/models",
    { schema: { response: { 200: ModelList, ...modelErrors } }, config: { endpoint: "models" } },
    async (request) => {
      const auth = request.auth!;
      if (!endpointAllowed(auth, "models", app.ctx.config.deployment)) {
        throw new AppError("model_not_in_plan", { param: "model", message: "This key's plan does not include listing models." });
      }
      return listModels(app.ctx, auth);
    },
  );

  // The openai client's models.retrieve; ids may contain "/" (org/name), so the wildcard takes the rest.
  app.get<{ Params: { "*": string } }>(
    "/v1/models/*",
    { schema: { response: { 200: Model, ...modelErrors } }, config: { endpoint: "models" } },
    async (request) => retrieveModel(app.ctx, request.auth!, decodeURIComponent(request.params["*"])),
  );
}

