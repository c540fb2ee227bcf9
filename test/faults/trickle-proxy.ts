// A loopback proxy in front of the emulator that sends chosen answers one byte at a time: their headers at
// once, then each byte after `gapMs`, every gap shorter than the client's silence limit, so only a deadline on
// the whole answer ends them. Other requests pass through untouched.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { forwardToService } from './slow-answers-proxy.ts';

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
      void forwardToService(this.#target, incoming).then(
        (answer) => {
          if (outgoing.destroyed) return;
          const headers = { ...answer.headers, 'content-length': String(answer.body.length) };
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
}
