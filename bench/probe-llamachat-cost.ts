// `MODE=chat|loop|none node --import tsx bench/probe-llamachat-cost.ts MODEL [ROUNDS] [TOKENS]`: what node-llama-cpp's
// LlamaChat adds per token over a bare `sequence.evaluate` loop (issue 46.4). Each mode generates ROUNDS × TOKENS
// tokens on one sequence, 1 thread, sampled with the same settings; `none` only loads the model. Run each mode under
// `valgrind --tool=cachegrind --cache-sim=no --smc-check=all-non-file` and compare the instruction totals (steady on
// a VM without hardware counters, where wall time is not): (chat − loop) ÷ tokens is LlamaChat's own work.
import { LlamaChat, resolveChatWrapper, type Token } from "node-llama-cpp";
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { PlainTextChatWrapper } from "../src/engines/llama/plain-chat-wrapper.ts";

const [modelPath, rounds = "2", tokens = "96"] = process.argv.slice(2);
const maxTokens = Number(tokens);
const llama = await getLlamaRuntime();
const model = await llama.loadModel({ modelPath: modelPath! });
const context = await model.createContext({ sequences: 1, contextSize: 1024, threads: { ideal: 1, min: 1 } });
const sequence = context.getSequence();
const wrapper = model.fileInfo.metadata.tokenizer?.chat_template ? resolveChatWrapper(model) : new PlainTextChatWrapper();
const history = [{ type: "user" as const, text: "Once upon a time" }, { type: "model" as const, response: [] }];
// The loop evaluates the same templated prompt LlamaChat renders.
const prompt = wrapper.generateContextState({ chatHistory: history }).contextText.tokenize(model.tokenizer);

async function viaLlamaChat(seed: number): Promise<number> {
  await sequence.clearHistory();
  const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: wrapper });
  let n = 0;
  await chat.generateResponse(history, { maxTokens, temperature: 1, topK: 0, topP: 1, seed, onResponseChunk: (c) => (n += c.tokens.length) });
  chat.dispose({ disposeSequence: false });
  return n;
}

let decodedChars = 0;

async function viaLoop(seed: number): Promise<number> {
  await sequence.clearHistory();
  const iterator = sequence.evaluate(prompt as Token[], { temperature: 1, topK: 0, topP: 1, seed, yieldEogToken: true });
  let n = 0;
  for (let next = await iterator.next(); !next.done && n < maxTokens; next = await iterator.next()) {
    n++;
    // Each token decoded once, as a server streaming it must.
    decodedChars += model.detokenize([next.value], false).length;
  }
  await iterator.return();
  return n;
}

const mode = process.env.MODE ?? "chat";
const run = { chat: viaLlamaChat, loop: viaLoop, none: async () => 0 }[mode];
if (!run) throw new Error(`MODE is chat, loop or none, not ${mode}`);
let total = 0;
for (let i = 0; i < Number(rounds); i++) total += await run(100 + i);
console.log(JSON.stringify({ mode, tokens: total, decodedChars }));
process.exit(0);
