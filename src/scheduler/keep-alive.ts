/** A model's keep-alive: the countdown that unloads it after `keepAliveMs` without work (never, with null). */
export class KeepAlive {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly keepAliveMs: number | null,
    private readonly expire: () => void,
  ) {}

  /** Starts the countdown afresh: the model is loaded and idle. */
  restart(): void {
    this.stop();
    if (this.keepAliveMs === null) return;
    this.timer = setTimeout(this.expire, this.keepAliveMs);
    this.timer.unref();
  }

  /** Work started, or the model is going away. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
