import { randomUUID } from "node:crypto";
import type { AppContext } from "../../app-context.ts";
import { isClientDisconnect } from "../../errors/aborts.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import type { SseStream } from "../../http/sse.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import { runCompletions, type CompletionTotals } from "./completion-run.ts";
import { toCompletionPlan } from "./completions.request.ts";
import type { Completion, CreateCompletionRequest } from "./completions.schema.ts";
import { LegacyLogprobs } from "./legacy-logprobs.ts";

function usageOf({ promptTokens, completionTokens }: CompletionTotals) {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** POST /v1/completions: every choice run to its end, answered as one `text_completion`. */
export async function completeText(ctx: AppContext, request: RequestContext, body: CreateCompletionRequest): Promise<Completion> {
  const plan = toCompletionPlan(body, request.auth.plan);
  const choices = plan.choices.map(() => ({ text: "", logprobs: new LegacyLogprobs(), withLogprobs: false, finish: "length" as "stop" | "length" }));
  const totals = await runCompletions(
    ctx,
    request,
    body.model,
    plan,
    {
      text(index, text, logprobs) {
        const choice = choices[index]!;
        choice.text += text;
        if (logprobs) {
          choice.withLogprobs = true;
          choice.logprobs.add(text, logprobs);
        }
      },
      finish(index, reason) {
        choices[index]!.finish = reason;
      },
    },
    { buffered: true, started: () => true },
  );
  return {
    id: `cmpl-${randomUUID()}`,
    object: "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: answerModel(request, body.model),
    choices: choices.map((c, index) => ({ text: c.text, index, logprobs: c.withLogprobs ? c.logprobs.all() : null, finish_reason: c.finish })),
    usage: usageOf(totals),
  };
}

/**
 * POST /v1/completions with stream: true: `text_completion` events as the choices generate (interleaved, each naming
 * its index), a last event per choice with its finish_reason, the usage event when asked for, then `data: [DONE]`.
 * Nothing is written before the first text, so an error before it is a normal JSON error; after it, the §6 error
 * event ends the stream.
 */
export async function streamText(ctx: AppContext, request: RequestContext, body: CreateCompletionRequest, sse: SseStream): Promise<void> {
  const plan = toCompletionPlan(body, request.auth.plan);
  const id = `cmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const includeUsage = body.stream_options?.include_usage === true;
  const logs = plan.choices.map(() => new LegacyLogprobs());
  const event = (choices: Completion["choices"]): Completion => ({ id, object: "text_completion", created, model: answerModel(request, body.model), choices, ...(includeUsage ? { usage: null } : {}) });
  let started = false;
  try {
    const totals = await runCompletions(
      ctx,
      request,
      body.model,
      plan,
      {
        text(index, text, logprobs) {
          started = true;
          if (logprobs) logs[index]!.add(text, logprobs);
          sse.send(event([{ text, index, logprobs: logprobs ? logs[index]!.take() : null, finish_reason: null }]));
        },
        finish(index, reason) {
          started = true;
          sse.send(event([{ text: "", index, logprobs: null, finish_reason: reason }]));
        },
      },
      { onQueued: () => sse.keepAliveUntilFirstFrame(), started: () => started || sse.committed },
    );
    if (includeUsage) sse.send({ id, object: "text_completion", created, model: answerModel(request, body.model), choices: [], usage: usageOf(totals) });
    sse.done();
  } catch (err) {
    if (!sse.committed) {
      sse.dispose();
      throw err;
    }
    const { appError, unexpected, disconnected } = toAppError(err);
    if (request.outcome && !disconnected) request.outcome.errorCode = appError.code;
    if (isClientDisconnect(err)) request.log.debug("client disconnected during the stream");
    else if (unexpected) request.log.error({ err }, "completion stream failed after the response was committed");
    sse.fail(appError);
  }
}
