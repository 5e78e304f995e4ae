import { AppError } from "../errors/app-error.ts";

/**
 * The one context-window check (§4.2): the prompt plus max_tokens must fit, and an omitted max_tokens must leave
 * room for at least one token. Returns the completion budget: max_tokens, or what the window leaves.
 * `note` qualifies the prompt in the message ("including 2 images").
 */
export function fitContextWindow(window: number, promptTokens: number, maxTokens: number | null, note = ""): number {
  const room = window - promptTokens;
  if (maxTokens !== null ? promptTokens + maxTokens > window : room < 1) {
    const prompt = `The messages take ${promptTokens} tokens${note ? ` (${note})` : ""}`;
    throw new AppError("context_length_exceeded", {
      param: "messages",
      message:
        `This model's context window is ${window} tokens. ${prompt}` +
        (maxTokens !== null ? ` and max_tokens asks for ${maxTokens} more.` : ", leaving no room for a completion."),
    });
  }
  return maxTokens ?? room;
}
