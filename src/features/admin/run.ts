import { lifecycleToAppError } from "../../keys/lifecycle.ts";

/** Runs an admin operation, its lifecycle and store failures turned into the §7 answers (404, 400, 503). */
export async function run<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw lifecycleToAppError(err);
  }
}
