// Issue 26, items 4 and 5: damaged and lost state. Each scenario runs the real `df-worker start` against the
// emulator at the key's real limits (5/s, 50/min) and returns what the service saw; state-damage.test.ts
// asserts on it and bench:faults can print it (STATE_DAMAGE_SCENARIOS).
import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JsonObject } from '../../src/api/types.ts';
import {
  budgetFigures,
  faultWindow,
  figuresOf,
  withRig,
  type BudgetFigures,
  type Daemon,
  type FaultRig,
  type ScenarioFigures,
  type Tally,
} from './rig.ts';

/** The key's limits, on the emulator and in the daemon's budget alike. */
export const LIMITS = { perSecond: 5, perMinute: 50 };
const BUDGET_ENV = {
  DF_BUDGET_PER_SECOND: String(LIMITS.perSecond),
  DF_BUDGET_PER_MINUTE: String(LIMITS.perMinute),
  // The emulator stamps arrivals in the test process, which a loaded machine schedules late by a few hundred
  // ms: the rig's 25 ms margin would let that jitter put a sixth request in the emulator's second.
  DF_BUDGET_SAFETY_MARGIN_MS: '500',
};

export interface StateDamageResult {
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
}

function results(rig: FaultRig): StateDamageResult {
  const tally = rig.tally();
  return { figures: figuresOf(tally), tally, budget: budgetFigures(rig) };
}

const logged = (daemon: Daemon, start: string) =>
  daemon.logs().find((line) => typeof line.msg === 'string' && line.msg.startsWith(start));

// Row 1 ─────────────────────────────────────────────────────────────────────────────────────────────────

export interface DamagedRecordsResult extends StateDamageResult {
  /** Per damaged record (truncated, garbage, wrong types, checksum mismatch, already completed): reports. */
  reportsOf: Record<string, number>;
  /** GETs of executions the daemon sent, 503s included. */
  fetches: number;
  /** What state/journal holds after the drain (records left, and the corrupt/ folder). */
  journalAfter: string[];
  /** Files kept in journal/corrupt/ for inspection. */
  keptForInspection: number;
  daemonAlive: boolean;
}

/** A record as df-worker writes it, with the checksum of its content (see src/journal/records.ts). */
function recordText(entry: JsonObject, checksum?: string): string {
  const sum = checksum ?? createHash('sha256').update(JSON.stringify(entry)).digest('hex');
  return `${JSON.stringify({ ...entry, checksum: sum }, null, 2)}\n`;
}

/**
 * Five executions claimed (out of band) whose journal records are damaged on disk before the daemon starts:
 * truncated, garbage bytes, wrong types, a checksum that no longer matches an edited input, and one whose
 * execution the service already holds COMPLETED; plus a damaged file named for an id the service does not
 * know. The service answers the first two GETs 503. Three fresh executions are queued beside them.
 */
