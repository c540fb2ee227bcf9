// Reads one answer from a node:http request, within the request's time limits, and knows how far the exchange
// got: a failure after the request left may have been acted on by the service, and a poll so cut short may have
// claimed an execution that no one will run.
import type { ClientRequest, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { AnswerWatch, LimitExpired, type AnswerLimits } from './answer-watch.ts';
import type { Answer } from './response.ts';

/** How far a request got: still being sent (connecting, writing), sent, or its answer's headers came. */
export type Exchange = 'sending' | 'sent' | 'answering';

export interface ReaderLimits extends AnswerLimits {
  /** From the socket's creation to its connection, in ms; a reused keep-alive socket is already connected. */
  connectTimeoutMs: number;
}

export class AnswerReader {
  /** Settles with the whole answer or the first failure: the socket's error, LimitExpired, or `abort`'s reason. */
  readonly answer: Promise<Answer>;
  readonly #limits: ReaderLimits;
  readonly #watch: AnswerWatch;
  #exchange: Exchange = 'sending';
  #status: number | undefined;
  #headers: IncomingHttpHeaders = {};
  readonly #chunks: Buffer[] = [];
  #request: ClientRequest | undefined;
  #connectTimer: NodeJS.Timeout | undefined;
  #settled = false;
  #resolve!: (answer: Answer) => void;
  #reject!: (error: unknown) => void;

  constructor(limits: ReaderLimits) {
    this.#limits = limits;
    this.#watch = new AnswerWatch(limits, (phase) => this.abort(new LimitExpired(phase)));
    this.answer = new Promise<Answer>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  get exchange(): Exchange {
    return this.#exchange;
  }

  /** The answer's status once its headers came. */
  get status(): number | undefined {
    return this.#status;
  }

  /** The body's first bytes received so far, at most `maxBytes`, as text; undefined before any came. */
  received(maxBytes: number): string | undefined {
    if (this.#chunks.length === 0) return undefined;
    const bytes = Buffer.concat(this.#chunks);
    return new TextDecoder().decode(bytes.subarray(0, maxBytes));
  }

  /** Follows `request` (already ended) to its answer; `onSent` is told once it is written to its socket. */
  read(request: ClientRequest, onSent?: () => void): void {
    this.#request = request;
    if (this.#settled) {
      request.destroy();
      return;
    }
    request.once('socket', (socket) => this.#onSocket(socket));
    request.once('finish', () => {
      if (this.#exchange !== 'sending') return;
      this.#exchange = 'sent';
      this.#watch.sent();
      onSent?.();
    });
    request.once('response', (response) => this.#onResponse(response));
    request.on('error', (error) => this.#fail(error));
  }

  /** Fails the answer with `reason` now and closes the connection. */
  abort(reason: Error): void {
    if (this.#settled) return;
    this.#fail(reason);
    this.#request?.destroy();
  }

  #onSocket(socket: Socket): void {
    if (!socket.connecting) return;
    // Like the answer's limits, checked after a turn for I/O: a connection made while the loop was held counts.
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (socket.connecting) this.abort(new LimitExpired('connect'));
      });
    }, this.#limits.connectTimeoutMs);
    timer.unref();
    this.#connectTimer = timer;
    socket.once('connect', () => clearTimeout(timer));
  }

  #onResponse(response: IncomingMessage): void {
    this.#exchange = 'answering';
    this.#status = response.statusCode;
    this.#headers = response.headers;
    this.#watch.headers();
    response.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      this.#watch.chunk();
    });
    response.once('end', () => this.#end());
    response.on('error', (error) => this.#fail(error));
  }

  #end(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#stop();
    // TextDecoder drops a leading byte order mark.
    const text = new TextDecoder().decode(Buffer.concat(this.#chunks));
    this.#resolve({ status: this.#status ?? 0, headers: this.#headers, text });
  }

  #fail(error: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#stop();
    this.#reject(error);
  }

  #stop(): void {
    this.#watch.stop();
    clearTimeout(this.#connectTimer);
  }
}
