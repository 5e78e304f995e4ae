import { ChatWrapper, LlamaText, SpecialToken, type ChatWrapperGenerateContextStateOptions, type ChatWrapperGeneratedContextState } from "node-llama-cpp";

/**
 * The fallback for a GGUF without a chat template (e.g. stories260K, a plain story model that was never
 * instruction-tuned). Rather than dress the conversation in a guessed instruction format the model never saw,
 * it renders the message texts as one document, in order, separated by blank lines, with no role markers,
 * and lets the model continue it. "Once upon a time" therefore continues the story. Stops on EOS only.
 */
export class PlainTextChatWrapper extends ChatWrapper {
  readonly wrapperName = "PlainText";

  override generateContextState({ chatHistory }: ChatWrapperGenerateContextStateOptions): ChatWrapperGeneratedContextState {
    const parts: LlamaText[] = [];
    for (const item of chatHistory) {
      if (item.type === "system") parts.push(LlamaText.fromJSON(item.text));
      else if (item.type === "user") parts.push(LlamaText(item.text));
      else {
        const text = this.generateModelResponseText(item.response);
        if (text.values.length > 0) parts.push(text);
      }
    }
    const nonEmpty = parts.filter((p) => p.toString().length > 0);
    return {
      contextText: LlamaText(new SpecialToken("BOS"), LlamaText.joinValues("\n\n", nonEmpty)),
      stopGenerationTriggers: [LlamaText(new SpecialToken("EOS"))],
    };
  }
}
