import { AppError } from "../errors/app-error.ts";
import type { ChatRequest } from "./engine.ts";

/** What a chat may generate, worked out once per request by the engine that counted its prompt. */
export interface Completion {
  /** The completion budget: max_tokens, or what the window leaves, lowered to the plan's output cap. */
  budget: number;
  /**
   * What to ask an engine that bounds the completion itself (an upstream): max_tokens, or the plan's cap when it is
   * below what the window leaves; null to ask nothing, since its own prompt count may differ slightly from ours.
   */
  asked: number | null;
}

/** What the context error names: the chat's messages (the default), or a raw completion's prompt (`prompt[1]`). */
export interface PromptSubject {
  param: string;
  /** "The messages take", "The prompt takes". */
  takes: string;
  /** Qualifies the prompt in the message ("including 2 images"). */
  note?: string;
}

const messages: PromptSubject = { param: "messages", takes: "The messages take" };

/**
 * The one context-window check (§4.2) and the one completion budget. The prompt plus max_tokens must fit `window`,
 * and an omitted max_tokens must leave room for at least one token; `window` null (an upstream that does not say,
 * or a prompt it did not count) checks nothing, and only max_tokens and the plan's cap bound the budget.
 */
export function fitCompletion(window: number | null, promptTokens: number, req: Pick<ChatRequest, "maxTokens" | "outputCap">, subject: PromptSubject = messages): Completion {
  const room = window === null ? Number.MAX_SAFE_INTEGER : roomLeft(window, promptTokens, req.maxTokens, subject);
  const cap = req.outputCap ?? null;
  return {
    budget: Math.min(req.maxTokens ?? room, cap ?? Number.MAX_SAFE_INTEGER),
    asked: req.maxTokens ?? (cap !== null && cap < room ? cap : null),
  };
}

/** What `window` leaves after the prompt; context_length_exceeded when max_tokens, or one token, does not fit. */
function roomLeft(window: number, promptTokens: number, maxTokens: number | null, subject: PromptSubject): number {
  const room = window - promptTokens;
  if (maxTokens !== null ? promptTokens + maxTokens > window : room < 1) {
    const prompt = `${subject.takes} ${promptTokens} tokens${subject.note ? ` (${subject.note})` : ""}`;
    throw new AppError("context_length_exceeded", {
      param: subject.param,
      ...(room < 1 ? { overflow: { promptTokens, window } } : {}),
      message:
        `This model's context window is ${window} tokens. ${prompt}` +
        (maxTokens !== null ? ` and max_tokens asks for ${maxTokens} more.` : ", leaving no room for a completion."),
    });
  }
  return room;
}
