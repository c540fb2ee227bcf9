// A loopback proxy in front of the emulator that sends chosen answers one byte at a time: their headers at
// once, then each byte after `gapMs`, every gap shorter than the client's silence limit, so only a deadline on
// the whole answer ends them. Other requests pass through untouched.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export class TrickleProxy {
  readonly #target: URL;
  readonly #gapMs: number;
  readonly #trickle: (method: string, path: string) => boolean;
  readonly #cutAfterBytes: number | undefined;
  readonly #timers = new Set<NodeJS.Timeout>();
  #server: Server | undefined;
  /** Answers being trickled now, and in all. */
  trickling = 0;
  trickled = 0;

  constructor(options: {
    target: string;
    gapMs: number;
    trickle: (method: string, path: string) => boolean;
    /** Instead of trickling: send this many bytes of the chosen answers at once, then cut the connection. */
    cutAfterBytes?: number;
  }) {
    this.#target = new URL(options.target);
    this.#gapMs = options.gapMs;
    this.#trickle = options.trickle;
    this.#cutAfterBytes = options.cutAfterBytes;
  }

  async listen(): Promise<string> {
    const server = createServer((incoming, outgoing) => {
      void this.#forward(incoming).then(
        (answer) => {
          if (outgoing.destroyed) return;
          const headers = {
            'content-type': answer.contentType,
            'content-length': String(answer.body.length),
          };
          outgoing.writeHead(answer.status, headers);
          if (!this.#trickle(incoming.method ?? 'GET', incoming.url ?? '/')) {
            outgoing.end(answer.body);
            return;
          }
          this.trickled++;
          if (this.#cutAfterBytes !== undefined) {
            outgoing.write(answer.body.subarray(0, this.#cutAfterBytes), () => outgoing.destroy());
            return;
          }
          this.trickling++;
          outgoing.flushHeaders();
          let sent = 0;
          const next = () => {
            if (outgoing.destroyed || sent >= answer.body.length) {
              this.trickling--;
              outgoing.end();
              return;
            }
            outgoing.write(answer.body.subarray(sent, ++sent));
            const timer = setTimeout(() => {
              this.#timers.delete(timer);
              next();
            }, this.#gapMs);
            this.#timers.add(timer);
          };
          next();
        },
        () => outgoing.destroy(),
      );
    });
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    for (const timer of this.#timers) clearTimeout(timer);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async #forward(incoming: IncomingMessage): Promise<{ status: number; contentType: string; body: Buffer }> {
    const chunks: Buffer[] = [];
    for await (const chunk of incoming as AsyncIterable<Buffer>) chunks.push(chunk);
    return await new Promise((resolve, reject) => {
      const headers = { ...incoming.headers, host: this.#target.host };
      const forwarded = httpRequest(
        this.#target,
        { method: incoming.method, path: incoming.url, headers, agent: false },
        (response) => {
          const body: Buffer[] = [];
          response.on('data', (chunk: Buffer) => body.push(chunk));
          response.on('error', reject);
          response.on('end', () =>
            resolve({
              status: response.statusCode ?? 502,
              contentType: response.headers['content-type'] ?? 'application/json',
              body: Buffer.concat(body),
            }),
          );
        },
      );
      forwarded.on('error', reject);
      forwarded.end(Buffer.concat(chunks));
    });
  }
}
