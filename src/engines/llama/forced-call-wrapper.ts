import { ChatWrapper, LlamaText, type ChatWrapperGenerateContextStateOptions, type ChatWrapperGeneratedContextState } from "node-llama-cpp";

/**
 * Wraps the model's chat wrapper so generation starts in function-calling mode: node-llama-cpp then injects
 * the call prefix and the function-call grammar constrains the name and the arguments. This is how
 * `tool_choice: "required"` and a named function force a call on a model that would not call one by itself.
 */
export class ForcedCallChatWrapper extends ChatWrapper {
  readonly wrapperName: string;

  constructor(private readonly inner: ChatWrapper) {
    super();
    this.wrapperName = `${inner.wrapperName}+ForcedCall`;
    (this as { settings: ChatWrapper["settings"] }).settings = inner.settings;
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
