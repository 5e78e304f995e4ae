// How a bench client is driven: `count` is a number (one run of that many, printed as one JSON line, then the client
// exits) or `stdin` (a run for each line read from stdin, its numbers the run's arguments, each printed as a JSON
// line, until stdin closes: the client stays up and warm between a bench's runs, as the raw engines it is compared
// with do).
import { createInterface } from "node:readline";

export async function eachRun(count, run) {
  if (count !== "stdin") {
    console.log(JSON.stringify(await run(Number(count))));
    return;
  }
  for await (const line of createInterface({ input: process.stdin })) console.log(JSON.stringify(await run(...line.trim().split(/\s+/).map(Number))));
}
