// What a process supervisor (systemd Restart=always, a Kubernetes container restart) does for the daemon of
// a fault scenario: starts `df-worker start`, starts it again at once whenever it exits without being asked
// to, up to a bound, and counts those exits. A scenario measures whether the daemon needed it.
import type { Daemon, FaultRig } from './rig.ts';

export interface SupervisorOptions {
  /** Restarts after unexpected exits before giving up (the daemon then stays down). */
  maxRestarts: number;
  /** DF_* settings of every daemon it starts, over the rig's. */
  env?: Record<string, string>;
}

export interface UnexpectedExit {
  /** Wall-clock ms of the exit. */
  at: number;
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface StopResult {
  /** Exit code, or null when the daemon had to be killed (or ended on a signal). */
  code: number | null;
  /** From SIGTERM to the exit. */
  elapsedMs: number;
  /** SIGTERM did not end it within the bound: kill -9 did. */
  killed: boolean;
}

export class Supervisor {
  readonly #rig: FaultRig;
  readonly #options: SupervisorOptions;
  readonly daemons: Daemon[] = [];
  readonly unexpectedExits: UnexpectedExit[] = [];
  restarts = 0;
  /** True once an unexpected exit found no restart left. */
  gaveUp = false;
  #stopping = false;

  constructor(rig: FaultRig, options: SupervisorOptions) {
    this.#rig = rig;
    this.#options = options;
  }

  /** The daemon started last (running, or the one that exited last). */
  get current(): Daemon {
    const daemon = this.daemons.at(-1);
    if (!daemon) throw new Error('the supervisor has not started a daemon yet');
    return daemon;
  }

  start(extraEnv: Record<string, string> = {}): Daemon {
    const daemon = this.#rig.start({ ...this.#options.env, ...extraEnv });
    daemon.supervised = true;
    this.daemons.push(daemon);
    // 'exit', not 'close': a child the daemon left behind may hold its output pipes open.
    void daemon.cli.exited.then(({ code, signal }) => this.#exited(daemon, code, signal));
    return daemon;
  }

  #exited(daemon: Daemon, code: number | null, signal: NodeJS.Signals | null): void {
    if (daemon.endedOnPurpose || this.#stopping || daemon !== this.current) return;
    this.unexpectedExits.push({ at: Date.now(), code, signal });
    if (this.restarts >= this.#options.maxRestarts) {
      this.gaveUp = true;
      return;
    }
    this.restarts++;
    this.start();
  }

  /** kill -9 of the running daemon and a restart at once, as an operator or a node failure would (not counted). */
  async killAndRestart(): Promise<Daemon> {
    const daemon = this.current;
    daemon.endedOnPurpose = true;
    daemon.cli.child.kill('SIGKILL');
    await daemon.cli.exited;
    return this.start();
  }

  /**
   * True when a daemon is running and answers GET /healthz within `timeoutMs`, whatever the status: a 503
   * only reports a stall of the event loop since the last probe, which it has recovered from if it answers.
   * A daemon whose event loop is still blocked is running but does not answer: it counts as down, as a
   * liveness probe would count it.
   */
  async responsive(timeoutMs = 1_000): Promise<boolean> {
    const daemon = this.daemons.at(-1);
    if (!daemon?.running) return false;
    const listening = await this.#rig.waitUntil(
      () => daemon.hasLog('serving /metrics, /healthz and /readyz'),
      timeoutMs,
    );
    if (!listening) return false;
    try {
      const answer = await fetch(`${daemon.healthUrl()}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
      await answer.body?.cancel();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Stops the running daemon without restarting it: SIGTERM, kill -9 when it has not exited after `boundMs`
   * (a daemon whose event loop is blocked never runs its signal handler). Undefined when none was running.
   * A later start() supervises again.
   */
  async stop(boundMs: number): Promise<StopResult | undefined> {
    this.#stopping = true;
    try {
      return await this.#stop(boundMs);
    } finally {
      this.#stopping = false;
    }
  }

  async #stop(boundMs: number): Promise<StopResult | undefined> {
    const daemon = this.daemons.at(-1);
    if (!daemon?.running) return undefined;
    daemon.endedOnPurpose = true;
    const sentAt = Date.now();
    daemon.cli.child.kill('SIGTERM');
    const exited = await Promise.race([
      daemon.cli.exited.then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), boundMs)),
    ]);
    if (!exited) daemon.cli.child.kill('SIGKILL');
    const { code } = await daemon.cli.exited;
    const elapsedMs = Date.now() - sentAt;
    // Every log line is in once the output pipes close; a child left behind may hold them, so not forever.
    await Promise.race([daemon.closed, new Promise((resolve) => setTimeout(resolve, 2_000))]);
    return { code: exited ? code : null, elapsedMs, killed: !exited };
  }
}
