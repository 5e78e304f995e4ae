import { Type, type Static, type TSchema } from "@sinclair/typebox";

/** §4.5 request. Parameters not listed here are ignored (they are metadata to us, e.g. `return_documents`). */
export const RerankRequestBody = Type.Object(
  {
    model: Type.String({ description: "ID of a reranking model" }),
    query: Type.String({ description: "The query to score against" }),
    documents: Type.Array(Type.String(), { minItems: 1, description: "Candidate passages" }),
    top_n: Type.Optional(
      Type.Integer({ minimum: 1, description: "Return only the top_n highest-scoring documents. Defaults to all documents." }),
    ),
  },
  { $id: "RerankRequest" },
);
export type RerankRequestBody = Static<typeof RerankRequestBody>;

export const RerankResultItem = Type.Object({
  /** Position of the document in the request's `documents`. */
  index: Type.Integer(),
  relevance_score: Type.Number(),
});
export type RerankResultItem = Static<typeof RerankResultItem>;

/**
 * §2.7 plus `id` and `usage` in the common Jina/vLLM rerank shape: `prompt_tokens` and `total_tokens` are the
 * input tokens of every query/document pair (no completion tokens exist, so both are equal).
 */
export const RerankResponse = Type.Object(
  {
    id: Type.String(),
    model: Type.String(),
    results: Type.Array(RerankResultItem),
    usage: Type.Object({ prompt_tokens: Type.Integer(), total_tokens: Type.Integer() }),
  },
  { $id: "RerankResponse" },
);
export type RerankResponse = Static<typeof RerankResponse>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const rerankSchemas: TSchema[] = [RerankRequestBody, RerankResponse];
