// Entry file of every worker thread (ONNX inference, audio decoding) when the sources run through tsx; the compiled
// build starts at worker-main.js. Plain JS so it loads without hooks: it registers tsx itself before it imports the
// TypeScript entry, so a worker never depends on the parent's hooks reaching it (Node 20 did not pass them on;
// Node 22.2 and later do, whether the parent used --import tsx or register() as bin/modelgate.js does).
import { register } from "tsx/esm/api";

register();
await import("./worker-main.ts");
