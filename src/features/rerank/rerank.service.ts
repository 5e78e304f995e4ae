import { randomUUID } from "node:crypto";
import type { AppContext } from "../../app-context.ts";
import { runInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import type { RerankRequest } from "../../engines/engine.ts";
import type { RerankRequestBody, RerankResponse, RerankResultItem } from "./rerank.schema.ts";

/** Highest score first; ties keep request order. Only the first `topN` are kept. */
export function rankResults(scores: number[], topN: number | undefined): RerankResultItem[] {
  const results = scores.map((relevance_score, index) => ({ index, relevance_score }));
  results.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
  return topN === undefined ? results : results.slice(0, topN);
}

/** §4.5 POST /v1/rerank, engine-agnostic: pairs are tokenized and checked in the prepare step (400 naming `documents[i]`). */
export async function rerank(ctx: AppContext, request: RequestContext, body: RerankRequestBody): Promise<RerankResponse> {
  const req: RerankRequest = { query: body.query, documents: body.documents };
  const result = await runInference(ctx, request, {
    model: body.model,
    port: "rerank",
    input: { kind: "rerank", query: req.query, documents: req.documents },
    prepare: (port) => port.prepareRerank(req),
    run: (port, prepared, signal) => port.rerank(req, prepared, signal),
    usage: (r) => ({ promptTokens: r.promptTokens, completionTokens: 0 }),
  });
  return {
    id: `rerank-${randomUUID()}`,
    model: answerModel(request, body.model),
    results: rankResults(result.scores, body.top_n),
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}
