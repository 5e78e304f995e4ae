import path from "node:path";
import { LlamaChat, type ChatHistoryItem } from "node-llama-cpp";
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { PlainTextChatWrapper } from "../src/engines/llama/plain-chat-wrapper.ts";
import { startServer, modelsDir, type TestServer } from "../test/helpers/server.ts";
import { median, type BenchRow } from "./bench-row.ts";

const RUNS = 5;
const THREADS = 1;
const TOKENS = 200;
const CONTEXT = 512;
const chatModel = path.join(modelsDir, "stories260K.gguf");
const embedModel = path.join(modelsDir, "forged/bert-embed-tiny.gguf");
const prompt = "Once upon a time";
const history: ChatHistoryItem[] = [{ type: "user", text: prompt }, { type: "model", response: [] }];
const sentences = Array.from({ length: 64 }, (_, i) => `The ${["cat", "dog", "girl", "boy"][i % 4]} number ${i} played in the ${["park", "garden", "house"][i % 3]} all day.`);

function now(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

interface StreamResult {
  tokens: number;
  ms: number;
  ttftMs: number;
}

/** One streamed completion through HTTPS: completion tokens (from include_usage), wall time, time to first content. */
async function streamOnce(srv: TestServer, key: string, seed: number, maxTokens = TOKENS): Promise<StreamResult> {
  const started = now();
  const res = await srv.fetch(`${srv.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "stories",
      messages: [{ role: "user", content: prompt }],
      max_tokens: maxTokens,
      temperature: 1,
      seed,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (res.status !== 200) throw new Error(`chat failed: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let ttft = -1;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    if (ttft < 0 && /"content":"[^"]/.test(buffer)) ttft = now() - started;
  }
  const ms = now() - started;
  const usage = /"completion_tokens":(\d+)/.exec(buffer);
  return { tokens: Number(usage?.[1] ?? 0), ms, ttftMs: ttft };
}

/**
 * Llama chat and embeddings: the service over HTTPS against node-llama-cpp in-process, same model, threads,
 * prompt, sampling and seeds.
 */
export default async function llamaBench(): Promise<BenchRow[]> {
  const llama = await getLlamaRuntime();
  // Raw and service are both loaded (the models are tiny) and measured alternately, run by run, so a load spike
  // from other processes on this shared machine hits both sides alike.
  const model = await llama.loadModel({ modelPath: chatModel });
  const context = await model.createContext({ sequences: 8, contextSize: CONTEXT, threads: { ideal: THREADS, min: THREADS } });
  const sequences = Array.from({ length: 8 }, () => context.getSequence());
  const embed = await llama.loadModel({ modelPath: embedModel });
  const embedContext = await embed.createEmbeddingContext({ threads: THREADS });
  const srv = await startServer({
    logLevel: "error",
    models: [
      { id: "stories", engine: "llama", source: chatModel, capabilities: ["chat"], contextSize: CONTEXT, parallel: 8, threads: THREADS, queueSize: 64 },
      { id: "embed", engine: "llama", source: embedModel, capabilities: ["embeddings"], threads: THREADS },
    ],
  });

  const generate = async (i: number, seed: number, maxTokens = TOKENS): Promise<StreamResult> => {
    const chat = new LlamaChat({ contextSequence: sequences[i], chatWrapper: new PlainTextChatWrapper() });
    const started = now();
    let ttft = -1;
    let tokens = 0;
    await chat.generateResponse(history, {
      maxTokens,
      temperature: 1,
      topK: 0,
      topP: 1,
      seed,
      onResponseChunk: (chunk) => {
        if (ttft < 0 && chunk.text.length > 0) ttft = now() - started;
        tokens += chunk.tokens.length;
      },
    });
    chat.dispose({ disposeSequence: false });
    return { tokens, ms: now() - started, ttftMs: ttft };
  };
  const aggregate = async (run: (i: number) => Promise<StreamResult>) => {
    const started = now();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => run(i)));
    return (results.reduce((sum, r) => sum + r.tokens, 0) / (now() - started)) * 1000;
  };
  const rate = (r: StreamResult) => (r.tokens / r.ms) * 1000;

  const raw = { single: [] as number[], ttft: [] as number[], batched: [] as number[], embed: [] as number[] };
  const svc = { single: [] as number[], ttft: [] as number[], batched: [] as number[], embed: [] as number[] };
  try {
    const { key } = await srv.createKey();
    const embedCall = async () => {
      const res = await srv.fetch(`${srv.baseURL}/embeddings`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "embed", input: sentences, encoding_format: "base64" }),
      });
      const body = (await res.json()) as { data?: unknown[] };
      if (res.status !== 200 || body.data?.length !== sentences.length) throw new Error(`embeddings failed: ${res.status}`);
    };
    const rawEmbed = async () => {
      for (const s of sentences) await embedContext.getEmbeddingFor(s);
    };
    const timed = async (fn: () => Promise<unknown>) => {
      const started = now();
      await fn();
      return (sentences.length / (now() - started)) * 1000;
    };
    // Warm-up of every path.
    await generate(0, 0);
    await streamOnce(srv, key, 0);
    await rawEmbed();
    await embedCall();
    for (let run = 0; run < RUNS; run++) {
      raw.single.push(rate(await generate(0, run)));
      svc.single.push(rate(await streamOnce(srv, key, run)));
      raw.batched.push(await aggregate((i) => generate(i, run * 8 + i)));
      svc.batched.push(await aggregate((i) => streamOnce(srv, key, run * 8 + i)));
      raw.embed.push(await timed(rawEmbed));
      svc.embed.push(await timed(embedCall));
    }
    for (let i = 0; i < 20; i++) {
      raw.ttft.push((await generate(0, i, 4)).ttftMs);
      svc.ttft.push((await streamOnce(srv, key, i, 4)).ttftMs);
    }
  } finally {
    await srv.close();
    await embedContext.dispose();
    await embed.dispose();
    await context.dispose();
    await model.dispose();
  }

  const streamed = median(svc.single);
  const rawSingle = median(raw.single);
  const batched = median(svc.batched);
  const rawBatched = median(raw.batched);
  const ttft = median(svc.ttft);
  const rawTtft = median(raw.ttft);
  return [
    { item: "llama streamed chat, 1 stream (HTTPS SSE vs LlamaChat)", service: streamed, raw: rawSingle, unit: "tok/s", ratio: streamed / rawSingle, target: ">= 0.95" },
    { item: "llama 8 concurrent streams vs 1 (service aggregate)", service: batched, raw: streamed, unit: "tok/s", ratio: batched / streamed, target: ">= 1.3" },
    { item: "llama raw batching 8 sequences vs 1 (reference)", service: rawBatched, raw: rawSingle, unit: "tok/s", ratio: rawBatched / rawSingle, target: "(1.4 ref)" },
    { item: "llama TTFT p50 (ratio = ms added by service)", service: ttft, raw: rawTtft, unit: "ms", ratio: ttft - rawTtft, target: "<= 5 ms" },
    { item: "llama embeddings, batch 64 (HTTPS vs getEmbeddingFor)", service: median(svc.embed), raw: median(raw.embed), unit: "inputs/s", ratio: median(svc.embed) / median(raw.embed), target: ">= 0.9" },
  ];
}
