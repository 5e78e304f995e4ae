import type { ModelEntry } from "../../config/app-config.ts";
import type { EngineKind } from "../engine-kind.ts";
import { encoderEmbedSupport, encoderRerankSupport, OnnxOptions, vlmSupport, whisperSupport } from "./onnx.support.ts";

/** Which ONNX engine an entry gets follows from its capabilities. */
function variant(entry: ModelEntry): "whisper" | "vlm" | "rerank" | "embed" {
  const can = (c: ModelEntry["capabilities"][number]) => entry.capabilities.includes(c);
  if (can("transcriptions")) return "whisper";
  if (can("vision") || can("chat")) return "vlm";
  return can("rerank") ? "rerank" : "embed";
}

/** The whisper engine cuts long audio at silences with Silero VAD, which it finds beside the pulled models. */
export const sileroVadRef = "hf:onnx-community/silero-vad:onnx/model.onnx";

export const onnxKind: EngineKind = {
  name: "onnx",
  companionRefs: (entry) => (variant(entry) === "whisper" ? [sileroVadRef] : []),
  options: OnnxOptions,
  localFiles: true,
  defaultParallel: () => 1,
  support(entry) {
    return { whisper: whisperSupport, vlm: vlmSupport, rerank: encoderRerankSupport, embed: encoderEmbedSupport }[variant(entry)];
  },
  async create(entry) {
    switch (variant(entry)) {
      case "whisper": {
        const { OnnxWhisperEngine } = await import("./whisper-engine.ts");
        return new OnnxWhisperEngine(entry);
      }
      case "vlm": {
        const { OnnxVlmEngine } = await import("./onnx-vlm-engine.ts");
        return new OnnxVlmEngine(entry);
      }
      default: {
        const { OnnxEncoderEngine } = await import("./onnx-encoder-engine.ts");
        return new OnnxEncoderEngine(entry);
      }
    }
  },
};
