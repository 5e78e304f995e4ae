import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

/** A server in its own process, started from a node script that prints `listening PORT` once it listens. */
export interface Peer {
  child: ChildProcess;
  port: number;
}

/** Ends a peer when its parent ends (harness/exit-with-parent.mjs). */
const exitWithParent = ["--import", path.join(import.meta.dirname, "exit-with-parent.mjs")];

/** Starts `script` (a path) with node and resolves once it prints the port it listens on; it ends when this process does. */
export function startListening(script: string, args: string[] = [], nodeArgs: string[] = []): Promise<Peer> {
  const child = spawn(process.execPath, [...exitWithParent, ...nodeArgs, script, ...args], { stdio: ["pipe", "pipe", "inherit"] });
  return new Promise((resolve) => {
    child.stdout!.setEncoding("utf8").once("data", (d: string) => resolve({ child, port: Number(/listening (\d+)/.exec(d)![1]) }));
  });
}

/** The canned OpenAI-style upstream (harness/canned-upstream.mjs), on `port` when given (a restart). */
export function startCanned(port?: number): Promise<Peer> {
  return startListening(path.join(import.meta.dirname, "canned-upstream.mjs"), port === undefined ? [] : [String(port)]);
}
