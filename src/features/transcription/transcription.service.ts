import type { AppContext } from "../../app-context.ts";
import { runInference } from "../inference.ts";
import type { RequestContext } from "../request-context.ts";
import type { TranscribeRequest } from "../../engines/engine.ts";
import { languageName } from "./languages.ts";
import type { TranscriptionInput, TranscriptionResponse } from "./transcription.schema.ts";

/**
 * §4.4 POST /v1/audio/transcriptions. The form fields were checked by the form reader (400); the engine's prepare
 * step decodes the file (400 param file) so a bad upload never waits in the model's queue; the request then leases
 * one slot per window, up to the model's `parallel`. An upstream engine gets the file undecoded.
 *
 * Usage: prompt_tokens = audio seconds (rounded up), completion_tokens = generated text tokens.
 */
export async function transcribe(ctx: AppContext, request: RequestContext, input: TranscriptionInput): Promise<TranscriptionResponse> {
  const req: TranscribeRequest = { file: input.file, language: input.language, prompt: input.prompt, temperature: input.temperature };
  const transcript = await runInference(ctx, request, {
    model: input.model,
    port: "transcriptions",
    input: { kind: "transcriptions" },
    prepare: (transcriptions, signal) => transcriptions.prepareTranscribe(req, signal),
    // One slot per window of the recording, run side by side (the scheduler gives at most the model's parallel).
    slots: (prepared) => prepared.windows,
    run: (transcriptions, prepared, signal, lease) => transcriptions.transcribe(req, prepared, signal, lease.slots),
    usage: (t) => ({ promptTokens: Math.ceil(t.duration ?? 0), completionTokens: t.completionTokens }),
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
          duration: Math.round((transcript.duration ?? 0) * 1000) / 1000,
          text: transcript.text,
          segments: transcript.segments.map((s) => ({ id: s.id, start: s.start, end: s.end, text: s.text })),
        },
      };
    default:
      return { format: "json", body: { text: transcript.text } };
  }
}
