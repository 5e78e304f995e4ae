import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { ChatMLChatWrapper, LlamaChat, QwenChatWrapper, type ChatHistoryItem, type LlamaContextSequence } from "node-llama-cpp";
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { PlainTextChatWrapper } from "../src/engines/llama/plain-chat-wrapper.ts";
import { plainChat, plainStops } from "../src/engines/llama/plain-chat.ts";
import type { ChatDelta } from "../src/engines/engine.ts";
import { modelsDir } from "../harness/server.ts";
import { sentenceEndModel } from "../harness/forged-sentence-end.ts";

/**
 * The llama engine's plain loop (issue 46.4) against node-llama-cpp's LlamaChat, which it replaces for answers that
 * are only text: on stories260K, same seeds, same sequence state, the same text, token count, finish and stop.
 */
const llama = await getLlamaRuntime();
const wrapper = new PlainTextChatWrapper();
const history: ChatHistoryItem[] = [{ type: "user", text: "Once upon a time" }, { type: "model", response: [] }];

/** A model with two sequences of one context: the plain loop generates on one, LlamaChat on the other. */
async function pairOn(modelPath: string) {
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ sequences: 2, contextSize: 512, threads: { ideal: 1, min: 1 } });
  const state = wrapper.generateContextState({ chatHistory: history });
  return { model, ours: context.getSequence(), theirs: context.getSequence(), tokens: state.contextText.tokenize(model.tokenizer), stops: plainStops(model, wrapper, state)! };
}
type Pair = Awaited<ReturnType<typeof pairOn>>;
const stories = await pairOn(path.join(modelsDir, "stories260K.gguf"));
const { model, stops } = stories;

interface Answer {
  text: string;
  completionTokens: number;
  finish: string;
  stopSequence?: string;
}

interface Ask {
  seed: number;
  temperature: number;
  maxTokens: number;
  stop: string[];
}

async function viaPlainLoop({ model, ours, tokens, stops }: Pair, o: Ask): Promise<Answer> {
  await ours.clearHistory();
  let text = "";
  let done: Extract<ChatDelta, { type: "done" }> | undefined;
  for await (const d of plainChat({ model, sequence: ours, tokens, stops, stop: o.stop, maxTokens: o.maxTokens, temperature: o.temperature, topP: 1, seed: o.seed, signal: new AbortController().signal })) {
    if (d.type === "content") text += d.text;
    if (d.type === "done") done = d;
  }
  return { text, completionTokens: done!.usage.completionTokens, finish: done!.finishReason, ...(done!.stopSequence ? { stopSequence: done!.stopSequence } : {}) };
}

async function viaLlamaChat({ theirs }: Pair, o: Ask): Promise<Answer> {
  await theirs.clearHistory();
  const before = theirs.tokenMeter.usedOutputTokens;
  const chat = new LlamaChat({ contextSequence: theirs, chatWrapper: wrapper });
  let text = "";
  const result = await chat.generateResponse(history, {
    maxTokens: o.maxTokens,
    temperature: o.temperature,
    topP: 1,
    topK: 0,
    seed: o.seed,
    customStopTriggers: o.stop.length > 0 ? o.stop : undefined,
    onResponseChunk: (chunk) => (text += chunk.text),
  });
  chat.dispose({ disposeSequence: false });
  const reason = result.metadata.stopReason;
  const trigger = reason === "customStopTrigger" ? result.metadata.customStopTrigger.filter((p) => typeof p === "string").join("") : undefined;
  return { text, completionTokens: theirs.tokenMeter.usedOutputTokens - before, finish: reason === "maxTokens" ? "length" : "stop", ...(trigger ? { stopSequence: trigger } : {}) };
}

test("the plain loop answers what LlamaChat answers: sampled, greedy, cut by max_tokens, ended by the model", async () => {
  // The sentence-end copy of stories260K ends its answers with EOS after a sentence (harness/forged-sentence-end.ts).
  const sentenceEnd = await pairOn(await sentenceEndModel());
  const cases: [Pair, Ask][] = [
    [stories, { seed: 1, temperature: 1, maxTokens: 48, stop: [] }],
    [stories, { seed: 2, temperature: 0.8, maxTokens: 48, stop: [] }],
    [stories, { seed: 3, temperature: 0, maxTokens: 300, stop: [] }],
    [sentenceEnd, { seed: 4, temperature: 1, maxTokens: 200, stop: [] }],
    [sentenceEnd, { seed: 5, temperature: 0, maxTokens: 200, stop: [] }],
  ];
  const finishes = new Set<string>();
  for (const [pair, c] of cases) {
    const expected = await viaLlamaChat(pair, c);
    assert.deepEqual(await viaPlainLoop(pair, c), expected, `seed ${c.seed}`);
    assert.ok(expected.text.length > 0);
    finishes.add(expected.finish);
  }
  assert.deepEqual([...finishes].sort(), ["length", "stop"], "both endings were compared");
});

test("the plain loop stops where LlamaChat stops on a request's stop string, and names it", async () => {
  const free = await viaLlamaChat(stories, { seed: 5, temperature: 1, maxTokens: 60, stop: [] });
  // A word from the middle of the free answer: the stopped answer ends just before it.
  const word = free.text.split(" ").filter((w) => w.length > 2)[3]!;
  const c = { seed: 5, temperature: 1, maxTokens: 60, stop: ["zzz-never", ` ${word}`] };
  const expected = await viaLlamaChat(stories, c);
  assert.equal(expected.stopSequence, ` ${word}`);
  assert.deepEqual(await viaPlainLoop(stories, c), expected);
});

test("templates the plain loop cannot end by itself stay with LlamaChat", () => {
  const chatml = new ChatMLChatWrapper();
  const chatmlState = chatml.generateContextState({ chatHistory: history });
  // stories260K has no <|im_end|> token: that trigger is several tokens of text markup, not one stop token.
  assert.equal(plainStops(model, chatml, chatmlState), null);
  const qwen = new QwenChatWrapper({ thoughts: "auto" });
  assert.equal(plainStops(model, qwen, qwen.generateContextState({ chatHistory: history })), null, "thought segments");
  assert.deepEqual(stops, { tokens: new Set(), texts: [] }, "the plain wrapper ends on EOS only");
});
