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


export const modelErrors = errorResponses(401, 403, 404, 429);

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const modelsSchemas: TSchema[] = [Model, ModelList];
