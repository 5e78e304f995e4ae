import type { FastifyBaseLogger } from "fastify";
import { ConfigError } from "../config/config-error.ts";
import { portOf } from "../engines/capabilities.ts";
import type { ModelRunner } from "../scheduler/model-runner.ts";
import type { ModelRoute } from "./model-route.ts";

/** What the probe embeds: one short word, so the check costs each target a few tokens once. */
const probe = { inputs: ["dimension"] };
/** How long a target may take to answer the probe (an upstream that hangs must not hold the start for long). */
const probeTimeoutMs = 30_000;

/**
 * An embeddings route must give vectors of one length whichever target serves it (issue 45), and a model's length
 * is only known once it is loaded (a GGUF's or an ONNX layout's, or what an upstream answers). So, after the eager
 * models load, each loaded target of an embeddings route embeds one word, through its runner like any request, and
 * lengths that differ are a ConfigError naming the route and each target's length. A target that is not loaded
 * (lazy, failed, missing) or cannot answer (an upstream down) is not checked: a warning names it.
 */
export async function checkRouteDimensions(routes: readonly ModelRoute[], find: (id: string) => ModelRunner | undefined, log: FastifyBaseLogger): Promise<void> {
  for (const route of routes) {
    if (!route.config.capabilities.includes("embeddings")) continue;
    const lengths: { model: string; length: number }[] = [];
    for (const model of new Set([...route.config.targets.map((t) => t.model), ...route.config.fallbacks])) {
      const runner = find(model);
      if (runner?.state !== "ready") {
        log.warn({ route: route.id, model }, "route: an embeddings target is not loaded, so its vector length was not checked");
        continue;
      }
      try {
        lengths.push({ model, length: await vectorLength(runner) });
      } catch (err) {
        log.warn({ route: route.id, model, err }, "route: an embeddings target could not embed the probe, so its vector length was not checked");
      }
    }
    if (new Set(lengths.map((l) => l.length)).size > 1) {
      const each = lengths.map((l) => `${l.model}: ${l.length}`).join(", ");
      throw new ConfigError(`route "${route.id}": its embeddings targets give vectors of different lengths (${each}); an embeddings route needs targets of one length`);
    }
  }
}

async function vectorLength(runner: ModelRunner): Promise<number> {
  const signal = AbortSignal.timeout(probeTimeoutMs);
  const result = await runner.execute({
    queueKey: "route-check",
    signal,
    prepare: (engine) => portOf(engine, "embeddings").prepareEmbed(probe),
    run: (engine, prepared) => portOf(engine, "embeddings").embed(probe, prepared, signal),
  });
  return result.vectors[0].length;
}
