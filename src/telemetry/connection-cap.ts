// The cap on the HTTP server's open connections (DF_HTTP_MAX_CONNECTIONS), so that no number of clients can
// make the daemon's event loop serve more than that many requests at a time. A connection over the cap takes
// the place of one without a request in progress: first one that has had its answers and waits to send more
// (keep-alive: its client can reconnect), the longest-waiting first; failing that, the one that has taken
// longest to send its first request (silent, or headers trickling in). So no client that holds connections
// open can lock a prober out. Only when every connection has a request in progress is the newcomer closed,
// at once and unanswered: a capped server that queued it would hand its wait to the prober. Under a flood of
// reconnecting clients beyond the cap, a newcomer can still lose its place before its request is read, and it
// waits in the kernel's accept queue behind them first: the kubelet's probes have a port of their own for that
// (DF_HTTP_PROBE_PORT; see helm/README.md).
import type { Socket } from 'node:net';

export interface ConnectionFigures {
  open: number;
  /** Connections with a request in progress. */
  busy: number;
  /** Newcomers that took an idle connection's place (that connection was closed). */
  evicted: number;
  /** Newcomers closed at once because every connection was busy. */
  refused: number;
}

export class ConnectionCap {
  readonly #max: number;
  /** Connected, no request yet; Sets keep insertion order, so the first is the one waiting longest. */
  readonly #fresh = new Set<Socket>();
  /** Answered at least once, no request in progress. */
  readonly #answered = new Set<Socket>();
  readonly #busy = new Set<Socket>();
  #evicted = 0;
  #refused = 0;

  constructor(maxConnections: number) {
    this.#max = maxConnections;
  }

  /** Takes a new connection in, making room as the module's header says; false when it was closed instead. */
  admit(socket: Socket): boolean {
    if (this.#open() >= this.#max) {
      const victim = first(this.#answered) ?? first(this.#fresh);
      if (victim === undefined) {
        this.#refused++;
        closeAfterAccepting(socket);
        return false;
      }
      this.#forget(victim);
      this.#evicted++;
      closeAfterAccepting(victim);
    }
    this.#fresh.add(socket);
    socket.once('close', () => this.#forget(socket));
    return true;
  }

  /** A request's headers arrived on `socket`: it keeps its place until its answer is out. */
  requestStarted(socket: Socket): void {
    if (this.#fresh.delete(socket) || this.#answered.delete(socket)) this.#busy.add(socket);
  }

  /** The answer went out (or the request was abandoned): `socket` waits for its next request. */
  requestEnded(socket: Socket): void {
    if (this.#busy.delete(socket)) this.#answered.add(socket);
  }

  figures(): ConnectionFigures {
    return { open: this.#open(), busy: this.#busy.size, evicted: this.#evicted, refused: this.#refused };
  }

  #open(): number {
    return this.#fresh.size + this.#answered.size + this.#busy.size;
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

function first(sockets: Set<Socket>): Socket | undefined {
  for (const socket of sockets) return socket;
  return undefined;
}
