import { randomInt } from "node:crypto";
import sharp from "sharp";
import {
  AutoModelForImageTextToText,
  AutoProcessor,
  BaseStreamer,
  RawImage,
  StoppingCriteria,
  Tensor,
  env,
  random,
  type PreTrainedModel,
  type Processor,
} from "@huggingface/transformers";
import { AppError } from "../../../errors/app-error.ts";
import type { ChatMessage, FinishReason } from "../../engine.ts";
import { StopTextFilter } from "../../stop-text.ts";

/**
 * Worker side of OnnxVlmEngine: one image-text-to-text model (AutoProcessor + AutoModelForImageTextToText).
 * `prepare` counts the prompt's tokens (image tokens included) without generating; `generate` streams text
 * pieces through ctx.emit and ends with a `done` event.
 */

/** How a processor takes its inputs: LLaVA is `(images, text)`, Idefics3/SmolVLM and Qwen2-VL are `(text, images)`. */
export type VlmLayout = "llava" | "text-first";

export interface VlmInit {
  modelPath: string;
  dtype: string | null;
  threads: number;
  layout: VlmLayout;
}

export interface GenerateArgs {
  messages: ChatMessage[];
  maxTokens: number;
  temperature: number | null;
  topP: number | null;
  seed: number | null;
  stop: string[];
}

export type VlmEvent =
  | { type: "content"; text: string }
  | { type: "done"; finishReason: FinishReason; usage: { promptTokens: number; completionTokens: number } };

/** Decoded images larger than this are refused (a small PNG can inflate to gigabytes). */
const MAX_IMAGE_PIXELS = 40_000_000;

let processor: Processor | null = null;
let model: PreTrainedModel | null = null;
let settings: VlmInit | null = null;

export async function init(arg: VlmInit): Promise<void> {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  settings = arg;
  processor = await AutoProcessor.from_pretrained(arg.modelPath, { local_files_only: true });
  model = await AutoModelForImageTextToText.from_pretrained(arg.modelPath, {
    dtype: (arg.dtype ?? "fp32") as "fp32",
    device: "cpu",
    local_files_only: true,
    session_options: { intraOpNumThreads: arg.threads, interOpNumThreads: 1 },
  });
}

export async function prepare(args: { messages: ChatMessage[] }): Promise<{ promptTokens: number; images: number }> {
  const { inputs, images } = await buildInputs(args.messages);
  const promptTokens = (inputs.input_ids as Tensor).dims.at(-1)!;
  return { promptTokens, images };
}

/** A chat's prompt token ids after the template (image tokens included), for /v1/tokenize. */
export async function tokenizeChat(args: { messages: ChatMessage[] }): Promise<number[]> {
  const { inputs } = await buildInputs(args.messages);
  return Array.from((inputs.input_ids as Tensor).data as BigInt64Array, Number);
}

/** Text to token ids with the model's tokenizer (special tokens, BOS, when `addSpecial`). */
export function encode(args: { text: string; addSpecial: boolean }): number[] {
  return processor!.tokenizer!.encode(args.text, { add_special_tokens: args.addSpecial });
}

/** Ids the tokenizer knows (its largest id + 1), found at the first decode. */
let vocabularySize: number | null = null;

/** Token ids back to text; an id outside the vocabulary is a 400 naming it. */
export function decode(args: { tokens: number[] }): string {
  const tokenizer = processor!.tokenizer!;
  if (vocabularySize === null) {
    vocabularySize = 0;
    for (const id of tokenizer.get_vocab().values()) vocabularySize = Math.max(vocabularySize, id + 1);
  }
  const size = vocabularySize;
  const outside = args.tokens.findIndex((t) => t >= size);
  if (outside >= 0) throw new AppError("invalid_parameter", { param: `tokens[${outside}]`, message: `Token ${args.tokens[outside]} is not in the model's vocabulary (0 to ${size - 1}).` });
  return tokenizer.decode(args.tokens);
}

export async function generate(args: GenerateArgs, ctx: { signal: AbortSignal; emit(v: VlmEvent): void }): Promise<void> {
  const m = model!;
  const tokenizer = processor!.tokenizer!;
  const { inputs } = await buildInputs(args.messages);
  const promptTokens = (inputs.input_ids as Tensor).dims.at(-1)!;
  if (ctx.signal.aborted) return;

  const eos = new Set<number>(eosIds(m));
  const generated: number[] = [];
  const filter = new StopTextFilter(args.stop);
  let sawEos = false;

  // Text is decoded from all generated ids each step, so multi-token characters and stop sequences that span
  // tokens come out right.
  const streamer = new (class extends BaseStreamer {
    private first = true;
    put(value: bigint[][]): void {
      if (this.first) {
        this.first = false; // generate() passes the prompt first
        return;
      }
      const id = Number(value[0][0]);
      if (eos.has(id)) {
        sawEos = true;
        return;
      }
      generated.push(id);
      const piece = filter.push(tokenizer.decode(generated, { skip_special_tokens: true }));
      if (piece) ctx.emit({ type: "content", text: piece });
    }
    end(): void {}
  })();

  const stopping = new (class extends StoppingCriteria {
    _call(inputIds: number[][]): boolean[] {
      return inputIds.map(() => filter.stopped || ctx.signal.aborted);
    }
  })();

  const sampling: Record<string, unknown> = {};
  if (args.temperature !== null) {
    sampling.do_sample = args.temperature > 0;
    if (args.temperature > 0) sampling.temperature = args.temperature;
  }
  if (args.topP !== null) sampling.top_p = args.topP;
  // Reseed every request: an unseeded one must not replay the state a seeded one left in this worker.
  random.seed(args.seed ?? randomInt(2 ** 31));

  await m.generate({
    ...inputs,
    ...sampling,
    max_new_tokens: args.maxTokens,
    streamer,
    stopping_criteria: [stopping],
  } as never);
  if (ctx.signal.aborted) return;

  const rest = filter.flush(tokenizer.decode(generated, { skip_special_tokens: true }));
  if (rest) ctx.emit({ type: "content", text: rest });
  const finishReason: FinishReason = filter.stopped || sawEos ? "stop" : "length";
  ctx.emit({ type: "done", finishReason, usage: { promptTokens, completionTokens: generated.length } });
}

