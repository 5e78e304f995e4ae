import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import type { CompletionDelta, CompletionLogprob, CompletionRequest } from "../engine.ts";
import { sampleTokens } from "./token-sampler.ts";

/*
 * Raw-prompt completions (/v1/completions) on node-llama-cpp: the prompt's tokens (or the model's fill-in-the-middle
 * prompt), the prompt's own logprobs, and the generation through the token sampler.
 */

/** Token ids the model's vocabulary has (ids at or past it are refused before they reach llama.cpp). */
export function vocabularySize(model: LlamaModel): number {
  return model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 0;
}

function leadingBos(model: LlamaModel): Token[] {
  return model.tokens.bos !== null && model.tokens.shouldPrependBosToken ? [model.tokens.bos] : [];
}

/**
 * Text as the model reads it (/v1/tokenize): special-token text (`</s>`, `<|fim_prefix|>`) is that token; with
 * `addSpecial`, the start token first and the end token last where the model's tokenizer adds them.
 */
export function tokenizeText(model: LlamaModel, text: string, addSpecial: boolean): Token[] {
  const eos = addSpecial && model.tokens.shouldAppendEosToken && model.tokens.eos !== null ? [model.tokens.eos] : [];
  return [...(addSpecial ? leadingBos(model) : []), ...model.tokenize(text, true), ...eos];
}

/**
 * The tokens a completion evaluates: BOS (when the model wants one) and the prompt; with a suffix, the model's FIM
 * prompt in llama-server's order (`/infill`, prefix-suffix-middle): BOS, FIM prefix, the prompt, FIM suffix, the
 * suffix, FIM middle, with prompt and suffix tokenized as plain text. A model without all three FIM tokens in its
 * GGUF takes no suffix (400 naming it).
 */
export function completionPrompt(model: LlamaModel, req: CompletionRequest, modelId: string): Token[] {
  if (req.suffix === null) {
    const tokens = [...leadingBos(model), ...model.tokenize(req.prompt, true)];
    if (tokens.length === 0) throw new AppError("invalid_parameter", { param: req.promptParam, message: "The prompt is empty, and this model has no start token to begin from." });
    return tokens;
  }
  const { prefix, suffix, middle } = model.tokens.infill;
  if (prefix === null || suffix === null || middle === null) {
    throw new AppError("invalid_parameter", {
      param: "suffix",
      message: `The model '${modelId}' has no fill-in-the-middle tokens (prefix, suffix and middle), so it takes no suffix.`,
    });
  }
  return [...leadingBos(model), prefix, ...model.tokenize(req.prompt, false), suffix, ...model.tokenize(req.suffix, false), middle];
}

/** Every logit_bias key must be a token of the vocabulary (400 naming logit_bias). */
export function checkLogitBias(model: LlamaModel, bias: ReadonlyMap<number, number>): void {
  const size = vocabularySize(model);
  for (const token of bias.keys()) {
    if (token >= size) throw new AppError("invalid_parameter", { param: "logit_bias", message: `logit_bias names token ${token}; the model's vocabulary has ${size} tokens (0 to ${size - 1}).` });
  }
}

/** Full next-token distributions held at once while scoring a prompt (each is the whole vocabulary). */
const distributionBudget = 2_000_000;

function logprobOf(p: number): number {
  return Math.log(Math.max(p, Number.MIN_VALUE));
}

/**
 * The prompt's own tokens with their logprobs (echo with logprobs): each token's probability given the tokens
 * before it, read from the distribution the model computes at the position before. The sequence is evaluated from
 * the start (a cached prefix has no logits left), in chunks sized so that the distributions held at once stay under
 * `distributionBudget` entries. The first token (after BOS) has no logprob, as in OpenAI's answers.
 */
export async function promptLogprobs(model: LlamaModel, sequence: LlamaContextSequence, tokens: Token[], top: number): Promise<CompletionLogprob[]> {
  const first = leadingBos(model).length > 0 && tokens[0] === model.tokens.bos ? 1 : 0;
  const shown = tokens.slice(first);
  const entries: CompletionLogprob[] = shown.map((token, i) => ({ token: model.detokenize([token], true, shown.slice(Math.max(0, i - 8), i)), logprob: null, top: [] }));
  await sequence.clearHistory();
  const chunk = Math.max(1, Math.floor(distributionBudget / Math.max(1, vocabularySize(model))));
  const options = { temperature: 1, topK: 0, topP: 1, minP: 0 };
  // Position p's distribution predicts token p + 1; the last token predicts nothing asked here.
  for (let start = 0; start < tokens.length - 1; start += chunk) {
    const end = Math.min(tokens.length - 1, start + chunk);
    const input = tokens.slice(start, end).map((token, i) => (start + i >= first ? ([token, { generateNext: { probabilities: true, options } }] as const) : token));
    const results = await sequence.controlledEvaluate(input as Parameters<LlamaContextSequence["controlledEvaluate"]>[0]);
    for (let i = 0; i < end - start; i++) {
      const probabilities = results[i]?.next.probabilities;
      const position = start + i;
      if (!probabilities || position < first) continue;
      const entry = entries[position + 1 - first]!;
      entry.logprob = logprobOf(probabilities.get(tokens[position + 1]!) ?? 0);
      entry.top = [...probabilities.entries()].slice(0, top).map(([t, p]) => ({ token: model.detokenize([t], true, tokens.slice(Math.max(first, position - 7), position + 1)), logprob: logprobOf(p) }));
    }
  }
  return entries;
}

export interface CompletionRun {
  model: LlamaModel;
  sequence: LlamaContextSequence;
  req: CompletionRequest;
  tokens: Token[];
  maxTokens: number;
  temperature: number;
  topP: number;
  signal: AbortSignal;
}

/** One completion on a lent sequence: the prompt's logprobs when asked, then the generation, as completion deltas. */
export async function* runCompletion(run: CompletionRun): AsyncGenerator<CompletionDelta> {
  const { req, model, sequence, tokens } = run;
  if (req.promptLogprobs) yield { type: "prompt", logprobs: await promptLogprobs(model, sequence, tokens, req.logprobs ?? 0) };
  if (run.maxTokens === 0) {
    yield { type: "done", finishReason: "length", usage: { promptTokens: tokens.length, completionTokens: 0 } };
    return;
  }
  const deltas = sampleTokens({
    model,
    sequence,
    promptTokens: tokens,
    maxTokens: run.maxTokens,
    temperature: run.temperature,
    topP: run.topP,
    seed: req.seed,
    stop: req.stop,
    topLogprobs: req.logprobs,
    continuesPrompt: true,
    penalties: { presence: req.presencePenalty, frequency: req.frequencyPenalty },
    logitBias: req.logitBias,
    signal: run.signal,
  });
  for await (const delta of deltas) {
    if (delta.type === "content") {
      const logprobs = delta.logprobs?.map((entry) => ({ token: entry.token, logprob: entry.logprob, top: entry.top_logprobs.map(({ token, logprob }) => ({ token, logprob })) }));
      yield { type: "text", text: delta.text, ...(logprobs ? { logprobs } : {}) };
    } else if (delta.type === "done") {
      yield { type: "done", finishReason: delta.finishReason === "length" ? "length" : "stop", usage: delta.usage };
    }
  }
}
