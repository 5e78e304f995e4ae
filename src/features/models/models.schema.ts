import { Type, type Static } from "@sinclair/typebox";
import { ErrorResponse } from "../../errors/error.schema.ts";

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

export const ModelList = Type.Object({ object: Type.Literal("list"), data: Type.Array(Model) });
export type ModelList = Static<typeof ModelList>;


export const modelErrors = { 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 429: ErrorResponse };