export function damagedRecords(): Promise<DamagedRecordsResult> {
  return withRig({ limits: LIMITS, env: BUDGET_ENV }, async (rig) => {
    const ids = rig.enqueue(5);
    const claimed: JsonObject[] = [];
    for (let i = 0; i < ids.length; i++) {
      claimed.push(await rig.claimOutOfBand(rig.taskId));
      // Out-of-band requests count in the key's windows too: kept under its 5 a second.
      await faultWindow(250);
    }
    const [truncated, garbage, wrongTypes, edited, completed] = ids as [
      string,
      string,
      string,
      string,
      string,
    ];
    const answer = await rig.emulator.answer({
      method: 'PATCH',
      path: `/v1/data-factory/task-executions/${completed}`,
      headers: { 'x-api-key': rig.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ id: completed, status: 'COMPLETED', output: rig.expectedOutputOf(completed) }),
    });
    if (answer?.status !== 200) throw new Error(`out-of-band report answered ${answer?.status}`);

    const entryOf = (execution: JsonObject): JsonObject => ({
      executionId: execution.id,
      taskId: rig.taskId,
      taskKey: 'digest',
      input: execution.input,
      claimedAt: new Date().toISOString(),
      phase: 'claimed',
      reportAttempts: 0,
      starts: 1,
      version: 1,
    });
    await mkdir(rig.journalDir, { recursive: true });
    const file = (id: string) => join(rig.journalDir, `${id}.json`);
    const whole = recordText(entryOf(claimed[0]!));
    await writeFile(file(truncated), whole.slice(0, Math.floor(whole.length / 2)));
    await writeFile(file(garbage), Buffer.from([0x00, 0xff, 0x13, 0x37, 0x7b, 0x22, 0xfe]));
    await writeFile(
      file(wrongTypes),
      JSON.stringify({ ...entryOf(claimed[2]!), input: 'text', reportAttempts: 'two' }),
    );
    // Edited after it was written: parses and has the right shape, but the checksum gives it away.
    const original = entryOf(claimed[3]!);
    const tampered = { ...original, input: { ...(original.input as JsonObject), n: 1_000 } };
    const originalSum = createHash('sha256').update(JSON.stringify(original)).digest('hex');
    await writeFile(file(edited), recordText(tampered, originalSum));
    await writeFile(file(completed), '{"executionId": "');
    await writeFile(file('ex-unknown-to-the-service'), 'not json');
    // As the run that wrote those records would have left it: its requests counted, its last sends kept.
    const sentAt = rig.emulator.requests().map((r) => r.at);
    const monthKey = new Date().toISOString().slice(0, 7);
    await writeFile(
      join(rig.stateDir, 'budget.json'),
      `${JSON.stringify({ monthKey, used: sentAt.length, sentAt })}\n`,
    );
    rig.emulator.setFaults([{ operation: 'executions.get', kind: 'status', status: 503, count: 2 }]);
    // The out-of-band requests' second has passed before the daemon's first request.
    await faultWindow(1_100);

    const fresh = rig.enqueue(3);
    const daemon = rig.start();
    const owed = [truncated, garbage, wrongTypes, edited, ...fresh];
    await rig.waitFor(
      () => owed.every((id) => rig.reportsOf(id).length > 0),
      'every damaged record and every fresh execution reported',
      25_000,
    );
    // Settled records leave the journal: wait for the last removal before reading the folder.
    await rig.waitFor(
      async () => (await rig.journalFolderEntries()).every((name) => name === 'corrupt'),
      'the journal emptied',
    );
    const daemonAlive = daemon.running;
    await daemon.terminate();
    const corrupt = await readdir(join(rig.journalDir, 'corrupt')).catch(() => []);
    const reportsOf = Object.fromEntries(
      Object.entries({ truncated, garbage, wrongTypes, edited, completed }).map(([name, id]) => [
        name,
        rig.reportsOf(id).length,
      ]),
    );
    return {
      ...results(rig),
      reportsOf,
      fetches: rig.emulator.requests().filter((r) => r.operation === 'executions.get').length,
      journalAfter: await rig.journalFolderEntries(),
      keptForInspection: corrupt.length,
      daemonAlive,
    };
  });
}

// Row 2 ─────────────────────────────────────────────────────────────────────────────────────────────────

export interface LostBudgetFileResult extends StateDamageResult {
  /** Requests the first daemon sent before its stop. */
  requestsBeforeRestart: number;
  /** The restarted daemon's warning about the budget file, if it gave one. */
  warning: string | undefined;
  /** From the restart to its first request, in ms. */
  firstRequestAfterMs: number;
  daemonAlive: boolean;
}

/**
 * A daemon spends most of the minute's 50 requests on a backlog and is stopped; budget.json is deleted (or
 * replaced by `replacement`) and the daemon restarted on the same state folder, the backlog's rest waiting.
 */
export function lostBudgetFile(replacement?: (monthKey: string) => string): Promise<LostBudgetFileResult> {
  return withRig({ limits: LIMITS, env: BUDGET_ENV }, async (rig) => {
    const ids = rig.enqueue(24);
    const first = rig.start();
    // Its start first, on a wait of its own: at the suite's start, beside four forks starting theirs, a process
    // start took most of the 15 s that 40 requests at 5 a second (8 s) are given.
    await rig.started(first);
    await rig.waitFor(() => rig.emulator.requests().length >= 40, 'the first daemon to spend 40 requests');
    const stopped = await first.terminate();
    if (stopped.code !== 0)
      throw new Error(`the first daemon exited ${stopped.code}: ${first.describeExit()}`);
    const requestsBeforeRestart = rig.emulator.requests().length;
    const budgetFile = join(rig.stateDir, 'budget.json');
    await unlink(budgetFile);
    if (replacement) await writeFile(budgetFile, replacement(new Date().toISOString().slice(0, 7)));

    const restartedAt = Date.now();
    const second = rig.start();
    await rig.waitFor(
      () => ids.every((id) => rig.reportsOf(id).length > 0),
      'every execution reported after the restart',
      100_000,
    );
    const firstAfter = rig.emulator.requests().find((r) => r.at >= restartedAt);
    const daemonAlive = second.running;
    const warning = logged(second, `${budgetFile} `)?.msg as string | undefined;
    await second.terminate();
    return {
      ...results(rig),
      requestsBeforeRestart,
      warning,
      firstRequestAfterMs: firstAfter ? firstAfter.at - restartedAt : Infinity,
      daemonAlive,
    };
  });
}

// Row 3 ─────────────────────────────────────────────────────────────────────────────────────────────────

