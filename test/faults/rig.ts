// What every fault scenario stands on: an emulator on loopback, a temp state folder, a handler module whose
// outputs are pure functions of their inputs and which logs each run to a file, the real `df-worker start`
// as a child process, and the tally of what the service finally received.
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { JsonObject } from '../../src/api/types.ts';
import { maxInWindow } from '../../src/budget/sliding-window.ts';
import {
  busiestWindow,
  Emulator,
  type EmulatedExecution,
  type EmulatorLimits,
} from '../../src/emulator/index.ts';
import type { JournalEntry } from '../../src/journal/journal.ts';
import { runCli, type CliProcess } from '../cli/process.ts';

export const TASK_KEY = 'digest';
/** DF_CONCURRENCY of the rig's daemons: while this many executions run, the daemon sends no poll. */
export const CONCURRENCY = 4;
const API_KEY = 'faults-test-key-5c1e';

/** The figures of one scenario, as the issue note's table shows them. */
export interface ScenarioFigures {
  /** Executions the service handed out (a poll claimed them). */
  claimed: number;
  /** Claimed executions the service received at least one report for. */
  reported: number;
  /** Reports beyond the first, summed over executions (each one a PATCH applied twice or more). */
  duplicated: number;
  /** Claimed executions without any report: their job would wait forever. */
  lost: number;
}

export interface Tally extends ScenarioFigures {
  /** Reports of workload executions whose status or output differ from what the input determines. */
  wrong: number;
  /** Executions never handed out (still pending on the service). */
  unclaimed: number;
}

export interface WorkloadInput extends JsonObject {
  text: string;
  n: number;
  /** How long the handler takes, in ms; it stops early when aborted. */
  delayMs: number;
}

/** What a correct run of the handler reports for `input`. */
export function expectedOutput(input: { text: string; n: number }): JsonObject {
  return { digest: createHash('sha256').update(input.text).digest('hex'), n: input.n * 2 };
}

/**
 * The handler module, written into the handlers folder. Each run appends the execution id to `runsFile`
 * before it works, so a rerun after a crash shows as a second line.
 */
export function workloadHandlerSource(runsFile: string): string {
  return `
import { appendFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { defineTask } from 'df-worker';

export default defineTask({
  key: ${JSON.stringify(TASK_KEY)},
  inputKeys: ['text', 'n'],
  outputKeys: ['digest', 'n'],
  handle: (input, ctx) => {
    appendFileSync(${JSON.stringify(runsFile)}, ctx.execution.id + '\\n');
    const output = {
      digest: createHash('sha256').update(String(input.text)).digest('hex'),
      n: Number(input.n) * 2,
    };
    const delayMs = Number(input.delayMs ?? 0);
    if (!(delayMs > 0)) return output;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(output), delayMs);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(new Error('aborted'));
      });
    });
  },
});
`;
}

/** One `df-worker start` child process. */
export class Daemon {
  readonly cli: CliProcess;
  /** Resolves once the process exited and its output streams closed (every log line is in). */
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Set when the test ended it on purpose; any other exit is a failure of the scenario. */
  endedOnPurpose = false;
  /** Set when a Supervisor watches it: its exits are the supervisor's to count and answer, not a failure. */
  supervised = false;

  constructor(cli: CliProcess) {
    this.cli = cli;
    this.closed = new Promise((resolve) =>
      cli.child.once('close', (code, signal) => resolve({ code, signal })),
    );
  }

  get running(): boolean {
    return this.cli.child.exitCode === null && this.cli.child.signalCode === null;
  }

  logs(): Record<string, unknown>[] {
    return this.cli.logs();
  }

  hasLog(message: string): boolean {
    return this.logs().some((line) => line.msg === message);
  }

  /** The health server's base URL, once the daemon logged it. */
  healthUrl(): string {
    const line = this.logs().find((l) => l.msg === 'serving /metrics, /healthz and /readyz');
    if (!line) throw new Error('the daemon has not started its health server yet');
    return line.url as string;
  }

  /** The probe port's base URL (DF_HTTP_PROBE_PORT set), from its start-up log line. */
  probeUrl(): string {
    const line = this.logs().find((l) => l.msg === 'serving /healthz and /readyz on the probe port');
    if (!line) throw new Error('the daemon has not started its probe port (DF_HTTP_PROBE_PORT) yet');
    return line.url as string;
  }

