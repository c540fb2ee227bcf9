// The cap on the HTTP server's open connections (DF_HTTP_MAX_CONNECTIONS), so that no number of clients can
// make the daemon's event loop serve more than that many requests at a time. A connection over the cap takes
// the place of one without a request in progress: first one that has had its answers and waits to send more
// (keep-alive: its client can reconnect), the longest-waiting first; failing that, the one that has taken
// longest to send its first request (silent, or headers trickling in), once it has had a grace to send it. So
// no client that holds connections open can lock a prober out, and a newcomer let in is not put out again
// before its request is read. When no connection can give way, the newcomer waits, unread, in a line (first
// come, first in) for one that can, for the headers timeout at most: a client that waits sends nothing, where
// one closed at once reconnects at once (under a flood, as fast as the loop can accept). Only past the line's
// length is a newcomer closed at once. A flood's connections still wait in the kernel's accept queue ahead of
// a new one: the kubelet's probes have a port of their own for that (DF_HTTP_PROBE_PORT; see helm/README.md).
import type { Socket } from 'node:net';

export interface ConnectionFigures {
  open: number;
  /** Connections with a request in progress. */
  busy: number;
  /** Newcomers waiting in the line now. */
  waiting: number;
  /** Newcomers that took an idle connection's place (that connection was closed). */
  evicted: number;
  /** Newcomers closed at once because every connection was busy and the line was full. */
  refused: number;
}

export interface ConnectionCapOptions {
  /** How long a newcomer may wait in the line before it is closed, in ms. */
  waitMs: number;
  /** How long a connection let in may take to send its first request before a newcomer may take its place. */
  graceMs?: number;
  /** Newcomers the line holds at most. */
  lineLength?: number;
}

/** Enough for a first request's bytes, already sent, to be read once the connection is let in. */
const GRACE_MS = 200;
const LINE_LENGTH = 1_024;

export class ConnectionCap {
  readonly #max: number;
  readonly #waitMs: number;
  readonly #graceMs: number;
  readonly #lineLength: number;
  /** Connected, no request yet, with when each was let in; Maps keep insertion order: the first waited longest. */
  readonly #fresh = new Map<Socket, number>();
  /** Answered at least once, no request in progress. */
  readonly #answered = new Set<Socket>();
  readonly #busy = new Set<Socket>();
  /** Waiting, unread, to be let in; each with the timer that closes it when its wait is over. */
  readonly #line = new Map<Socket, NodeJS.Timeout>();
  /** Looks again once the oldest fresh connection's grace is over, while newcomers wait. */
  #recheck: NodeJS.Timeout | undefined;
  #evicted = 0;
  #refused = 0;

  constructor(maxConnections: number, options: ConnectionCapOptions) {
    this.#max = maxConnections;
    this.#waitMs = options.waitMs;
    this.#graceMs = options.graceMs ?? GRACE_MS;
    this.#lineLength = options.lineLength ?? LINE_LENGTH;
  }

  /** Takes a new connection in, or into the line, as the module's header says; false when it was not let in. */
  admit(socket: Socket): boolean {
    socket.once('close', () => this.#closed(socket));
    if (this.#line.size === 0 && this.#makeRoom()) {
      this.#letIn(socket);
      return true;
    }
    if (this.#line.size >= this.#lineLength) {
      this.#refused++;
      closeAfterAccepting(socket);
      return false;
    }
    // On the next tick: node:http resumes a connection it has just taken on (a resume already queued when
    // 'connection' is emitted), which would undo a pause made now. Unless it was let in meanwhile.
    process.nextTick(() => {
      if (this.#line.has(socket)) socket.pause();
    });
    const timer = setTimeout(() => socket.destroy(), this.#waitMs);
    timer.unref();
    this.#line.set(socket, timer);
    this.#admitFromLine();
    return false;
  }

  /** A request's headers arrived on `socket`: it keeps its place until its answer is out. */
  requestStarted(socket: Socket): void {
    if (this.#fresh.delete(socket) || this.#answered.delete(socket)) this.#busy.add(socket);
  }

  /** The answer went out (or the request was abandoned): `socket` waits for its next request. */
  requestEnded(socket: Socket): void {
    if (this.#busy.delete(socket)) this.#answered.add(socket);
    this.#admitFromLine();
  }

  figures(): ConnectionFigures {
    return {
      open: this.#open(),
      busy: this.#busy.size,
      waiting: this.#line.size,
      evicted: this.#evicted,
      refused: this.#refused,
    };
  }

  /** Stops the line's timers (the server is closing; its connections are being closed). */
  stop(): void {
    clearTimeout(this.#recheck);
    for (const timer of this.#line.values()) clearTimeout(timer);
  }

  #open(): number {
    return this.#fresh.size + this.#answered.size + this.#busy.size;
  }

  #letIn(socket: Socket): void {
    this.#fresh.set(socket, performance.now());
  }

  /** Whether a connection may come in: under the cap, or once one that could give way was closed for it. */
  #makeRoom(): boolean {
    if (this.#open() < this.#max) return true;
    const victim = first(this.#answered) ?? this.#freshPastGrace();
    if (victim === undefined) return false;
    this.#forget(victim);
    this.#evicted++;
    closeAfterAccepting(victim);
    return true;
  }

  #freshPastGrace(): Socket | undefined {
    for (const [socket, since] of this.#fresh) {
      // The first is the oldest: if its grace is not over, no other's is.
      return performance.now() - since >= this.#graceMs ? socket : undefined;
    }
    return undefined;
  }

  #admitFromLine(): void {
    for (const [socket, timer] of this.#line) {
      if (!this.#makeRoom()) break;
      clearTimeout(timer);
      this.#line.delete(socket);
      this.#letIn(socket);
      socket.resume();
    }
    this.#armRecheck();
  }

  /** While newcomers wait on fresh connections only, looks again when the oldest one's grace is over. */
  #armRecheck(): void {
    if (this.#recheck !== undefined || this.#line.size === 0) return;
    const oldest = first(this.#fresh.values());
    if (oldest === undefined) return;
    const inMs = Math.max(1, this.#graceMs - (performance.now() - oldest));
    this.#recheck = setTimeout(() => {
      this.#recheck = undefined;
      this.#admitFromLine();
    }, inMs);
    this.#recheck.unref();
  }

  #closed(socket: Socket): void {
    const timer = this.#line.get(socket);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.#line.delete(socket);
      return;
    }
    this.#forget(socket);
    this.#admitFromLine();
  }

  #forget(socket: Socket): void {
    this.#fresh.delete(socket);
    this.#answered.delete(socket);
    this.#busy.delete(socket);
  }
}

/**
 * Closes `socket` once libuv's accept loop has returned. Closed within it, a flooding client reconnects at
 * once, the loop accepts that connection too, closes another for it, and so on: the event loop stalled for
 * over a second under 500 clients.
 */
function closeAfterAccepting(socket: Socket): void {
  socket.pause();
  setImmediate(() => socket.destroy());
}

function first<T>(items: Iterable<T>): T | undefined {
  for (const item of items) return item;
  return undefined;
}
