import { buildConfig, type ConfigOverrides } from "../src/config/load-config.ts";
import type { AppConfig } from "../src/config/app-config.ts";
import { builtInEngines } from "../src/engines/registry.ts";

/** The config loader as the CLI runs it: the built-in engine kinds validate each model's engine fields. */
export function testConfig(raw: unknown, file: string | null, overrides: ConfigOverrides = {}): AppConfig {
  return buildConfig(raw, file, builtInEngines(), overrides);
}
