/** A config that cannot run: the message names the file and the setting's path; serve and the CLI refuse to start. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
