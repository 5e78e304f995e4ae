import { randomUUID } from "node:crypto";
import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { requireModel } from "../model-access.ts";
import type { RerankRequest } from "../../engines/engine.ts";
import { AppError } from "../../errors/app-error.ts";
import type { RerankRequestBody, RerankResponse, RerankResultItem } from "./rerank.schema.ts";

/** Highest score first; ties keep request order. Only the first `topN` are kept. */
export function rankResults(scores: number[], topN: number | undefined): RerankResultItem[] {
  const results = scores.map((relevance_score, index) => ({ index, relevance_score }));
  results.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
  return topN === undefined ? results : results.slice(0, topN);
}

/**
 * §4.5 POST /v1/rerank, engine-agnostic. Checks run in the decisions.md order: model (404), scope (403),
 * capability (400), input lengths (400), capacity (503).
 */
export async function rerank(
  ctx: AppContext,
  auth: AuthContext,
  body: RerankRequestBody,
  signalFor: (deadlineMs: number) => AbortSignal,
): Promise<RerankResponse> {
  const runner = requireModel(ctx, auth, "rerank", body.model, "rerank", "rerank");
  const engine = runner.assertServable();
  if (!engine.rerank) throw new AppError("internal_error", { message: `The model '${body.model}' has no rerank engine.` });
  const req: RerankRequest = { query: body.query, documents: body.documents };
  engine.prepareRerank?.(req);

  const signal = signalFor(runner.entry.requestTimeoutMs);
  const result = await runner.run(auth.keyId, signal, (leased) => leased.rerank!(req, signal));

  ctx.usage.record({
    keyId: auth.keyId,
    accountId: auth.accountId,
    model: body.model,
    endpoint: "rerank",
    promptTokens: result.promptTokens,
    completionTokens: 0,
  });
  return {
    id: `rerank-${randomUUID()}`,
    model: body.model,
    results: rankResults(result.scores, body.top_n),
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}
