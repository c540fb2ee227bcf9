// A loopback TCP proxy in front of redis-server, to cut one replica from Redis as a network partition does:
// while cut, nothing passes either way (bytes wait, as TCP retransmits them), and new connections wait too;
// healed, what waited is delivered and traffic flows again.
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

interface Pipe {
  client: Socket;
  upstream: Socket;
  /** Bytes held while cut, each with the socket it goes to, in order. */
  held: { to: Socket; data: Buffer }[];
}

export class TcpProxy {
  readonly #targetPort: number;
  readonly #pipes = new Set<Pipe>();
  #server: Server | undefined;
  #cut = false;

  constructor(targetPort: number) {
    this.#targetPort = targetPort;
  }

  /** Listens on a free loopback port; returns it. */
  async listen(): Promise<number> {
    const server = createServer((client) => {
      const upstream = createConnection({ host: '127.0.0.1', port: this.#targetPort });
      const pipe: Pipe = { client, upstream, held: [] };
      this.#pipes.add(pipe);
      const forward = (to: Socket) => (data: Buffer) => {
        if (this.#cut) pipe.held.push({ to, data });
        else to.write(data);
      };
      client.on('data', forward(upstream));
      upstream.on('data', forward(client));
      const close = () => {
        this.#pipes.delete(pipe);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    });
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  /** Stops every byte both ways until `heal`. */
  cut(): void {
    this.#cut = true;
  }

  heal(): void {
    this.#cut = false;
    for (const pipe of this.#pipes) {
      for (const { to, data } of pipe.held) to.write(data);
      pipe.held = [];
    }
  }

  async close(): Promise<void> {
    for (const { client, upstream } of this.#pipes) {
      client.destroy();
      upstream.destroy();
    }
    this.#pipes.clear();
    const server = this.#server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
