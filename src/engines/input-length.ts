import { AppError } from "../errors/app-error.ts";

/*
 * The length checks of embeddings and rerank inputs, one wording for every engine that counts tokens: a 400
 * invalid_parameter naming the input, before any work.
 */

/** An embeddings input of `length` tokens, the `i`th of `count`: `input` (or `input[i]` in an array) past `limit`. */
export function checkInputLength(length: number, i: number, count: number, limit: number, modelId: string): void {
  if (length <= limit) return;
  const param = count === 1 ? "input" : `input[${i}]`;
  throw new AppError("invalid_parameter", {
    param,
    message: `${count === 1 ? "The input" : param} is ${length} tokens long; the model '${modelId}' takes at most ${limit} tokens per input.`,
  });
}

/** A rerank query that cannot fit even beside an empty document: `query`. */
export function checkQueryLength(length: number, limit: number, modelId: string): void {
  if (length <= limit) return;
  throw new AppError("invalid_parameter", {
    param: "query",
    message: `The query is ${length} tokens long; the model '${modelId}' takes at most ${limit} tokens per query/document pair.`,
  });
}

/** The query with `documents[i]`, `length` tokens together: `documents[i]` past `limit`. */
export function checkPairLength(length: number, i: number, limit: number, modelId: string): void {
  if (length <= limit) return;
  throw new AppError("invalid_parameter", {
    param: `documents[${i}]`,
    message: `Query plus documents[${i}] is ${length} tokens; the model '${modelId}' takes at most ${limit} tokens per query/document pair.`,
  });
}
