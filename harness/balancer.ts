import net from "node:net";

/**
 * The load balancer in front of the soak's replicas (bench/soak): TCP pass-through (the replicas share one certificate), a new
 * connection to the next replica in turn that is up. A replica that refuses a connection is out at once and the
 * connection tries the next one, so clients never see a killed replica; a connect probe every `probeMs` brings it
 * back. Connections already open to a replica that dies close with it (their requests fail: the client's to retry).
 */
export class Balancer {
  private readonly up: boolean[];
  private next = 0;
  private readonly sockets = new Set<net.Socket>();
  private readonly probe: NodeJS.Timeout;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    private readonly backends: number[],
    probeMs: number,
  ) {
    this.up = backends.map(() => true);
    this.probe = setInterval(() => this.probeAll(), probeMs);
  }

  static async start(backends: number[], probeMs = 500): Promise<Balancer> {
    let balancer!: Balancer;
    const server = net.createServer((client) => balancer.accept(client));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    balancer = new Balancer(server, (server.address() as net.AddressInfo).port, backends, probeMs);
    return balancer;
  }

  /** A replica restarted on another port. */
  replace(index: number, port: number): void {
    this.backends[index] = port;
    this.up[index] = true;
  }

  /** Which replicas take new connections now. */
  state(): boolean[] {
    return [...this.up];
  }

  private accept(client: net.Socket): void {
    this.track(client);
    client.on("error", () => client.destroy());
    client.pause();
    this.connect(client, this.backends.length);
  }

  private connect(client: net.Socket, triesLeft: number): void {
    const index = this.pick();
    if (index === null || triesLeft === 0) return void client.destroy();
    const backend = net.connect(this.backends[index]!, "127.0.0.1");
    this.track(backend);
    backend.once("connect", () => {
      backend.on("error", () => client.destroy());
      client.on("close", () => backend.destroy());
      // end, not destroy: what the replica sent last still reaches the client.
      backend.on("close", () => client.end());
      client.pipe(backend);
      backend.pipe(client);
      client.resume();
    });
    backend.once("error", (err) => {
      if (backend.connecting || (err as NodeJS.ErrnoException).code === "ECONNREFUSED") {
        this.up[index] = false;
        this.connect(client, triesLeft - 1);
      }
    });
  }

  private pick(): number | null {
    for (let i = 0; i < this.backends.length; i++) {
      const index = (this.next + i) % this.backends.length;
      if (this.up[index]) {
        this.next = index + 1;
        return index;
      }
    }
    return null;
  }

  private probeAll(): void {
    this.backends.forEach((port, index) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => ((this.up[index] = true), socket.destroy()));
      socket.once("error", () => ((this.up[index] = false), socket.destroy()));
    });
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
  }

  async close(): Promise<void> {
    clearInterval(this.probe);
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