export interface VanishedLockResult extends StateDamageResult {
  /** The first daemon's exit code, or undefined when it was still running at the end. */
  firstExitCode: number | null | undefined;
  /** The first daemon's log line saying why it stopped. */
  firstReason: string | undefined;
  /** From the deletion to that log line, in ms (undefined when it never came). */
  noticedAfterMs: number | undefined;
  /** Polls the first daemon sent after it said it stopped claiming. */
  firstPollsAfterNotice: number;
  secondAlive: boolean;
}

/**
 * The state folder is deleted under a daemon running a backlog (400 ms handlers), and a second daemon is
 * started on the same folder: the first must notice, stop claiming and exit non-zero; the second takes over.
 */
export function vanishedLock(): Promise<VanishedLockResult> {
  return withRig({ limits: LIMITS, env: BUDGET_ENV }, async (rig) => {
    const ids = rig.enqueue(12, { delayMs: 400 });
    const first = rig.start();
    await rig.waitFor(() => rig.tally().reported >= 4, 'the first daemon to report 4 executions');
    // Its exit is what the scenario expects: not a failure of the wait below.
    first.endedOnPurpose = true;
    const deletedAt = Date.now();
    // The daemon may write into it while it goes (a heartbeat, a record): rm retries a folder that refilled.
    await rm(rig.stateDir, { recursive: true, force: true, maxRetries: 5 });
    const lostLine = 'df-worker lost its state folder';
    // The second daemon starts once the first noticed and left its hand-over budget.json: one started before
    // (a loaded machine can delay the notice past 3 s) is the window the guarantees name as not covered.
    await rig.waitFor(() => logged(first, lostLine) !== undefined, 'the first daemon to notice', 15_000);
    await rig.waitFor(
      () => existsSync(join(rig.stateDir, 'budget.json')),
      'the hand-over budget.json',
      15_000,
    );
    const line = logged(first, lostLine);
    const noticedAt = line ? Date.parse(String(line.time)) : undefined;
    const secondStartedAt = Date.now();
    const second = rig.start();
    await rig.waitFor(
      () => ids.every((id) => rig.reportsOf(id).length > 0),
      'every execution reported by one daemon or the other',
      25_000,
    );
    await rig.waitUntil(() => !first.running, 10_000);
    const secondAlive = second.running;
    const firstExitCode = first.running ? undefined : first.cli.child.exitCode;
    await second.terminate();
    // Until the second daemon starts, every poll is the first one's.
    const pollsAfter = rig.emulator
      .requests()
      .filter(
        (r) => r.operation === 'tasks.poll' && r.at > (noticedAt ?? deletedAt) && r.at < secondStartedAt,
      ).length;
    return {
      ...results(rig),
      firstExitCode,
      firstReason: line?.reason as string | undefined,
      noticedAfterMs: noticedAt === undefined || Number.isNaN(noticedAt) ? undefined : noticedAt - deletedAt,
      firstPollsAfterNotice: pollsAfter,
      secondAlive,
    };
  });
}

export interface StateDamageScenario {
  name: string;
  run: () => Promise<StateDamageResult & { detail: string }>;
}

/** Issue 26's rows, for bench:faults. */
export const STATE_DAMAGE_SCENARIOS: StateDamageScenario[] = [
  {
    name: '26.4 journal records damaged on disk',
    run: async () => {
      const r = await damagedRecords();
      return {
        ...r,
        detail: `reports per damaged record ${JSON.stringify(r.reportsOf)}; ${r.fetches} GETs (2 answered 503); ${r.keptForInspection} files kept in journal/corrupt/`,
      };
    },
  },
  {
    name: '26.5 budget.json deleted before a restart',
    run: async () => {
      const r = await lostBudgetFile();
      return {
        ...r,
        detail: `${r.requestsBeforeRestart} requests before the restart; first request ${r.firstRequestAfterMs} ms after it; ${r.budget.rateLimited} × 429, busiest second ${r.budget.maxPerSecond}, minute ${r.budget.maxPerMinute}`,
      };
    },
  },
  {
    name: '26.5 budget.json counting 0 this month, restart',
    run: async () => {
      const r = await lostBudgetFile((month) => `{"monthKey":"${month}","used":0,"sentAt":[]}\n`);
      return {
        ...r,
        detail: `first request ${r.firstRequestAfterMs} ms after the restart; ${r.budget.rateLimited} × 429, busiest second ${r.budget.maxPerSecond}, minute ${r.budget.maxPerMinute}`,
      };
    },
  },
  {
    name: '26.5 state folder deleted, a second daemon started',
    run: async () => {
      const r = await vanishedLock();
      return {
        ...r,
        detail: `first daemon exit ${r.firstExitCode ?? 'none (still running)'}, noticed after ${r.noticedAfterMs ?? '-'} ms; ${r.budget.rateLimited} × 429, busiest second ${r.budget.maxPerSecond}, minute ${r.budget.maxPerMinute}`,
      };
    },
  },
];