  /** kill -9: no drain, no flush, the journal is all that is left. */
  async kill(): Promise<void> {
    this.endedOnPurpose = true;
    this.cli.child.kill('SIGKILL');
    await this.closed;
  }

  /** SIGTERM, then waits for the exit; `elapsedMs` runs from the signal to the exit. */
  async terminate(): Promise<{ code: number | null; elapsedMs: number }> {
    this.endedOnPurpose = true;
    const sentAt = Date.now();
    this.cli.child.kill('SIGTERM');
    const { code } = await this.closed;
    return { code, elapsedMs: Date.now() - sentAt };
  }

  describeExit(): string {
    const tail = (text: string) => text.split('\n').slice(-15).join('\n');
    return `exit ${this.cli.child.exitCode ?? this.cli.child.signalCode}; stderr:\n${tail(this.cli.stderr())}\nstdout:\n${tail(this.cli.stdout())}`;
  }
}

export interface RigOptions {
  /** Seeds the emulator's fault PRNG. Default 1. */
  seed?: number;
  /** DF_* settings for every daemon of the rig, over the defaults below. */
  env?: Record<string, string>;
  /**
   * The emulator's per-key limits. Default 50 per second and 3,000 per minute (matched by the daemon's
   * budget in env()), well above what a scenario needs, so only faults slow it down.
   */
  limits?: Partial<EmulatorLimits>;
}

export class FaultRig {
  readonly emulator: Emulator;
  readonly dir: string;
  readonly stateDir: string;
  readonly journalDir: string;
  readonly runsFile: string;
  readonly #env: Record<string, string>;
  readonly #daemons: Daemon[] = [];
  readonly #expected = new Map<string, JsonObject>();
  #port = 0;
  /** The service's id of the workload task. */
  taskId = '';

  private constructor(emulator: Emulator, dir: string, env: Record<string, string>) {
    this.emulator = emulator;
    this.dir = dir;
    this.stateDir = join(dir, 'state');
    this.journalDir = join(this.stateDir, 'journal');
    this.runsFile = join(dir, 'runs.log');
    this.#env = env;
  }

  static async create(options: RigOptions = {}): Promise<FaultRig> {
    const emulator = new Emulator({
      apiKeys: [API_KEY],
      limits: options.limits ?? { perSecond: 50, perMinute: 3_000 },
      seed: options.seed ?? 1,
    });
    await emulator.listen();
    const dir = await mkdtemp(join(tmpdir(), 'df-worker-faults-'));
    const rig = new FaultRig(emulator, dir, options.env ?? {});
    rig.#port = Number(new URL(emulator.url).port);
    await mkdir(join(dir, 'handlers'), { recursive: true });
    await writeFile(join(dir, 'handlers', `${TASK_KEY}.ts`), workloadHandlerSource(rig.runsFile));
    await writeFile(rig.runsFile, '');
    rig.taskId = emulator.createTask({
      key: TASK_KEY,
      inputKeys: [
        { key: 'text', description: 'text to digest' },
        { key: 'n', description: 'number to double' },
      ],
      outputKeys: [
        { key: 'digest', description: 'SHA-256 of text, hex' },
        { key: 'n', description: 'n times 2' },
      ],
    }).id;
    return rig;
  }

  /** The API key the rig's daemons send (a scenario checks that it leaks nowhere). */
  get apiKey(): string {
    return API_KEY;
  }

