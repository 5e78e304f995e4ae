import { TokenBias, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";
import type { ChatDelta, TokenLogprob } from "../engine.ts";
import { scanStops } from "../stop-text.ts";

export interface SamplingRun {
  model: LlamaModel;
  sequence: LlamaContextSequence;
  promptTokens: Token[];
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: number | null;
  stop: string[];
  /** How many alternatives to report per token (0..20); null: no logprobs, llama.cpp samples natively. */
  topLogprobs: number | null;
  /**
   * The text continues the prompt (a raw completion): the prompt's last tokens tell the detokenizer whether the first
   * piece starts with a space (" time" after "Once upon a"). A chat answer starts on its own.
   */
  continuesPrompt?: boolean;
  /** OpenAI's penalties over the tokens generated so far, and logits added by token id (raw completions). */
  penalties?: { presence: number; frequency: number };
  logitBias?: ReadonlyMap<number, number>;
  signal: AbortSignal;
}

/** A small seeded PRNG (mulberry32), so `seed` makes the logprobs path reproducible too. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks a token from the model's distribution (sorted high to low) under temperature and top_p. */
function pick(probabilities: Map<Token, number>, temperature: number, topP: number, random: () => number): Token {
  const entries = [...probabilities.entries()];
  if (temperature === 0) return entries[0][0];
  const weights = entries.map(([, p]) => Math.pow(p, 1 / temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  let kept = entries.length;
  if (topP < 1) {
    let mass = 0;
    for (let i = 0; i < entries.length; i++) {
      mass += weights[i] / total;
      if (mass >= topP) {
        kept = i + 1;
        break;
      }
    }
  }
  const keptTotal = weights.slice(0, kept).reduce((a, b) => a + b, 0);
  let r = random() * keptTotal;
  for (let i = 0; i < kept; i++) {
    r -= weights[i];
    if (r <= 0) return entries[i][0];
  }
  return entries[kept - 1][0];
}

function logprobOf(p: number): number {
  return Math.log(Math.max(p, Number.MIN_VALUE));
}

/** Logits added to tokens (OpenAI's logit_bias: -100 bans a token); node-llama-cpp applies none to end-of-generation tokens. */
function tokenBiasOf(model: LlamaModel, logitBias: ReadonlyMap<number, number> | undefined): TokenBias | undefined {
  if (!logitBias || logitBias.size === 0) return undefined;
  const bias = new TokenBias(model.tokenizer);
  for (const [token, logit] of logitBias) bias.set(token as Token, logit <= -100 ? "never" : { logit });
  return bias;
}

/**
 * One generation on a sequence through node-llama-cpp's low-level evaluation, for what LlamaChat does not offer:
 * token probabilities (chat's `logprobs`) and raw-prompt completions (their penalties and logit_bias). With
 * `topLogprobs` set, each step reads the model's full next-token distribution (temperature 1, the model's own
 * probabilities after any bias and penalty, which is what the logprobs report), samples from it in JS with the
 * request's temperature/top_p/seed, and feeds the chosen token back; without it, llama.cpp samples natively. Stop
 * strings are matched on the text with hold-back; each token's logprob travels with the delta that emits its text.
 */
export async function* sampleTokens(run: SamplingRun): AsyncGenerator<ChatDelta> {
  const { model, sequence } = run;
  const withLogprobs = run.topLogprobs !== null;
  const seed = run.seed ?? Math.floor(Math.random() * 2 ** 31);
  const random = prng(seed);
  const generated: Token[] = [];
  const before = run.continuesPrompt ? run.promptTokens.slice(-8) : [];
  const penalties = run.penalties && (run.penalties.presence !== 0 || run.penalties.frequency !== 0) ? run.penalties : null;
  const sampling = {
    // With logprobs, llama.cpp reports the whole distribution and JS samples from it.
    ...(withLogprobs ? { temperature: 1, topK: 0, topP: 1 } : { temperature: run.temperature, topK: 0, topP: run.topP, seed }),
    minP: 0,
    yieldEogToken: true,
    tokenBias: tokenBiasOf(model, run.logitBias),
    ...(penalties
      ? {
          repeatPenalty: {
            punishTokens: () => generated,
            maxPunishTokens: Math.max(1, run.maxTokens),
            penalty: 1,
            presencePenalty: penalties.presence,
            frequencyPenalty: penalties.frequency,
          },
        }
      : {}),
  };
  // Keep what the sequence already holds of the prompt, but always evaluate its last token (its distribution is
  // the first step's).
  await sequence.adaptStateToTokens(run.promptTokens.slice(0, -1), false);
  const iterator = sequence.evaluateWithMetadata(run.promptTokens.slice(sequence.nextTokenIndex), { probabilities: withLogprobs }, sampling);
  let text = "";
  let emitted = 0;
  /** Logprob entries whose token text ends at `end` in `text`, waiting for that text to be emitted. */
  const pending: { end: number; entry: TokenLogprob }[] = [];
  let finishReason: "stop" | "length" = "length";
  let next = await iterator.next();
  try {
    while (!next.done) {
      if (run.signal.aborted) break;
      const probabilities = (next.value as { probabilities?: Map<Token, number> }).probabilities;
      const token = probabilities ? pick(probabilities, run.temperature, run.topP, random) : next.value.token;
      if (model.isEogToken(token)) {
        finishReason = "stop";
        break;
      }
      generated.push(token);
      text = model.detokenize(generated, false, before);
      if (probabilities && run.topLogprobs !== null) {
        const context = (generated.length < 9 ? [...before, ...generated] : generated).slice(-9, -1);
        const entryText = model.detokenize([token], false, context);
        const top = [...probabilities.entries()].slice(0, run.topLogprobs).map(([t, p]) => {
          const s = model.detokenize([t], false, context);
          return { token: s, logprob: logprobOf(p), bytes: [...Buffer.from(s, "utf8")] };
        });
        pending.push({
          end: text.length,
          entry: { token: entryText, logprob: logprobOf(probabilities.get(token) ?? 0), bytes: [...Buffer.from(entryText, "utf8")], top_logprobs: top },
        });
      }
      const { safeEnd, stopped } = scanStops(text, emitted, run.stop);
      if (safeEnd > emitted || stopped) {
        const logprobs: TokenLogprob[] = [];
        while (pending.length > 0 && pending[0].end <= safeEnd) logprobs.push(pending.shift()!.entry);
        if (safeEnd > emitted || logprobs.length > 0) yield { type: "content", text: text.slice(emitted, safeEnd), ...(withLogprobs ? { logprobs } : {}) };
        emitted = safeEnd;
      }
      if (stopped) {
        finishReason = "stop";
        break;
      }
      if (generated.length >= run.maxTokens) break;
      next = await iterator.next(token);
    }
    if (finishReason === "length" || emitted < text.length) {
      // Whatever was held back for a stop string that never came is part of the answer.
      const { stopped } = scanStops(text, emitted, run.stop);
      if (!stopped && emitted < text.length) {
        yield { type: "content", text: text.slice(emitted), ...(withLogprobs ? { logprobs: pending.splice(0).map((p) => p.entry) } : {}) };
        emitted = text.length;
      }
    }
  } finally {
    await iterator.return();
  }
  yield { type: "done", finishReason, usage: { promptTokens: run.promptTokens.length, completionTokens: generated.length } };
}
