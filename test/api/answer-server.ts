// A loopback server that answers on its own schedule in a worker thread, so an answer can arrive while the
// test blocks its own event loop: the situation of a daemon whose handler holds the loop when a poll's
// answer comes back.
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

/** How the server answers every request. */
export interface AnswerScript {
  status: number;
  body: string;
  /** From the request's arrival to the status line and headers, in ms; 'drop' closes the connection instead. */
  headersAfterMs: number | 'drop';
  /**
   * From the headers to the second half of the body, in ms (0: all at once with the headers); 'never' leaves the
   * body half sent; 'drop' closes the connection after the first half.
   */
  bodyAfterMs: number | 'never' | 'drop';
}

export type ThreadMessage =
  { type: 'listening'; port: number } | { type: 'received'; method: string; path: string };

export class AnswerServer {
  readonly #thread: Worker;
  readonly #arrivals: ThreadMessage[] = [];
  #url = '';

  constructor(script: AnswerScript) {
    this.#thread = new Worker(new URL('./answer-server-thread.ts', import.meta.url), { workerData: script });
    this.#thread.on('message', (message: ThreadMessage) => {
      if (message.type === 'received') this.#arrivals.push(message);
    });
  }

  /** Resolves the server's base URL once it listens on 127.0.0.1. */
  async listen(): Promise<string> {
    for (;;) {
      const [message] = (await once(this.#thread, 'message')) as [ThreadMessage];
      if (message.type === 'listening') {
        this.#url = `http://127.0.0.1:${message.port}`;
        return this.#url;
      }
    }
  }

  /** Resolves once a request has fully arrived at the server (it answers on its schedule from then on). */
  async received(): Promise<{ method: string; path: string }> {
    for (;;) {
      const arrived = this.#arrivals.shift();
      if (arrived?.type === 'received') return arrived;
      await once(this.#thread, 'message');
    }
  }

  async close(): Promise<void> {
    await this.#thread.terminate();
  }
}

/** Holds the event loop as a handler stuck in synchronous code does: no timer, no socket read meanwhile. */
export function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy: nothing else on this thread runs.
  }
}
