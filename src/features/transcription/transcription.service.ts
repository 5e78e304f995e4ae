import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { requireModel } from "../model-access.ts";
import type { AudioDecoder } from "../../audio/audio-decoder.ts";
import { AppError } from "../../errors/app-error.ts";
import { languageName } from "./languages.ts";
import type { TranscriptionInput, TranscriptionResponse } from "./transcription.schema.ts";

/**
 * §4.4 POST /v1/audio/transcriptions. Checks run in the decisions.md order: fields (400, already done by the
 * form reader), model (404), scope (403), capability (400), then the file is decoded (400 param file) before
 * capacity is taken (503), so a bad upload never waits in the model's queue.
 *
 * Usage: prompt_tokens = audio seconds (rounded up), completion_tokens = generated text tokens.
 */
export async function transcribe(
  ctx: AppContext,
  auth: AuthContext,
  input: TranscriptionInput,
  decoder: AudioDecoder,
  signalFor: (deadlineMs: number) => AbortSignal,
): Promise<TranscriptionResponse> {
  const runner = requireModel(ctx, auth, "transcriptions", input.model, "transcriptions", "audio transcription");
  const engine = runner.assertServable();
  if (!engine.transcribe) {
    throw new AppError("invalid_parameter", { param: "model", message: `The model '${input.model}' cannot transcribe audio.` });
  }

  const signal = signalFor(runner.entry.requestTimeoutMs);
  const decoded = await decoder.decode(input.file.bytes, signal);
  if (decoded.audio.length === 0) throw new AppError("invalid_parameter", { param: "file", message: "The uploaded file contains no audio." });

  const request = { audio: decoded.audio, language: input.language, prompt: input.prompt, temperature: input.temperature };
  const transcript = await runner.run(auth.keyId, signal, (leased) => leased.transcribe!(request, signal));

  ctx.usage.record({
    keyId: auth.keyId,
    accountId: auth.accountId,
    model: input.model,
    endpoint: "transcriptions",
    promptTokens: Math.ceil(decoded.duration),
    completionTokens: transcript.completionTokens,
  });

  switch (input.responseFormat) {
    case "text":
      return { format: "text", body: transcript.text };
    case "verbose_json":
      return {
        format: "verbose_json",
        body: {
          task: "transcribe",
          language: languageName(transcript.language),
          duration: Math.round(decoded.duration * 1000) / 1000,
          text: transcript.text,
          segments: transcript.segments.map((s) => ({ id: s.id, start: s.start, end: s.end, text: s.text })),
        },
      };
    default:
      return { format: "json", body: { text: transcript.text } };
  }
}