  /** The emulator's base URL; stays the same across stopListening() and listenAgain(). */
  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      DF_API_URL: this.url,
      DF_API_KEY: API_KEY,
      DF_HANDLERS_DIR: join(this.dir, 'handlers'),
      DF_STATE_DIR: this.stateDir,
      DF_HTTP_PORT: '0',
      DF_HTTP_HOST: '127.0.0.1',
      DF_LOG_LEVEL: 'info',
      DF_CONCURRENCY: String(CONCURRENCY),
      DF_RETRY_BASE_MS: '20',
      DF_ERROR_BACKOFF_MAX_MS: '500',
      DF_BUDGET_PER_SECOND: '50',
      DF_BUDGET_PER_MINUTE: '3000',
      // The emulator stamps each arrival when its event loop gets to it: on a busy machine (the loaded suite) a
      // stall of the test's process stamps a batch late, closer together than they came. 100 ms covers that
      // here, as the default 200 ms covers a network's jitter (a restart draining a backlog reaches 47 of 50).
      DF_BUDGET_SAFETY_MARGIN_MS: '100',
      DF_SHUTDOWN_GRACE_MS: '5000',
      ...this.#env,
      ...extra,
    };
  }

  /** Queues `count` executions of the workload task; returns their ids in order. */
  enqueue(count: number, options: { delayMs?: number } = {}): string[] {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const n = this.#expected.size + 1;
      const input: WorkloadInput = { text: `item ${n}`, n, delayMs: options.delayMs ?? 0 };
      const execution = this.emulator.enqueueExecution(TASK_KEY, input);
      this.#expected.set(execution.id, expectedOutput(input));
      ids.push(execution.id);
    }
    return ids;
  }

  /** Adds a handler module next to the workload's (before a daemon starts). */
  async writeHandler(fileName: string, source: string): Promise<void> {
    await writeFile(join(this.dir, 'handlers', fileName), source);
  }

  /**
   * A second task served next to the workload: its handler module in the handlers folder and the task on
   * the service (retryCount 0: one attempt). Before a daemon starts; returns the service's task id.
   */
  async addTask(
    task: { key: string; inputKeys?: string[]; outputKeys?: string[] },
    source: string,
  ): Promise<string> {
    await this.writeHandler(`${task.key}.ts`, source);
    const keys = (names: string[] = []) => names.map((key) => ({ key, description: '' }));
    return this.emulator.createTask({
      key: task.key,
      inputKeys: keys(task.inputKeys),
      outputKeys: keys(task.outputKeys),
    }).id;
  }

  /**
   * Polls the task as a client would, so the service marks its next execution claimed, and returns the
   * answer as sent: a scenario then hands a garbled copy of it to the daemon through a fault rule.
   * In process, not over a socket: called right after the execution is queued, it claims it before any
   * request of the daemon's can be read (over HTTP, a poll of the daemon's could claim it first, and a
   * loaded machine saw that happen).
   */
  async claimOutOfBand(taskId: string): Promise<JsonObject> {
    const answer = await this.emulator.answer({
      method: 'GET',
      path: `/v1/data-factory/tasks/${encodeURIComponent(taskId)}/poll`,
      headers: { 'x-api-key': API_KEY },
    });
    if (answer?.status !== 200) throw new Error(`out-of-band poll of ${taskId} answered ${answer?.status}`);
    return JSON.parse(answer.body ?? '') as JsonObject;
  }

  /** Starts `df-worker start` on the rig's state folder. */
  start(extraEnv: Record<string, string> = {}): Daemon {
    const daemon = new Daemon(runCli(['start'], this.env(extraEnv)));
    this.#daemons.push(daemon);
    return daemon;
  }

  /**
   * Waits until `condition` holds; fails at once if a daemon exited when the scenario did not end it (a
   * supervised daemon's exit is its supervisor's business).
   */
  async waitFor(
    condition: () => boolean | Promise<boolean>,
    what: string,
    timeoutMs = 15_000,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await condition()) return;
      const crashed = this.#daemons.find((d) => !d.endedOnPurpose && !d.supervised && !d.running);
      if (crashed) throw new Error(`a daemon exited while waiting for ${what}: ${crashed.describeExit()}`);
      if (Date.now() > deadline) {
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}; the service holds ${JSON.stringify(this.tally())}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /**
   * Waits until `condition` holds or `timeoutMs` passed; true when it held. For scenarios that must return
   * their figures whatever the daemon does (it may hang or die: that is what they measure), never throws.
   */
  async waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await condition()) return true;
      if (Date.now() > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Waits for the daemon's 'df-worker started' log line. */
  async started(daemon: Daemon): Promise<void> {
    await this.waitFor(() => daemon.hasLog('df-worker started'), 'the daemon to start');
  }

  /** The service goes away: the listener closes and every open connection is cut (requests in flight are lost). */
  async stopListening(): Promise<void> {
    await this.emulator.close();
  }

  /** The service is back on the same port, with the state it had. */
  async listenAgain(): Promise<void> {
    await this.emulator.listen(this.#port);
  }

  /** The output a correct run reports for a workload execution; undefined for any other execution. */
  expectedOutputOf(id: string): JsonObject | undefined {
    return this.#expected.get(id);
  }

  execution(id: string): EmulatedExecution | undefined {
    return this.emulator.executions().find((e) => e.id === id);
  }

  reportsOf(id: string): EmulatedExecution['reports'] {
    return this.execution(id)?.reports ?? [];
  }

  tally(): Tally {
    const tally: Tally = { claimed: 0, reported: 0, duplicated: 0, lost: 0, wrong: 0, unclaimed: 0 };
    for (const execution of this.emulator.executions()) {
      if (execution.claimedAt === undefined && execution.reports.length === 0) {
        tally.unclaimed++;
        continue;
      }
      tally.claimed++;
      if (execution.reports.length === 0) tally.lost++;
      else tally.reported++;
      tally.duplicated += Math.max(0, execution.reports.length - 1);
      const expected = this.#expected.get(execution.id);
      if (expected === undefined) continue;
      for (const report of execution.reports) {
        if (report.status !== 'COMPLETED' || !isDeepStrictEqual(report.output, expected)) tally.wrong++;
      }
    }
    return tally;
  }

  /** How many times the handler started, per execution id (from the handler's own run log). */
  async runs(): Promise<Map<string, number>> {
    const runs = new Map<string, number>();
    for (const id of (await readFile(this.runsFile, 'utf8')).split('\n')) {
      if (id !== '') runs.set(id, (runs.get(id) ?? 0) + 1);
    }
    return runs;
  }

  /** The records in state/journal, read from disk (files being written or unreadable are skipped). */
  async journalRecords(): Promise<JournalEntry[]> {
    let names: string[];
    try {
      names = await readdir(this.journalDir);
    } catch {
      return [];
    }
    const records: JournalEntry[] = [];
    for (const name of names.filter((n) => n.endsWith('.json') && !n.startsWith('.'))) {
      try {
        records.push(JSON.parse(await readFile(join(this.journalDir, name), 'utf8')) as JournalEntry);
      } catch {
        // Removed or replaced between readdir and readFile: it is no longer a record to look at.
      }
    }
    return records;
  }

  /** Every entry of state/journal (records, temp files, sub-folders). */
  async journalFolderEntries(): Promise<string[]> {
    try {
      return (await readdir(this.journalDir)).sort();
    } catch {
      return [];
    }
  }

  async close(): Promise<void> {
    for (const daemon of this.#daemons) {
      if (daemon.running) await daemon.kill();
    }
    await this.emulator.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Runs `scenario` on a fresh rig and always tears the rig down (children killed, folders removed). */
export async function withRig<T>(options: RigOptions, scenario: (rig: FaultRig) => Promise<T>): Promise<T> {
  const rig = await FaultRig.create(options);
  try {
    return await scenario(rig);
  } finally {
    await rig.close();
  }
}

/** How the key's budget was spent, as the service counted it: 429s, the busiest second and minute. */
export interface BudgetFigures {
  rateLimited: number;
  /** The fewest the busiest second can have held, given the emulator's blind spells (busiestWindow). */
  maxPerSecond: number;
  maxPerMinute: number;
  requests: number;
  /** The busiest second of the stamps alone: above maxPerSecond when a stall stamped a batch at once. */
  stampedMaxPerSecond?: number;
}

export function budgetFigures(rig: FaultRig): BudgetFigures {
  const requests = rig.emulator.requests();
  return {
    rateLimited: requests.filter((r) => r.rateLimited).length,
    maxPerSecond: busiestWindow(requests, 1_000),
    maxPerMinute: busiestWindow(requests, 60_000),
    stampedMaxPerSecond: maxInWindow(
      requests.map((r) => r.at),
      1_000,
    ),
    requests: requests.length,
  };
}

/** The figures alone, for the report table. */
export function figuresOf(tally: Tally): ScenarioFigures {
  const { claimed, reported, duplicated, lost } = tally;
  return { claimed, reported, duplicated, lost };
}

/** Resolves after `ms`: only for the length of an injected fault (an outage), never to let work finish. */
export function faultWindow(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
