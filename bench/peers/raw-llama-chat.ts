// The raw engine a streamed chat is compared with: node-llama-cpp's LlamaChat in its own process, with the same
// model, context, threads, wrapper and sampling as Modelgate's llama engine. Loads once, then for each stdin line
// `N TOKENS SEED` runs N completions one after another and prints {tokensPerSecond, tokens} (completion tokens
// over the wall time from the call to the last token, as the stream client measures the server sides).
// `node --import tsx raw-llama-chat.ts MODEL THREADS CONTEXT`
import { createInterface } from "node:readline";
import { LlamaChat, resolveChatWrapper, type ChatHistoryItem } from "node-llama-cpp";
import { getLlamaRuntime } from "../../src/engines/llama/llama-runtime.ts";
import { PlainTextChatWrapper } from "../../src/engines/llama/plain-chat-wrapper.ts";

const [modelPath, threads, contextSize] = process.argv.slice(2);
const llama = await getLlamaRuntime();
const model = await llama.loadModel({ modelPath: modelPath! });
const context = await model.createContext({ sequences: 1, contextSize: Number(contextSize), threads: { ideal: Number(threads), min: Number(threads) } });
const sequence = context.getSequence();
const wrapper = model.fileInfo.metadata.tokenizer?.chat_template ? resolveChatWrapper(model) : new PlainTextChatWrapper();
const history: ChatHistoryItem[] = [{ type: "user", text: "Once upon a time" }, { type: "model", response: [] }];
console.log("listening 0");

for await (const line of createInterface({ input: process.stdin })) {
  const [n, maxTokens, seed] = line.split(" ").map(Number);
  let tokens = 0;
  let ms = 0;
  for (let i = 0; i < n!; i++) {
    const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: wrapper });
    const started = performance.now();
    await chat.generateResponse(history, { maxTokens, temperature: 1, topK: 0, topP: 1, seed: seed! + i, onResponseChunk: (chunk) => (tokens += chunk.tokens.length) });
    ms += performance.now() - started;
    chat.dispose({ disposeSequence: false });
  }
  console.log(JSON.stringify({ tokensPerSecond: (tokens / ms) * 1000, tokens }));
}
