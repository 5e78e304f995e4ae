import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import multipart from "@fastify/multipart";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { requestContext } from "../request-context.ts";
import { readTranscriptionForm } from "./transcription.form.ts";
import { transcribe } from "./transcription.service.ts";
import { TranscriptionJson, TranscriptionRequestForm, TranscriptionVerbose } from "./transcription.schema.ts";

export default async function transcriptionRoutes(app: FastifyInstance): Promise<void> {
  // Scoped to this plugin: only the transcription route parses multipart.
  await app.register(multipart, { throwFileSizeLimit: true });

  app.post(
    "/audio/transcriptions",
    {
      config: { endpoint: "transcriptions", upload: true },
      schema: {
        operationId: "createTranscription",
        tags: ["audio"],
        summary: "§4.4 transcribe an audio file",
        consumes: ["multipart/form-data"],
        // Read part by part and checked against this schema by transcription.form.ts (the file is streamed).
        multipartBody: TranscriptionRequestForm,
        response: {
          200: {
            description: "json and verbose_json answers are JSON; response_format text is the transcript as text/plain",
            content: {
              "application/json": { schema: Type.Union([Type.Ref(TranscriptionVerbose), Type.Ref(TranscriptionJson)]) },
              "text/plain": { schema: Type.String() },
            },
          },
          ...inferenceErrors,
        },
      },
    },
    async (request, reply) => {
      const input = await readTranscriptionForm(request, request.auth!.plan.maxUploadBytes);
      const result = await transcribe(app.ctx, requestContext(request, reply), input);
      if (result.format === "text") return reply.type("text/plain; charset=utf-8").send(result.body);
      return result.body;
    },
  );
}
