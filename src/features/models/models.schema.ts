import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { errorResponses } from "../../errors/error.schema.ts";

export const Model = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("model"),
    created: Type.Integer(),
    owned_by: Type.String(),
  },
  { $id: "Model" },
);
export type Model = Static<typeof Model>;

export const ModelList = Type.Object({ object: Type.Literal("list"), data: Type.Array(Model) }, { $id: "ModelList" });
export type ModelList = Static<typeof ModelList>;

/** A model as Anthropic's Models API lists it (GET /v1/models with an `anthropic-version` header). */
export const AnthropicModel = Type.Object(
  {
    type: Type.Literal("model"),
    id: Type.String(),
    display_name: Type.String({ description: "The model id" }),
    created_at: Type.String({ description: "RFC 3339: when this node's catalog was loaded" }),
  },
  { $id: "AnthropicModel" },
);
export type AnthropicModel = Static<typeof AnthropicModel>;

export const AnthropicModelList = Type.Object(
  {
    data: Type.Array(AnthropicModel),
    has_more: Type.Boolean({ description: "Always false: one page holds every model" }),
    first_id: Type.Union([Type.String(), Type.Null()]),
    last_id: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: "AnthropicModelList" },
);
export type AnthropicModelList = Static<typeof AnthropicModelList>;

export const modelErrors = errorResponses(401, 403, 404, 429);

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const modelsSchemas: TSchema[] = [Model, ModelList, AnthropicModel, AnthropicModelList];
