// Preloaded into every peer that harness/peers.ts starts. Its stdin is a pipe from the process that started it,
// which nobody writes to: it ends when that process does, however it ended. A peer of a test file the runner killed
// at its timeout would otherwise live on, holding the runner's stderr open, and the runner would wait for it forever.
process.stdin.on("end", () => process.exit(0)).resume();
