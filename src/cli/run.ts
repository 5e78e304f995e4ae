import { main } from "./main.ts";

// Entry of the compiled build (dist/cli/run.js); bin/modelgate.js runs the same main() from source through tsx.
process.exitCode = await main(process.argv.slice(2));
