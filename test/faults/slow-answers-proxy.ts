// A loopback proxy in front of the emulator that holds chosen answers on their way back: the service has
// done the work (a poll has claimed an execution) but the client has not read the answer yet, which is
// the window a fault on the emulator itself (latency before handling) cannot open.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export class SlowAnswersProxy {
  readonly #target: URL;
  readonly #holdMs: number;
  readonly #hold: (method: string, path: string) => boolean;
  #server: Server | undefined;
  /** Answers the service has given that the proxy is still holding. */
  holding = 0;

  constructor(options: {
    /** The service (emulator) base URL. */
    target: string;
    /** How long a chosen answer is held, in ms. */
    holdMs: number;
    /** Which requests' answers to hold. */
    hold: (method: string, path: string) => boolean;
  }) {
    this.#target = new URL(options.target);
    this.#holdMs = options.holdMs;
    this.#hold = options.hold;
  }

  /** Starts on an ephemeral loopback port; resolves the URL clients use instead of the service's. */
  async listen(): Promise<string> {
    const server = createServer((incoming, outgoing) => {
      void this.#forward(incoming).then(
        (answer) => {
          if (outgoing.destroyed) return;
          outgoing.writeHead(answer.status, answer.headers);
          outgoing.end(answer.body);
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
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async #forward(incoming: IncomingMessage) {
    const answer = await forwardToService(this.#target, incoming);
    if (this.#hold(incoming.method ?? 'GET', incoming.url ?? '/')) {
      this.holding++;
      await new Promise((resolve) => setTimeout(resolve, this.#holdMs));
      this.holding--;
    }
    return answer;
  }
}

/** A service answer as a proxy passes it on: its status, its content type alone, and its whole body. */
export interface ForwardedAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Sends `incoming` on to `target` (the emulator) as it came, and reads the whole answer. */
export async function forwardToService(target: URL, incoming: IncomingMessage): Promise<ForwardedAnswer> {
  const chunks: Buffer[] = [];
  for await (const chunk of incoming as AsyncIterable<Buffer>) chunks.push(chunk);
  return await new Promise<ForwardedAnswer>((resolve, reject) => {
    const headers = { ...incoming.headers, host: target.host };
    const forwarded = httpRequest(
      target,
      { method: incoming.method, path: incoming.url, headers, agent: false },
      (response) => {
        const body: Buffer[] = [];
        response.on('data', (chunk: Buffer) => body.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          const { 'content-type': type } = response.headers;
          resolve({
            status: response.statusCode ?? 502,
            headers: type === undefined ? {} : { 'content-type': type },
            body: Buffer.concat(body),
          });
        });
      },
    );
    forwarded.on('error', reject);
    forwarded.end(Buffer.concat(chunks));
  });
}
