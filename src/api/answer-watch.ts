// The time limits of one request: the deadline until the answer starts, the wait for its headers, the
// silence allowed between body chunks, and the deadline of the whole answer. Each is checked only after one turn of the event loop for I/O.
//
// Why the turn: after the loop was blocked (a handler stuck in synchronous code), Node runs the timers that
// fell due before it reads the sockets. A limit acting at once would cut an answer whose bytes arrived in
// time and wait in the socket; for a poll that answer is an execution the service has just claimed for us.
// setImmediate runs after the poll phase, so by then the answer that was waiting has been read. (The connect
// limit, which the AnswerReader keeps, yields the same way.)
import type { TimeoutPhase } from './errors.ts';

export interface AnswerLimits {
  /** From sending the request (connecting included) to the answer's headers, in ms. */
  requestTimeoutMs: number;
  /** From the request fully written to the answer's headers, in ms. */
  headersTimeoutMs: number;
  /** Longest silence between the headers and body chunks, in ms. */
  bodyTimeoutMs: number;
  /**
   * From sending the request to the body's last byte, in ms, however the bytes are spaced: an answer that
   * trickles (each gap under `bodyTimeoutMs`) would otherwise hold its caller for ever.
   */
  answerTimeoutMs: number;
}

/** The reason a watched request was cut: the limit named by `phase` passed with nothing arriving. */
export class LimitExpired extends Error {
  override name = 'LimitExpired';
  readonly phase: TimeoutPhase;

  constructor(phase: TimeoutPhase) {
    super(`the ${phase} time limit passed`);
    this.phase = phase;
  }
}

/**
 * Watches one request. Tell it each step (`sent`, `headers`, `chunk`) and `stop` it once the answer is read or
 * failed; `expire` is called at most once, with the limit that passed.
 */
export class AnswerWatch {
  readonly #limits: AnswerLimits;
  readonly #expire: (phase: TimeoutPhase) => void;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #checks = new Set<NodeJS.Immediate>();
  #progress: 'sending' | 'sent' | 'answering' = 'sending';
  /** Steps so far (sent, headers, each chunk): a limit that sees it change during its turn was the loop's delay. */
  #steps = 0;
  #body: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(limits: AnswerLimits, expire: (phase: TimeoutPhase) => void) {
    this.#limits = limits;
    this.#expire = expire;
    this.#arm(limits.requestTimeoutMs, (movedDuringTurn) => {
      if (this.#progress === 'sending') return 'request';
      // A request written during the turn itself was held up by the loop, not by the service: its wait for
      // an answer is left to headersTimeoutMs, which started when it left.
      if (this.#progress === 'sent' && !movedDuringTurn) return 'request';
      return undefined;
    });
    // Whatever the answer has done by then, it is over; one that ended during the turn was stopped first.
    this.#arm(limits.answerTimeoutMs, () => 'answer');
  }

  /** The request is fully written: the service may act on it from now on. */
  sent(): void {
    this.#progress = 'sent';
    this.#steps++;
    this.#arm(this.#limits.headersTimeoutMs, () => (this.#progress === 'sent' ? 'headers' : undefined));
  }

  /** The status line and headers arrived: the body is now governed by its silence limit alone. */
  headers(): void {
    this.#progress = 'answering';
    this.#steps++;
    this.#body = this.#arm(this.#limits.bodyTimeoutMs, (movedDuringTurn) =>
      movedDuringTurn ? undefined : 'body',
    );
  }

  chunk(): void {
    this.#steps++;
    // A timer that fired and is waiting for its turn sees the new chunk; refresh re-arms it either way.
    this.#body?.refresh();
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    for (const check of this.#checks) clearImmediate(check);
    this.#timers.clear();
    this.#checks.clear();
  }

  /**
   * A timer whose `verdict`, asked after a turn for I/O (told whether any step came during it), names the limit
   * that passed, or undefined if none did.
   */
  #arm(
    ms: number,
    verdict: (movedDuringTurn: boolean) => TimeoutPhase | undefined,
  ): NodeJS.Timeout | undefined {
    // The socket may still report a step of a request that was already cut: nothing is left to watch.
    if (this.#stopped) return undefined;
    const timer = setTimeout(() => {
      const stepsWhenDue = this.#steps;
      const check = setImmediate(() => {
        this.#checks.delete(check);
        if (this.#stopped) return;
        const phase = verdict(this.#steps !== stepsWhenDue);
        if (phase === undefined) return;
        this.stop();
        this.#expire(phase);
      });
      this.#checks.add(check);
    }, ms);
    // The socket keeps the process alive while a request runs; a timer alone must not.
    timer.unref();
    this.#timers.add(timer);
    return timer;
  }
}
