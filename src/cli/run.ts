import { reexecServeWithMallocTunables } from "./malloc-tunables.ts";

// Entry of the compiled build (dist/cli/run.js); bin/modelgate.js runs the same main() from source through tsx.
reexecServeWithMallocTunables(process.argv.slice(2));
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
