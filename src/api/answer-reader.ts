// Reads one answer as undici hands it over (undici's dispatch handler interface), within the request's time
// limits, and knows how far the exchange got: a failure after the request left may have been acted on by the
// service, and a poll so cut short may have claimed an execution that no one will run.
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { AnswerWatch, LimitExpired, type AnswerLimits } from './answer-watch.ts';
import type { Answer } from './response.ts';

/** How far a request got: still being sent (connecting, writing), sent, or its answer's headers came. */
export type Exchange = 'sending' | 'sent' | 'answering';

export class AnswerReader implements Dispatcher.DispatchHandler {
  /** Settles with the whole answer or the first failure: undici's error, LimitExpired, or `abort`'s reason. */
  readonly answer: Promise<Answer>;
  readonly #watch: AnswerWatch;
  #exchange: Exchange = 'sending';
  #status: number | undefined;
  #headers: IncomingHttpHeaders = {};
  readonly #chunks: Buffer[] = [];
  #controller: Dispatcher.DispatchController | undefined;
  #abortReason: Error | undefined;
  #settled = false;
  #resolve!: (answer: Answer) => void;
  #reject!: (error: unknown) => void;

  constructor(limits: AnswerLimits) {
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

  /** Fails the answer with `reason` now and closes the connection (at once, or as soon as undici starts it). */
  abort(reason: Error): void {
    if (this.#settled) return;
    this.#fail(reason);
    if (this.#controller) this.#controller.abort(reason);
    else this.#abortReason = reason;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortReason) controller.abort(this.#abortReason);
  }

  onRequestSent(): void {
    this.#exchange = 'sent';
    this.#watch.sent();
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.#exchange = 'answering';
    this.#status = statusCode;
    this.#headers = headers;
    this.#watch.headers();
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#watch.chunk();
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#watch.stop();
    // TextDecoder drops a leading byte order mark, as undici's own text() does.
    const text = new TextDecoder().decode(Buffer.concat(this.#chunks));
    this.#resolve({ status: this.#status ?? 0, headers: this.#headers, text });
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    this.#fail(error);
  }

  #fail(error: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#watch.stop();
    this.#reject(error);
  }
}
