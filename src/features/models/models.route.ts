import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { AnthropicModel, AnthropicModelList, Model, ModelList, modelErrors } from "./models.schema.ts";
import { listModelsJson, retrieveModel, toAnthropicModel } from "./models.service.ts";
import { AppError } from "../../errors/app-error.ts";
import { grantsEndpoint } from "../../auth/key-grants.ts";

/** Anthropic's clients send `anthropic-version` on every request: they get its Models API's shapes. */
const speaksAnthropic = (request: FastifyRequest) => request.headers["anthropic-version"] !== undefined;

export default async function modelsRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    "/models",
    { schema: { operationId: "listModels", tags: ["models"], summary: "§4.1 the models this key may call (Anthropic's list shape when the request carries anthropic-version)", response: { 200: Type.Union([Type.Ref(ModelList), Type.Ref(AnthropicModelList)]), ...modelErrors } }, config: { endpoint: "models" } },
    async (request, reply) => {
      const auth = request.auth!;
      if (!grantsEndpoint(auth, "models", app.ctx.config.deployment)) {
        throw new AppError("model_not_in_plan", { param: "model", message: "This key's plan does not include listing models." });
      }
      // The text of the list cached with it (a client polling /v1/models costs one lookup); a JSON string is sent as it is.
      return reply.type("application/json; charset=utf-8").send(listModelsJson(app.ctx, auth, speaksAnthropic(request)));
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
        response: { 200: Type.Union([Type.Ref(Model), Type.Ref(AnthropicModel)]), ...modelErrors },
      },
      config: { endpoint: "models" },
    },
    async (request) => {
      const model = retrieveModel(app.ctx, request.auth!, decodeURIComponent(request.params["*"]));
      return speaksAnthropic(request) ? toAnthropicModel(model) : model;
    },
  );
}
