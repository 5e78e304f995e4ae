/**
 * The main thread's handle on transformers.js (tokenizers, processors). sharp is loaded first: it must be loaded on
 * the main thread before any worker uses it (sharp#2263), and transformers.js loads it. Remote downloads are
 * off: models are fetched by `modelgate pull`, never at request time.
 */
export async function loadTransformers(): Promise<typeof import("@huggingface/transformers")> {
  await import("sharp");
  const transformers = await import("@huggingface/transformers");
  transformers.env.allowRemoteModels = false;
  transformers.env.allowLocalModels = true;
  return transformers;
}
