import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { Model, ModelList, modelErrors } from "./models.schema.ts";
import { listModels, retrieveModel } from "./models.service.ts";
import { AppError } from "../../errors/app-error.ts";
import { grantsEndpoint } from "../../auth/key-grants.ts";

export default async function modelsRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    "/models",
    { schema: { operationId: "listModels", tags: ["models"], summary: "§4.1 the models this key may call", response: { 200: Type.Ref(ModelList), ...modelErrors } }, config: { endpoint: "models" } },
    async (request) => {
      const auth = request.auth!;
      if (!grantsEndpoint(auth, request.routeOptions.config.endpoint!, app.ctx.config.deployment)) {
        throw new AppError("model_not_in_plan", { param: "model", message: "This key's plan does not include listing models." });
      }
      return listModels(app.ctx, auth);
    },
  );

  // The openai client's models.retrieve; ids may contain "/" (org/name), so the wildcard takes the rest.
  app.get<{ Params: { "*": string } }>(
    "/models/*",
    {
      schema: {
        operationId: "retrieveModel",
        tags: ["models"],
        params: Type.Object({ "*": Type.String({ description: "The model id (may contain /)" }) }),
        response: { 200: Type.Ref(Model), ...modelErrors },
      },
      config: { endpoint: "models" },
    },
    async (request) => retrieveModel(app.ctx, request.auth!, decodeURIComponent(request.params["*"])),
  );
}
