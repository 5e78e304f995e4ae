import type { Server } from "node:http";
export function startPacedUpstream(options?: { port?: number; durationMs?: number; jitter?: number }): Promise<{ server: Server; port: number }>;