function eosIds(m: PreTrainedModel): number[] {
  const cfg = (m as unknown as { generation_config?: { eos_token_id?: number | number[] } }).generation_config;
  const fromGen = cfg?.eos_token_id;
  const fromTok = processor!.tokenizer!.eos_token_id;
  const ids = [fromGen, fromTok].flat().filter((x): x is number => typeof x === "number");
  return ids;
}

interface LlavaProcessorConfig {
  image_token?: string;
  patch_size?: number;
  num_additional_image_tokens?: number;
  vision_feature_select_strategy?: string;
}

type TemplatePart = { type: "image" } | { type: "text"; text: string };

/** Chat messages in the shape chat templates expect, and the images in prompt order. */
function toTemplate(messages: ChatMessage[]): { messages: { role: string; content: TemplatePart[] }[]; images: { data: Uint8Array; mime: string; urlParam: string }[] } {
  const images: { data: Uint8Array; mime: string; urlParam: string }[] = [];
  const out = messages.map((msg) => {
    // Templates of vision models know system/user/assistant; a tool result is shown to the model as user text.
    const role = msg.role === "tool" ? "user" : msg.role;
    const content: TemplatePart[] = [];
    if (typeof msg.content === "string") content.push({ type: "text", text: msg.content });
    else if (Array.isArray(msg.content)) {
      for (const part of msg.content) {
        if (part.type === "text") content.push({ type: "text", text: part.text });
        else {
          images.push({ data: part.data, mime: part.mime, urlParam: part.urlParam });
          content.push({ type: "image" });
        }
      }
    }
    return { role, content };
  });
  return { messages: out, images };
}

async function decodeImage(img: { data: Uint8Array; mime: string; urlParam: string }): Promise<RawImage> {
  try {
    const meta = await sharp(img.data).metadata();
    if ((meta.width ?? 0) * (meta.height ?? 0) > MAX_IMAGE_PIXELS) {
      throw new AppError("invalid_parameter", {
        param: img.urlParam,
        message: `The image is ${meta.width}x${meta.height} pixels; at most ${MAX_IMAGE_PIXELS} pixels are accepted.`,
      });
    }
    return await RawImage.fromBlob(new Blob([img.data as Uint8Array<ArrayBuffer>], { type: img.mime }));
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError("invalid_parameter", { param: img.urlParam, message: `The image could not be decoded: ${(err as Error).message}` });
  }
}

async function buildInputs(chat: ChatMessage[]): Promise<{ inputs: Record<string, unknown>; images: number }> {
  const proc = processor!;
  const tokenizer = proc.tokenizer!;
  const { messages, images } = toTemplate(chat);
  let prompt: string;
  try {
    prompt = proc.apply_chat_template(messages as never, { add_generation_prompt: true, tokenize: false }) as string;
  } catch {
    // No chat template: a plain transcript.
    prompt = messages.map((m) => `${m.role}: ${m.content.map((p) => (p.type === "text" ? p.text : "<image>")).join("")}\n`).join("") + "assistant: ";
  }
  if (images.length === 0) return { inputs: { ...tokenizer(prompt) }, images: 0 };
  const raw: RawImage[] = [];
  for (const img of images) raw.push(await decodeImage(img));
  if (settings!.layout === "llava") {
    // LlavaProcessor(images, text) expands only the first image token; expand each one so several images work.
    const imageInputs = await proc.image_processor!(raw);
    const config = (proc as unknown as { config?: LlavaProcessorConfig }).config ?? {};
    let expanded = prompt;
    if (config.image_token && config.patch_size) {
      const [height, width] = (imageInputs.pixel_values as Tensor).dims.slice(-2);
      let perImage = Math.floor(height / config.patch_size) * Math.floor(width / config.patch_size) + (config.num_additional_image_tokens ?? 0);
      // As in transformers' LlavaProcessor: the "default" strategy drops the CLS feature.
      if (config.vision_feature_select_strategy === "default") perImage -= 1;
      expanded = prompt.split(config.image_token).join(config.image_token.repeat(perImage));
    }
    return { inputs: { ...imageInputs, ...tokenizer(expanded) }, images: raw.length };
  }
  const inputs = await (proc as unknown as (text: string, images: RawImage[]) => Promise<Record<string, unknown>>)(prompt, raw);
  return { inputs, images: raw.length };
}
