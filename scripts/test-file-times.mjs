// A node:test reporter for scripts/test.mjs: the seconds each file's top-level tests took, as JSON lines
// `{"file":…,"seconds":…}` (module loading and start-up not included), so a run can name its slowest files.
export default async function* fileTimes(source) {
  const seconds = new Map();
  for await (const event of source) {
    if ((event.type !== "test:pass" && event.type !== "test:fail") || event.data.nesting !== 0 || !event.data.file) continue;
    seconds.set(event.data.file, (seconds.get(event.data.file) ?? 0) + (event.data.details.duration_ms ?? 0) / 1000);
  }
  for (const [file, s] of seconds) yield `${JSON.stringify({ file, seconds: Math.round(s * 10) / 10 })}\n`;
}
