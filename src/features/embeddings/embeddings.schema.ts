import { Type, type Static, type TSchema } from "@sinclair/typebox";

/**
 * §4.3 request. `dimensions` is not supported and rejected (decisions.md); `user` is ignored. Token-array inputs
 * (which the openai client never sends unasked) are not accepted: inputs are strings.
 */
export const EmbeddingsRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    // An empty string has no tokens to embed (llama returned a zero-length vector): 400, as the OpenAI API does.
    // The count is bounded per model (limits.maxEmbeddingInputs), with a 400 that names it.
    input: Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })]),
    encoding_format: Type.Optional(Type.Union([Type.Literal("float"), Type.Literal("base64")])),
    dimensions: Type.Optional(Type.Null({ description: "Not supported: dimensionality is fixed per model" })),
    user: Type.Optional(Type.Unknown()),
  },
  { $id: "EmbeddingsRequest" },
);
export type EmbeddingsRequest = Static<typeof EmbeddingsRequest>;

/** §2.5 */
export const EmbeddingList = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(
      Type.Object({
        object: Type.Literal("embedding"),
        index: Type.Integer(),
        embedding: Type.Union([Type.Array(Type.Number()), Type.String({ description: "base64 of little-endian float32" })]),
      }),
    ),
    model: Type.String(),
    usage: Type.Object({ prompt_tokens: Type.Integer(), total_tokens: Type.Integer() }),
  },
  { $id: "EmbeddingList" },
);
export type EmbeddingList = Static<typeof EmbeddingList>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const embeddingsSchemas: TSchema[] = [EmbeddingsRequest, EmbeddingList];
