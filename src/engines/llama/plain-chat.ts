import type { ChatWrapper, ChatWrapperGeneratedContextState, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import type { ChatDelta } from "../engine.ts";
import { StopTextFilter } from "../stop-text.ts";

/** What ends a plain answer besides the model's end-of-generation tokens: the template's own stop tokens and texts. */
export interface PlainStops {
  tokens: ReadonlySet<Token>;
  texts: readonly string[];
}

/**
 * Each piece is decoded after the last 3 tokens before it (a word keeps its leading space), as node-llama-cpp's
 * LlamaChat decodes; the answer's first piece after none, as LlamaChat starts it (no leading space).
 */
const detokenizerContext = 3;

/**
 * The stops of a chat that needs nothing of LlamaChat but its text (no tools, grammar or logprobs, checked by the
 * caller): null when the wrapper opens thought segments, skips text the answer starts with, or ends on a trigger that
 * is neither one token nor text.
 */
export function plainStops(model: LlamaModel, wrapper: ChatWrapper, state: Pick<ChatWrapperGeneratedContextState, "stopGenerationTriggers" | "ignoreStartText">): PlainStops | null {
  if (wrapper.settings.segments?.thought != null || (state.ignoreStartText?.length ?? 0) > 0) return null;
  const tokens = new Set<Token>();
  const texts: string[] = [];
  for (const trigger of state.stopGenerationTriggers) {
    if (trigger.values.every((value) => typeof value === "string")) {
      const text = trigger.toString();
      if (text.length > 0) texts.push(text);
      continue;
    }
    const ids = trigger.tokenize(model.tokenizer);
    // A special token the model does not have (EOS named nowhere but in its end-of-generation set) never comes.
    if (ids.length === 0) continue;
    if (ids.length !== 1) return null;
    if (!model.isEogToken(ids[0]!)) tokens.add(ids[0]!);
  }
  return { tokens, texts };
}

/** How many of the prompt's tokens the sequence holds already (its last is always evaluated again). */
export function cachedPromptOf(sequence: LlamaContextSequence, tokens: Token[]): number {
  return Math.max(0, Math.min(sequence.compareContextTokens(tokens).firstDifferentIndex, tokens.length - 1));
}

export interface PlainChatRun {
  model: LlamaModel;
  sequence: LlamaContextSequence;
  /** The templated prompt, tokenized. */
  tokens: Token[];
  stops: PlainStops;
  /** The request's own stop strings. */
  stop: readonly string[];
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  signal: AbortSignal;
}

/**
 * A plain-text answer in one lean loop over the sequence: llama.cpp samples, each token is decoded once (held while
 * it ends half a character), and stop strings are matched with hold-back. LlamaChat does the same for such a chat,
 * with the same sampler and the same tokens, plus per-token work for segments, function calls, penalties and
 * context shifts that cannot apply here (issue 46: that work was about 1 ms per token).
 */
export async function* plainChat(run: PlainChatRun): AsyncGenerator<ChatDelta> {
  const { model, sequence, stops } = run;
  const startTokens = sequence.tokenMeter.usedOutputTokens;
  const cachedPromptTokens = cachedPromptOf(sequence, run.tokens);
  const filter = new StopTextFilter([...run.stop, ...stops.texts]);
  // Keep what the sequence already holds of the prompt, but always evaluate its last token (its logits are the first step's).
  await sequence.adaptStateToTokens(run.tokens.slice(0, -1), false);
  const iterator = sequence.evaluateWithMetadata(run.tokens.slice(sequence.nextTokenIndex), {}, {
    temperature: run.temperature,
    topK: 0,
    topP: run.topP,
    minP: 0,
    seed: run.seed,
    yieldEogToken: true,
  });
  let recent: Token[] = [];
  let pending: Token[] = [];
  let text = "";
  let generated = 0;
  let finishReason: "stop" | "length" = "length";
  try {
    for (let next = await iterator.next(); !next.done && !run.signal.aborted; next = await iterator.next()) {
      const token = next.value.token;
      if (model.isEogToken(token) || stops.tokens.has(token)) {
        finishReason = "stop";
        break;
      }
      generated++;
      pending.push(token);
      const piece = model.detokenize(pending, false, recent);
      if (!piece.endsWith("\uFFFD")) {
        text += piece;
        recent = [...recent, ...pending].slice(-detokenizerContext);
        pending = [];
        const safe = filter.push(text);
        if (safe.length > 0) yield { type: "content", text: safe };
        if (filter.stopped) {
          finishReason = "stop";
          break;
        }
      }
      if (generated >= run.maxTokens) break;
    }
  } finally {
    await iterator.return();
  }
  if (!filter.stopped) {
    if (pending.length > 0) text += model.detokenize(pending, false, recent);
    const rest = filter.flush(text);
    if (rest.length > 0) yield { type: "content", text: rest };
  }
  const stopSequence = filter.stopped ? run.stop.find((s) => s.length > 0 && text.startsWith(s, filter.emittedLength)) : undefined;
  yield {
    type: "done",
    finishReason,
    usage: { promptTokens: run.tokens.length, completionTokens: sequence.tokenMeter.usedOutputTokens - startTokens },
    cachedPromptTokens,
    ...(stopSequence !== undefined ? { stopSequence } : {}),
  };
}
