import net from "node:net";

/** A service's port when its URL names none. */
const defaultPorts: Record<string, number> = { "postgres:": 5432, "postgresql:": 5432, "redis:": 6379 };

/**
 * A TCP proxy in front of a shared service (PostgreSQL, Redis) that a test can cut, restore or slow down, so outages
 * are simulated without stopping or reconfiguring the services other tests use. `refuse` resets every connection at
 * once (a stopped server); `blackhole` accepts and never answers (a network partition); `delay` holds what the
 * clients send for a while before passing it on (a slow service: every command answers that much later).
 */
export class TcpProxy {
  private mode: "pass" | "refuse" | "blackhole" = "pass";
  private delayMs = 0;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    private readonly onClientData: ((chunk: Buffer, connection: object) => void) | null,
  ) {}

  /** `onClientData` sees every byte the clients send to the service (per connection, in order). */
  static async start(targetHost: string, targetPort: number, options: { onClientData?: (chunk: Buffer, connection: object) => void } = {}): Promise<TcpProxy> {
    let proxy!: TcpProxy;
    const server = net.createServer((client) => proxy.accept(client, targetHost, targetPort));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    proxy = new TcpProxy(server, (server.address() as net.AddressInfo).port, options.onClientData ?? null);
    return proxy;
  }

  /** A proxy in front of the service a URL names (`postgres://…`, `redis://…`), and the same URL through it. */
  static async inFrontOf(url: string, options: { onClientData?: (chunk: Buffer, connection: object) => void } = {}): Promise<{ proxy: TcpProxy; url: string }> {
    const target = new URL(url);
    const proxy = await TcpProxy.start(target.hostname, Number(target.port || defaultPorts[target.protocol]), options);
    const through = new URL(url);
    through.hostname = "127.0.0.1";
    through.port = String(proxy.port);
    return { proxy, url: through.toString() };
  }

  private accept(client: net.Socket, host: string, port: number): void {
    if (this.mode === "refuse") {
      client.resetAndDestroy();
      return;
    }
    this.track(client);
    client.on("error", () => client.destroy());
    if (this.mode === "blackhole") return;
    const upstream = net.connect(port, host);
    this.track(upstream);
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    const tap = this.onClientData;
    const forward = this.delayed(upstream);
    client.on("data", (chunk: Buffer) => {
      tap?.(chunk, client);
      forward(chunk);
    });
    upstream.pipe(client);
  }

  /** Writes to `to` after the proxy's delay at the time each chunk arrived, in the order they arrived. */
  private delayed(to: net.Socket): (chunk: Buffer) => void {
    const queue: { at: number; chunk: Buffer }[] = [];
    let timer: NodeJS.Timeout | null = null;
    const drain = () => {
      timer = null;
      while (queue.length > 0 && queue[0].at <= performance.now()) {
        const { chunk } = queue.shift()!;
        if (!to.destroyed) to.write(chunk);
      }
      if (queue.length > 0) timer = setTimeout(drain, queue[0].at - performance.now());
    };
    return (chunk) => {
      if (this.delayMs === 0 && queue.length === 0) {
        to.write(chunk);
        return;
      }
      // Never before a chunk that came earlier, whatever the delay was then.
      queue.push({ at: Math.max(performance.now() + this.delayMs, queue.at(-1)?.at ?? 0), chunk });
      timer ??= setTimeout(drain, queue[0].at - performance.now());
    };
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
  }

  /** Drops every open connection and treats new ones per `mode` until `restore`. */
  cut(mode: "refuse" | "blackhole"): void {
    this.mode = mode;
    for (const socket of this.sockets) socket.resetAndDestroy();
  }

  /** Holds every chunk a client sends for `ms` before it goes on (0: at once again); connections stay open. */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  restore(): void {
    this.mode = "pass";
    this.delayMs = 0;
  }

  async close(): Promise<void> {
    this.cut("refuse");
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
