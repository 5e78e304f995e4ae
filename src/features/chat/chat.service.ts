import { randomUUID } from "node:crypto";
import type { AppContext } from "../../app-context.ts";
import type { TokenLogprob } from "../../engines/engine.ts";
import type { SseStream } from "../../http/sse.ts";
import { collectChat, streamChatTo } from "../generation/run-chat.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest } from "./chat.schema.ts";
import { toChatRequest } from "./chat.request.ts";

function usageOf(prompt: number, completion: number) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** §4.2 non-streaming: runs the generation to its end and returns the chat completion object. */
export async function completeChat(ctx: AppContext, request: RequestContext, body: ChatCompletionRequest): Promise<ChatCompletion> {
  const req = toChatRequest(body, request.auth.plan);
  const { output: acc, created } = await collectChat(ctx, request, body.model, req);
  const hasCalls = acc.toolCalls.length > 0;
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: "chat.completion",
    created,
    model: answerModel(request, body.model),
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: hasCalls && acc.content.length === 0 ? null : acc.content,
          ...(acc.reasoning.length > 0 ? { reasoning_content: acc.reasoning } : {}),
          ...(hasCalls ? { tool_calls: acc.toolCalls } : {}),
        },
        logprobs: req.topLogprobs !== null ? { content: acc.logprobs } : null,
        finish_reason: acc.finishReason ?? "stop",
      },
    ],
    usage: usageOf(acc.promptTokens, acc.completionTokens),
  };
}

/** §4.2 + §6 streaming: chat completion chunks, the usage chunk when asked for, then `data: [DONE]`. */
export async function streamChat(ctx: AppContext, request: RequestContext, body: ChatCompletionRequest, sse: SseStream): Promise<void> {
  const req = toChatRequest(body, request.auth.plan);
  const includeUsage = body.stream_options?.include_usage === true;
  const withLogprobs = req.topLogprobs !== null;
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  type Delta = ChatCompletionChunk["choices"][number]["delta"];
  type Finish = ChatCompletionChunk["choices"][number]["finish_reason"];
  const chunk = (delta: Delta, finishReason: Finish, logprobs?: TokenLogprob[]): ChatCompletionChunk => ({
    id,
    object: "chat.completion.chunk",
    created,
    model: answerModel(request, body.model),
    choices: [{ index: 0, delta, logprobs: withLogprobs && logprobs ? { content: logprobs } : null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  });
  await streamChatTo(ctx, request, body.model, req, sse, {
    start: () => sse.send(chunk({ role: "assistant", content: "" }, null)),
    delta: (delta) => {
      if (delta.type === "content") sse.send(chunk({ content: delta.text }, null, delta.logprobs ?? []));
      else if (delta.type === "reasoning") sse.send(chunk({ reasoning_content: delta.text }, null));
      else if (delta.id !== undefined) {
        const call = { index: delta.index, id: delta.id, type: "function" as const, function: { name: delta.name ?? "", arguments: delta.arguments } };
        sse.send(chunk({ tool_calls: [call] }, null));
      } else sse.send(chunk({ tool_calls: [{ index: delta.index, function: { arguments: delta.arguments } }] }, null));
    },
    finish: (reason, output) => {
      sse.send(chunk({}, reason));
      if (includeUsage) sse.send({ id, object: "chat.completion.chunk", created, model: answerModel(request, body.model), choices: [], usage: usageOf(output.promptTokens, output.completionTokens) });
      sse.done();
    },
    fail: (error) => sse.fail(error),
  });
}
