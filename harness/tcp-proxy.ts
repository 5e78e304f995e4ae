import net from "node:net";

/**
 * A TCP proxy in front of a shared service (PostgreSQL, Redis) that a test can cut and restore, so outages are
 * simulated without stopping the services other tests use. `refuse` resets every connection at once (a stopped
 * server); `blackhole` accepts and never answers (a network partition).
 */
export class TcpProxy {
  private mode: "pass" | "refuse" | "blackhole" = "pass";
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
    if (this.onClientData) {
      const tap = this.onClientData;
      client.on("data", (chunk: Buffer) => tap(chunk, client));
    }
    client.pipe(upstream);
    upstream.pipe(client);
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

  restore(): void {
    this.mode = "pass";
  }

  async close(): Promise<void> {
    this.cut("refuse");
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
