import type { ModelRunner } from "../../src/scheduler/model-runner.ts";

/** A request held on a runner's slot: `running` once it holds it, `done` once released (or refused). */
export interface HeldRequest {
  running: Promise<void>;
  done: Promise<void>;
  release(): void;
}

/**
 * One request through the runner's public path (execute: prepare → admit → run → release) with no work of its own:
 * it takes a slot, or waits in the fair queue for one like any request, and keeps it until `release()`.
 */
export function holdSlot(runner: ModelRunner, queueKey: string, signal = new AbortController().signal): HeldRequest {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const done = runner.execute({
    queueKey,
    signal,
    prepare: () => null,
    run: () => {
      started();
      return gate;
    },
  });
  return { running, done, release };
}
