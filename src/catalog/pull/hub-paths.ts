import path from "node:path";
import { PlanError } from "./plan-error.ts";

/**
 * Why a file name from the hub (or a ref) cannot be written as given, or null when it can: it must be a relative
 * POSIX path of plain segments. A mirror is only a web server: a name like `onnx/model.onnx_data/../../../x` would
 * otherwise write anywhere the process may.
 */
export function unsafeNameReason(name: unknown): string | null {
  if (typeof name !== "string") return "is not a string";
  if (name.length === 0) return "is empty";
  if (name.includes("\\")) return "has a backslash";
  if (/[\u0000-\u001f\u007f]/.test(name)) return "has a control character";
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return "is absolute";
  if (name.split("/").some((segment) => segment === "" || segment === "." || segment === "..")) return "has an empty, '.' or '..' segment";
  return null;
}

/** Refuses a name that `unsafeNameReason` finds fault with; `what` says where it came from. */
export function checkName(name: string, what: string): string {
  const reason = unsafeNameReason(name);
  if (reason) throw new PlanError(`${what} ${JSON.stringify(name)} ${reason}: refusing to write it`);
  return name;
}

/** `target`, resolved, when it lies strictly inside `<dataDir>/models`; every path a pull writes goes through here. */
export function insideModels(dataDir: string, target: string): string {
  const root = path.resolve(dataDir, "models");
  const resolved = path.resolve(target);
  const relative = path.relative(root, resolved);
  if (relative === "" || relative === ".." || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative)) {
    throw new PlanError(`${resolved} is outside ${root}: refusing to write it`);
  }
  return resolved;
}
