import { forgedStories } from "./forged-stories.ts";

/**
 * stories260K whose end-of-sequence token is its "." piece, written once into the model cache. stories260K itself
 * never generates `</s>`, so every answer runs to max_tokens; this one ends its turn at the end of its first
 * sentence, as an instruction-tuned model ends an answer. Clients that treat a `max_tokens` stop as a failure
 * (Claude Code retries it, then exits 1) get a real `end_turn` from the real weights. The "." ends the turn and is
 * not part of the answer.
 */
export function sentenceEndModel(): Promise<string> {
  return forgedStories("stories260K-sentence-end-v1.gguf", ({ kv }) => {
    const tokens = kv.find((e) => e.key === "tokenizer.ggml.tokens")!.value as string[];
    kv.find((e) => e.key === "tokenizer.ggml.eos_token_id")!.value = tokens.indexOf(".");
    kv.find((e) => e.key === "general.name")!.value = "stories260K-sentence-end";
  });
}
