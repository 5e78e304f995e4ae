// One phase of `npm test` (scripts/test.mjs starts it as `node --import tsx scripts/run-test-files.mjs REPORTER JOBS
// TIMES FILE...`): node:test's run() over the files in the order given, JOBS at a time, each file in a process of its
// own that inherits this one's `--import tsx`. Not `node --test`: the CLI sorts its files by name, so a long file
// named late (upstream-failover.test.ts) started near the end and ran on alone, the other core idle. The events go to
// Node's own reporter on stdout (REPORTER: spec or tap) and to test-file-times.mjs, whose lines go to TIMES.
import { createWriteStream } from "node:fs";
import { PassThrough } from "node:stream";
import { pipeline } from "node:stream/promises";
import { run } from "node:test";
import { spec, tap } from "node:test/reporters";
import fileTimes from "./test-file-times.mjs";

const [reporter, jobs, timesPath, ...files] = process.argv.slice(2);
// Stopped (scripts/test.mjs passes on SIGINT and SIGTERM): run() cancels the tests and ends the files' processes.
const stop = new AbortController();
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => stop.abort());
// The timeout holds each file (and each test that sets none of its own). Ten minutes: Claude Code's 11k-token prompt
// on stories260K (test/claude-code.test.ts) is about 70 s of CPU alone and took 295 s and then over 300 s among six
// files on a 2-core machine.
const events = run({ files, concurrency: Number(jobs), timeout: 600_000, signal: stop.signal });
const toStdout = new PassThrough({ objectMode: true });
const toTimes = new PassThrough({ objectMode: true });
events.on("data", (event) => {
  // As `node --test` does: any failed test fails the run, but a failing test marked todo.
  if (event.type === "test:fail" && !event.data.todo) process.exitCode = 1;
  toStdout.write(event);
  toTimes.write(event);
});
events.on("end", () => {
  toStdout.end();
  toTimes.end();
});
await Promise.all([
  pipeline(toStdout, reporter === "spec" ? new spec() : tap, process.stdout, { end: false }),
  pipeline(toTimes, fileTimes, createWriteStream(timesPath)),
]);
