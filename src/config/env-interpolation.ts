/**
 * Replaces `${NAME}` in every string of a parsed config with the environment variable NAME, so secrets (an
 * upstream's apiKey, the admin token) stay out of the file; `$${` writes a literal `${`. An unset variable is an
 * error naming it and where it is used: a missing secret must stop the start, not be sent as an empty string.
 */
export function interpolateEnv(value: unknown, env: NodeJS.ProcessEnv, onMissing: (name: string, where: string) => Error, where = ""): unknown {
  if (typeof value === "string") {
    return value.replace(/\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, escaped: string, name: string) => {
      if (escaped) return whole.slice(1);
      const found = env[name];
      if (found === undefined) throw onMissing(name, where || "(root)");
      return found;
    });
  }
  if (Array.isArray(value)) return value.map((item, i) => interpolateEnv(item, env, onMissing, `${where}[${i}]`));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, interpolateEnv(item, env, onMissing, where ? `${where}.${key}` : key)]));
  }
  return value;
}
