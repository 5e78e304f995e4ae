import { Type, type Static, type TSchema } from "@sinclair/typebox";

/** What /v1/tokenize answers: vLLM's field names, so one client reads both. */
export const TokenCount = Type.Object(
  {
    object: Type.Literal("tokenize"),
    model: Type.String(),
    /** Prompt tokens of the messages (and tools) after the model's chat template. */
    count: Type.Integer({ minimum: 0 }),
    /** The context window the model is served with, when known. */
    max_model_len: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
  },
  { $id: "TokenCount" },
);
export type TokenCount = Static<typeof TokenCount>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const tokenizeSchemas: TSchema[] = [TokenCount];
