import type { FastifyBaseLogger } from "fastify";
import type { ModelEntry } from "../config/app-config.ts";
import type { Capability } from "../config/config.schema.ts";
import type { Engine } from "../engines/engine.ts";
import { AppError } from "../errors/app-error.ts";
import { ModelRunner, type RunnerStats } from "../scheduler/model-runner.ts";

export type EngineFactory = (entry: ModelEntry) => Promise<Engine>;

/** The models this node serves, each with its runner. */
export class ModelCatalog {
  private readonly runners = new Map<string, ModelRunner>();
  readonly created = Math.floor(Date.now() / 1000);

  constructor(
    entries: ModelEntry[],
    private readonly createEngine: EngineFactory,
    private readonly log: FastifyBaseLogger,
  ) {
    for (const entry of entries) this.runners.set(entry.id, new ModelRunner(entry, createEngine, log));
  }

  list(): ModelRunner[] {
    return [...this.runners.values()];
  }

  find(id: string): ModelRunner | undefined {
    return this.runners.get(id);
  }

  /** The runner for `id`, or 404 model_not_found with param "model". */
  get(id: string): ModelRunner {
    const runner = this.runners.get(id);
    if (!runner) throw new AppError("model_not_found", { param: "model", message: `The model '${id}' does not exist.` });
    return runner;
  }

  /**
   * Checks that the model can do what the endpoint needs (400 invalid_parameter, param "model"),
   * naming what the model can do instead.
   */
  requireCapability(runner: ModelRunner, needed: Capability, what: string): void {
    if (runner.entry.capabilities.includes(needed)) return;
    throw new AppError("invalid_parameter", {
      param: "model",
      message: `The model '${runner.entry.id}' does not support ${what}; it supports: ${runner.entry.capabilities.join(", ")}.`,
    });
  }

  /** Loads every eager model; resolves when each is ready, failed or missing. */
  async loadEager(): Promise<void> {
    await Promise.all(this.list().filter((r) => r.entry.load === "eager").map((r) => r.load()));
    for (const runner of this.list()) {
      if (runner.state === "missing") {
        this.log.warn(
          { model: runner.entry.id, path: runner.entry.path },
          `model ${runner.entry.id} is missing; run: modelgate pull ${runner.entry.hubRef ?? runner.entry.source}`,
        );
      }
    }
  }

  /** Ready means every eager model that has its files is loaded. */
  ready(): boolean {
    return this.list().every((r) => r.entry.load !== "eager" || r.state === "ready");
  }

  stats(): RunnerStats[] {
    return this.list().map((r) => r.stats());
  }

  async unloadAll(): Promise<void> {
    await Promise.all(this.list().map((r) => r.unload()));
  }
}
