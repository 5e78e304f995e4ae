import { isStoreBusy, isStoreUnreachable } from "../../store/store-health.ts";
import { AppError } from "../../errors/app-error.ts";
import { LifecycleError } from "../../keys/lifecycle.ts";

function toAppError(err: unknown): unknown {
  if (isStoreUnreachable(err)) return new AppError("overloaded", { message: "The database is unreachable; retry shortly.", retryAfterMs: 2000 });
  if (isStoreBusy(err)) return new AppError("overloaded", { message: "The database is busy; retry shortly.", retryAfterMs: 1000 });
  if (!(err instanceof LifecycleError)) return err;
  if (err.code === "not_found") return new AppError("model_not_found", { param: err.param, message: err.message });
  return new AppError("invalid_parameter", { param: err.param, message: err.message });
}

/** Runs an admin operation, its lifecycle and store failures turned into the §7 answers (404, 400, 503). */
export async function run<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toAppError(err);
  }
}
