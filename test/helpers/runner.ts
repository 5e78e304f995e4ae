import type { ModelRunner } from "../../src/scheduler/model-runner.ts";
import type { Priority } from "../../src/scheduler/runner-types.ts";

/** A request held on a runner's slot: `running` once it holds it, `done` once released (or refused). */
export interface HeldRequest {
  running: Promise<void>;
  done: Promise<void>;
  release(): void;
}

/**
 * One request through the runner's public path (execute: prepare → admit → run → release) with no work of its own:
 * it takes a slot, or waits in the fair queue for one like any request, and keeps it until `release()`. Its account
 * is `queueKey`; its priority is interactive unless given.
 */
export function holdSlot(runner: ModelRunner, queueKey: string, options: { signal?: AbortSignal; priority?: Priority } = {}): HeldRequest {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const done = runner.execute({
    queueKey,
    priority: options.priority,
    signal: options.signal ?? new AbortController().signal,
    prepare: () => null,
    run: () => {
      started();
      return gate;
    },
  });
  return { running, done, release };
}
