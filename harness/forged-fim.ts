import { forgedStories, type GgufTensor } from "./forged-stories.ts";

/** The FIM tokens of the forged model: three of stories260K's byte pieces (0x00 to 0x02, never in text) renamed. */
export const fimTokens = { prefix: "<|fim_prefix|>", suffix: "<|fim_suffix|>", middle: "<|fim_middle|>" } as const;
const fimIds = { prefix: 3, suffix: 4, middle: 5 };

/** The piece the model always generates first after `<|fim_middle|>` (see forgedFimModel). */
export const fimFirstPiece = " Timmy";
const firstPieceToken = "▁Timmy";

/** A tensor's f32 values, on its own bytes (a small tensor read into a shared pool may sit unaligned: read a copy then). */
function floats(t: GgufTensor, writable = false): Float32Array {
  if (t.data.byteOffset % 4 === 0) return new Float32Array(t.data.buffer, t.data.byteOffset, t.data.byteLength / 4);
  if (writable) throw new Error(`tensor ${t.name} is not aligned for writing`);
  return new Float32Array(Uint8Array.from(t.data).buffer);
}

/**
 * stories260K with fill-in-the-middle tokens, written once into the model cache (MODELGATE_MODEL_CACHE, default
 * ~/.cache/modelgate-models) with the forge's GGUF reader and writer: `<|fim_prefix|>`, `<|fim_suffix|>` and
 * `<|fim_middle|>` (control tokens named by `tokenizer.ggml.fim_{pre,suf,mid}_token_id`, as llama.cpp reads them)
 * take the places of three byte pieces. Scripted: the embedding of `<|fim_middle|>` is a large vector along the
 * output row of `▁Timmy` (divided by the final norm's weights), so it dominates the residual stream at that position
 * and the first token generated after the FIM prompt is always " Timmy"; the rest is stories260K's own greedy prose.
 * Same bytes on every run.
 */
export function forgedFimModel(): Promise<string> {
  return forgedStories("stories260K-fim-v1.gguf", (gguf, forge) => {
    const kv = gguf.kv;
    const tokens = kv.find((e) => e.key === "tokenizer.ggml.tokens")!.value as string[];
    const types = kv.find((e) => e.key === "tokenizer.ggml.token_type")!.value as number[];
    for (const [name, id] of Object.entries(fimIds)) {
      tokens[id] = fimTokens[name as keyof typeof fimTokens];
      types[id] = 3; // CONTROL
    }
    kv.find((e) => e.key === "general.name")!.value = "stories260K-fim";
    kv.push(
      { key: "tokenizer.ggml.fim_pre_token_id", type: forge.T.UINT32, value: fimIds.prefix },
      { key: "tokenizer.ggml.fim_suf_token_id", type: forge.T.UINT32, value: fimIds.suffix },
      { key: "tokenizer.ggml.fim_mid_token_id", type: forge.T.UINT32, value: fimIds.middle },
    );
    const tensor = (name: string) => gguf.tensors.find((t) => t.name === name)!;
    const width = tensor("output_norm.weight").dims[0]!;
    const norm = floats(tensor("output_norm.weight"));
    const target = tokens.indexOf(firstPieceToken);
    const row = floats(tensor("output.weight")).subarray(target * width, (target + 1) * width);
    const embedding = floats(tensor("token_embd.weight"), true).subarray(fimIds.middle * width, (fimIds.middle + 1) * width);
    for (let i = 0; i < width; i++) embedding[i] = (1000 * row[i]!) / norm[i]!;
  });
}
