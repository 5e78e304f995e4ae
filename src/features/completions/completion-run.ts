import type { AppContext } from "../../app-context.ts";
import type { CompletionLogprob, CompletionPort, PreparedCompletion } from "../../engines/engine.ts";
import { DeadlineExceeded } from "../../errors/aborts.ts";
import type { Lease } from "../../scheduler/runner-types.ts";
import { GenerationTimer } from "../generation/generation-timer.ts";
import { runInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import type { CompletionPlan } from "./completions.request.ts";

/** What a wire format does with the choices as they are generated (collect them, or stream them). */
export interface ChoiceEvents {
  /** Choice `index` gets text: its echoed prompt, or generated text; `logprobs` for its tokens when asked (else null). */
  text(index: number, text: string, logprobs: readonly CompletionLogprob[] | null): void;
  finish(index: number, reason: "stop" | "length"): void;
}

export interface CompletionTotals {
  promptTokens: number;
  completionTokens: number;
}

/** All the prompts of one request, prepared together: the reservation and fair share count them all. */
interface PreparedPrompts {
  prompts: PreparedCompletion[];
  promptTokens: number;
  /** Every choice's completion budget together. */
  maxTokens: number;
}

/**
 * A legacy completion request through the one admission path (runInference: keys, scopes, limits, reservation,
 * fair share, usage, metrics and traces as for chat), its choices run on the slots the scheduler leased, at most
 * that many at once. A prompt's tokens count once however many choices it has (as OpenAI and vLLM count them); a
 * request deadline ends the open choices as if max_tokens had been reached, with what they produced. `started`
 * says whether the answer already went out (a streamed one), so a deadline before that is the 503 it would be.
 */
export function runCompletions(
  ctx: AppContext,
  request: RequestContext,
  model: string,
  plan: CompletionPlan,
  events: ChoiceEvents,
  hooks: { onQueued?(): void; started?(): boolean; buffered?: boolean } = {},
): Promise<CompletionTotals> {
  const choices = hooks.buffered ? plan.choices.map((c) => ({ ...c, buffered: true })) : plan.choices;
  return runInference(ctx, request, {
    model,
    port: "completions",
    completion: choices[0],
    operation: "text_completion",
    input: { kind: "completions", prompts: plan.prompts, suffix: choices[0]!.suffix, choices: choices.length },
    async prepare(port, signal): Promise<PreparedPrompts> {
      const prompts = await Promise.all(plan.prompts.map((_, p) => port.prepareCompletion(choices[p * plan.n]!, signal)));
      return { prompts, promptTokens: sum(prompts.map((p) => p.promptTokens)), maxTokens: sum(prompts.map((p) => p.maxTokens)) * plan.n };
    },
    slots: () => choices.length,
    promptTokens: (prepared) => prepared.promptTokens,
    onQueued: hooks.onQueued,
    run: (port, prepared, signal, lease) => runChoices(ctx, request, model, plan, choices, port, prepared, signal, lease, events, hooks.started ?? (() => false)),
    usage: (totals) => totals,
  });
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

async function runChoices(
  ctx: AppContext,
  request: RequestContext,
  model: string,
  plan: CompletionPlan,
  choices: CompletionPlan["choices"],
  port: CompletionPort,
  prepared: PreparedPrompts,
  signal: AbortSignal,
  lease: Lease,
  events: ChoiceEvents,
  started: () => boolean,
): Promise<CompletionTotals> {
  const timer = new GenerationTimer(ctx.metrics, answerModel(request, model), request);
  const promptTokens: (number | null)[] = plan.prompts.map(() => null);
  const generated = choices.map(() => 0);
  const finished = choices.map(() => false);
  // One choice failing stops the others: the request fails as a whole.
  const stop = new AbortController();
  const choiceSignal = AbortSignal.any([signal, stop.signal]);
  let charged = 0;
  const meter = () => {
    const pieces = sum(generated);
    if (pieces > charged) lease.charge(pieces - charged);
    charged = Math.max(charged, pieces);
  };

  const runChoice = async (index: number) => {
    const req = choices[index]!;
    const p = Math.floor(index / plan.n);
    let echoed = !plan.echo;
    const echo = (logprobs: readonly CompletionLogprob[] | null) => {
      if (echoed) return;
      echoed = true;
      events.text(index, req.prompt, logprobs);
    };
    if (!req.promptLogprobs) echo(null);
    const asked = req.logprobs !== null;
    for await (const delta of port.complete(req, prepared.prompts[p]!, choiceSignal, lease)) {
      if (delta.type === "prompt") echo(delta.logprobs);
      else if (delta.type === "text") {
        echo(asked ? [] : null);
        timer.piece();
        generated[index]! += delta.logprobs?.length || 1;
        meter();
        events.text(index, delta.text, delta.logprobs ?? (asked ? [] : null));
      } else {
        echo(asked ? [] : null);
        promptTokens[p] ??= delta.usage.promptTokens;
        generated[index] = delta.usage.completionTokens;
        finished[index] = true;
        events.finish(index, delta.finishReason);
      }
    }
  };

  let next = 0;
  const worker = async () => {
    while (next < choices.length) {
      const index = next++;
      try {
        await runChoice(index);
      } catch (err) {
        stop.abort(err);
        throw err;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(lease.slots, choices.length)) }, worker));
  } catch (err) {
    // A deadline after the answer began ends the open choices where they are (an unseen choice ends empty).
    if (!(err instanceof DeadlineExceeded) || !started()) throw err;
    choices.forEach((_, index) => finished[index] || events.finish(index, "length"));
  }
  const totals = { promptTokens: sum(promptTokens.map((count, p) => count ?? prepared.prompts[p]!.promptTokens)), completionTokens: sum(generated) };
  timer.finish(totals.completionTokens);
  return totals;
}
