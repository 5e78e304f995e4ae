import {
  ChatWrapper,
  LlamaText,
  SpecialTokensText,
  type ChatWrapperGenerateContextStateOptions,
  type ChatWrapperGeneratedContextState,
} from "node-llama-cpp";

/** A chat wrapper that renders exactly as another one, so a subclass can adjust only the generation start. */
export abstract class DelegatingChatWrapper extends ChatWrapper {
  readonly wrapperName: string;

  constructor(protected readonly inner: ChatWrapper, suffix: string) {
    super();
    this.wrapperName = `${inner.wrapperName}+${suffix}`;
    (this as { settings: ChatWrapper["settings"] }).settings = inner.settings;
  }

  override generateContextState(options: ChatWrapperGenerateContextStateOptions): ChatWrapperGeneratedContextState {
    return this.inner.generateContextState(options);
  }

  override generateFunctionCallResult(functionName: string, functionParams: unknown, result: unknown): LlamaText {
    return this.inner.generateFunctionCallResult(functionName, functionParams, result);
  }

  override generateAvailableFunctionsSystemText(...args: Parameters<ChatWrapper["generateAvailableFunctionsSystemText"]>): LlamaText {
    return this.inner.generateAvailableFunctionsSystemText(...args);
  }

  override generateModelResponseText(...args: Parameters<ChatWrapper["generateModelResponseText"]>): LlamaText {
    return this.inner.generateModelResponseText(...args);
  }
}

/**
 * Generation starts in function-calling mode: node-llama-cpp injects the call prefix and the function-call
 * grammar constrains the name and the arguments. This is how `tool_choice: "required"` and a named function
 * force a call on a model that would not call one by itself.
 */
export class ForcedCallChatWrapper extends DelegatingChatWrapper {
  constructor(inner: ChatWrapper) {
    super(inner, "ForcedCall");
  }

  override generateContextState(options: ChatWrapperGenerateContextStateOptions): ChatWrapperGeneratedContextState {
    const state = this.inner.generateContextState(options);
    return {
      ...state,
      prefixTriggers: undefined,
      noPrefixTrigger: { type: "functionCall", inject: LlamaText([]) },
      detectFunctionCalls: false,
    } as ChatWrapperGeneratedContextState;
  }
}

function valueText(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (value instanceof SpecialTokensText) return value.value;
  return null;
}

/** Removes `suffix` (as plain characters) from the end of a LlamaText, or returns null when it does not end so. */
export function stripSuffix(text: LlamaText, suffix: string): LlamaText | null {
  const values = [...text.values];
  let remaining = suffix;
  while (remaining.length > 0) {
    const last = values.pop();
    const s = valueText(last);
    if (s === null) return null;
    if (remaining.endsWith(s)) {
      remaining = remaining.slice(0, remaining.length - s.length);
    } else if (s.endsWith(remaining)) {
      const keep = s.slice(0, s.length - remaining.length);
      if (keep.length > 0) values.push(typeof last === "string" ? keep : new SpecialTokensText(keep));
      remaining = "";
    } else return null;
  }
  return LlamaText(values);
}

/**
 * For models with the `reasoning` capability: Qwen3-style templates render the open assistant turn with an empty,
 * already closed thought (`<think>\n\n</think>\n\n`), which would stop the model from reasoning. This removes it
 * and opens a thought segment instead, so the model thinks first; node-llama-cpp then reports the thought as a
 * segment (our `reasoning_content`) until the template's thought suffix closes it.
 */
export class ReasoningChatWrapper extends DelegatingChatWrapper {
  constructor(inner: ChatWrapper) {
    super(inner, "Reasoning");
  }

  static supports(wrapper: ChatWrapper): boolean {
    return wrapper.settings.segments?.thought != null;
  }

  override generateContextState(options: ChatWrapperGenerateContextStateOptions): ChatWrapperGeneratedContextState {
    const state = this.inner.generateContextState(options);
    const thought = this.settings.segments?.thought;
    if (!thought || (typeof thought.prefix === "object" && !(thought.prefix instanceof LlamaText))) return state;
    const prefix = LlamaText(thought.prefix as string | LlamaText).toString();
    const suffix = LlamaText(thought.suffix ?? []).toString();
    const opened = stripSuffix(state.contextText, prefix + suffix);
    if (!opened) return state;
    return {
      ...state,
      contextText: opened,
      prefixTriggers: undefined,
      noPrefixTrigger: { type: "segment", segmentType: "thought", inject: LlamaText(new SpecialTokensText(prefix)) },
    } as ChatWrapperGeneratedContextState;
  }
}
