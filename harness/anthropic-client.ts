import Anthropic from "@anthropic-ai/sdk";
import type { TestServer } from "./server.ts";

/**
 * Anthropic's official client pointed at a test server (it sends the key as x-api-key); retries off unless asked for.
 * A module of its own, not a method of TestServer: the SDK is some 270 modules, which every test file would load.
 */
export function anthropicClient(srv: Pick<TestServer, "origin" | "dispatcher">, apiKey: string, options: { maxRetries?: number; timeout?: number } = {}): Anthropic {
  return new Anthropic({
    apiKey,
    baseURL: srv.origin,
    maxRetries: options.maxRetries ?? 0,
    timeout: options.timeout ?? 60_000,
    fetchOptions: { dispatcher: srv.dispatcher } as never,
  });
}
