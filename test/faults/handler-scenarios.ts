// Issue 9's fault rows (scenarios 10 to 17): a handler misbehaves next to a healthy task, against the real
// `df-worker start` under a supervisor and the emulator on loopback. Each scenario returns its figures
// whatever the daemon does (hangs, dies, leaks); the tests assert the goals on them and
// bench/faults-report.ts prints them with and without handler isolation.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { busiestWindow } from '../../src/emulator/index.ts';
import {
  FLUSH_BOUND_MS,
  POLL_INTERVAL_MS,
  WARMUP_MS,
  withHandlerFaults,
  type ExecutionFate,
  type HandlerFaultOptions,
  type HandlerFaultResult,
  type IsolationMode,
} from './handler-rig.ts';
import {
  cpuBlockTask,
  hungTask,
  ignoresSignalTask,
  keyLeakTask,
  lateErrorsTask,
  memoryHogTask,
  processExitTask,
} from './handler-sources.ts';
import { CONCURRENCY, faultWindow } from './rig.ts';
import type { StopResult } from './supervisor.ts';

/** DF_MAX_CRASHES_PER_EXECUTION's default (issue 9): deaths of a run before the execution is failed. */
export const MAX_CRASHES_PER_EXECUTION = 3;

// 10 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface CpuBlockResult extends HandlerFaultResult {
  blockMs: number;
  timeoutMs: number;
  serviceLatencyMs: number;
  blocking: ExecutionFate;
}

/**
 * A handler blocks its thread for `blockMs` with a synchronous loop (declared timeoutMs: blockMs / 6) while
 * every service answer takes 300 ms. The figures are a 30 s block with the default request timeout
 * (30 s, headers and body 15 s); the suite scales the block and the API timeouts down together (6 s, 6 s,
 * 3 s), so requests in flight when the block starts outlive their timeouts just the same.
 */
export function cpuBlockInHandler(
  options: HandlerFaultOptions & { blockMs?: number } = {},
): Promise<CpuBlockResult> {
  const blockMs = options.blockMs ?? 6_000;
  const timeoutMs = Math.round(blockMs / 6);
  const serviceLatencyMs = 300;
  const setup = {
    ...options,
    faulty: (rig: { runsFile: string }) => [cpuBlockTask(rig.runsFile, timeoutMs)],
    env: {
      DF_API_REQUEST_TIMEOUT_MS: String(blockMs),
      DF_API_HEADERS_TIMEOUT_MS: String(blockMs / 2),
      DF_API_BODY_TIMEOUT_MS: String(blockMs / 2),
    },
  };
  return withHandlerFaults(setup, async (h) => {
    h.rig.emulator.setFaults([{ operation: '*', kind: 'latency', ms: serviceLatencyMs }]);
    await h.start();
    // Polls go one at a time and each takes 300 ms: a healthy execution a second keeps them unsaturated.
    h.startSteadyWork({ everyMs: 1_000 });
    await faultWindow(WARMUP_MS);
    const blocking = h.enqueueFaulty('cpu-block', { blockMs });
    await h.rig.waitUntil(() => h.claimed(blocking), 10_000);
    await faultWindow(blockMs + 3_000);
    h.stopSteadyWork();
    const responsive = await h.supervisor.responsive();
    await h.settle(10_000);
    await h.stop(responsive);
    return {
      ...h.result({ responsive, normalPickupMs: POLL_INTERVAL_MS + 2 * serviceLatencyMs }),
      blockMs,
      timeoutMs,
      serviceLatencyMs,
      blocking: await h.fate(blocking),
    };
  });
}

// 11 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface HungHandlerResult extends HandlerFaultResult {
  timeoutMs: number;
  hung: ExecutionFate;
}

/** A handler that never yields (an infinite synchronous loop), past its declared timeoutMs of 1 s. */
export function hungHandler(
  options: HandlerFaultOptions & { observeMs?: number } = {},
): Promise<HungHandlerResult> {
  const timeoutMs = 1_000;
  const setup = { ...options, faulty: (rig: { runsFile: string }) => [hungTask(rig.runsFile, timeoutMs)] };
  return withHandlerFaults(setup, async (h) => {
    await h.start();
    h.startSteadyWork();
    await faultWindow(WARMUP_MS);
    const hung = h.enqueueFaulty('hang');
    await h.rig.waitUntil(() => h.claimed(hung), 10_000);
    await faultWindow(options.observeMs ?? 5_000);
    const responsive = await h.wrapUp();
    return { ...h.result({ responsive }), timeoutMs, hung: await h.fate(hung) };
  });
}

// 12 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface MemoryHogResult extends HandlerFaultResult {
  memoryMb: number;
  hog: ExecutionFate;
  healthy: ExecutionFate[];
}

/**
 * A handler allocates until its heap limit, DF_HANDLER_MEMORY_MB=64. The daemon's own heap is capped at
 * 256 MB (NODE_OPTIONS, as a container's memory limit would cap it), so without isolation the whole
 * process dies soon, as it would in production; the scenario restarts it like a supervisor, at most 5 times.
 */
export function memoryHogHandler(options: HandlerFaultOptions = {}): Promise<MemoryHogResult> {
  const memoryMb = 64;
  const setup = {
    ...options,
    faulty: (rig: { runsFile: string }) => [memoryHogTask(rig.runsFile)],
    env: { DF_HANDLER_MEMORY_MB: String(memoryMb), NODE_OPTIONS: '--max-old-space-size=256' },
  };
  return withHandlerFaults(setup, async (h) => {
    await h.start();
    h.startSteadyWork();
    await faultWindow(WARMUP_MS);
    const hog = h.enqueueFaulty('memory-hog');
    await h.rig.waitUntil(() => h.reported(hog) || h.supervisor.gaveUp, 20_000);
    // Healthy work goes on a while after the hog's end, so the figures show whether it still flows.
    await faultWindow(2_000);
    const responsive = await h.wrapUp();
    return {
      ...h.result({ responsive }),
      memoryMb,
      hog: await h.fate(hog),
      healthy: await Promise.all(h.healthyIds.map((id) => h.fate(id))),
    };
  });
}

// 13 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface ProcessExitResult extends HandlerFaultResult {
  exiting: ExecutionFate;
  /** The healthy task's six executions. */
  healthy: ExecutionFate[];
}

/**
 * A handler calls process.exit(1), with DF_JOURNAL_REPLAY=rerun (the default): every restart reruns it.
 * Six healthy executions arrive meanwhile (one every 300 ms). The scenario restarts the daemon after each
 * unexpected exit, at most 5 times.
 */
export function processExitInHandler(options: HandlerFaultOptions = {}): Promise<ProcessExitResult> {
  const setup = {
    ...options,
    faulty: (rig: { runsFile: string }) => [processExitTask(rig.runsFile)],
    env: { DF_JOURNAL_REPLAY: 'rerun' },
  };
  return withHandlerFaults(setup, async (h) => {
    await h.start();
    const exiting = h.enqueueFaulty('exits');
    h.startSteadyWork({ everyMs: 300, count: 6 });
    await h.rig.waitUntil(
      () =>
        h.supervisor.gaveUp ||
        (h.reported(exiting) && h.healthyIds.length === 6 && h.healthyIds.every((id) => h.reported(id))),
      20_000,
    );
    const responsive = await h.wrapUp();
    return {
      ...h.result({ responsive }),
      exiting: await h.fate(exiting),
      healthy: await Promise.all(h.healthyIds.map((id) => h.fate(id))),
    };
  });
}

// 14 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface SigtermIgnoredResult extends HandlerFaultResult {
  graceMs: number;
  sideEffectAfterMs: number;
  /** The daemon's exit after SIGTERM (killed: it had not exited after grace + flush window + 3 s). */
  exit: StopResult | undefined;
  ignoring: ExecutionFate;
  /** Wall-clock ms of the handler's side effect; undefined when it never happened. */
  sideEffectAt: number | undefined;
  /** The side effect happened after its FAILED report had reached the service. */
  sideEffectAfterReport: boolean;
}

/**
 * SIGTERM (DF_SHUTDOWN_GRACE_MS=2000) while a handler that ignores ctx.signal waits 5 s before its side
 * effect. The daemon must exit within the grace period plus its report flush window, and the side effect
 * must not happen after the service was told the execution FAILED.
 */
export function sigtermWhileHandlerIgnoresSignal(
  options: HandlerFaultOptions = {},
): Promise<SigtermIgnoredResult> {
  const graceMs = 2_000;
  const sideEffectAfterMs = 5_000;
  let sideEffectsFile = '';
  const setup = {
    ...options,
    faulty: (rig: { runsFile: string; dir: string }) => {
      sideEffectsFile = join(rig.dir, 'side-effects.log');
      return [ignoresSignalTask(rig.runsFile, sideEffectsFile)];
    },
    env: { DF_SHUTDOWN_GRACE_MS: String(graceMs) },
  };
  return withHandlerFaults(setup, async (h) => {
    await writeFile(sideEffectsFile, '');
    await h.start();
    h.startSteadyWork();
    await faultWindow(WARMUP_MS);
    const ignoring = h.enqueueFaulty('ignores-signal', { sideEffectAfterMs });
    await h.rig.waitUntil(async () => (await h.rig.runs()).has(ignoring), 10_000);
    const handlerStartedAt = Date.now();
    await faultWindow(500);
    h.stopSteadyWork();
    const responsive = await h.supervisor.responsive();
    const exit = await h.stop(responsive, graceMs);
    // Long enough for the side effect to happen if anything still runs the handler.
    await faultWindow(Math.max(0, handlerStartedAt + sideEffectAfterMs + 1_500 - Date.now()));
    const sideEffect = (await readFile(sideEffectsFile, 'utf8'))
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { id: string; at: number })
      .find((effect) => effect.id === ignoring);
    const fate = await h.fate(ignoring);
    const failedAt = fate.reports.find((r) => r.status === 'FAILED')?.at;
    return {
      ...h.result({ responsive }),
      graceMs,
      sideEffectAfterMs,
      exit,
      ignoring: fate,
      sideEffectAt: sideEffect?.at,
      sideEffectAfterReport: sideEffect !== undefined && failedAt !== undefined && sideEffect.at >= failedAt,
    };
  });
}

/** The bound on scenario 14's exit: the grace period, then the report flush window. */
export function sigtermExitBoundMs(result: { graceMs: number }): number {
  return result.graceMs + FLUSH_BOUND_MS;
}

// 15 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface KillLoopResult extends HandlerFaultResult {
  kills: number;
  /** From the first start to the last kill. */
  killsWithinMs: number;
  /** Kills made without every slot busy and journaled (a poll could then be in flight: see scenario 1). */
  killsUnguarded: number;
  /** The most requests the service received in any 1 s and any 60 s (arrivals, 429s included). */
  maxPerSecond: number;
  maxPerMinute: number;
  /** For a failure's message: the requests of the 2 s before each 429 and kill, ms from the first request. */
  around429: string[];
}

/** Healthy executions queued up front in scenario 15, each taking 2 s. */
const KILL_LOOP_EXECUTIONS = 28;
const KILL_LOOP_WORK_MS = 2_000;

/**
 * kill -9 and an immediate restart, `kills` times within a minute, with work pending, under the service's
 * normal limits (5 per second, 50 per minute) and the daemon's budget set to them. Each kill comes once the
 * new daemon has claimed fresh work and every slot is busy with a journaled claim, so no poll is in flight
 * (a poll answer lost to the kill loses its execution, which no client can avoid; see scenario 1). The six
 * daemons need about 55 requests: more than a minute's 50, so only windows that survive the kills keep the
 * service from answering 429.
 */
export function killRestartLoop(
  options: HandlerFaultOptions & { kills?: number } = {},
): Promise<KillLoopResult> {
  const kills = options.kills ?? 5;
  const setup = {
    ...options,
    faulty: () => [],
    limits: { perSecond: 5, perMinute: 50 },
    pacedPolls: false,
    maxRestarts: 0,
    env: {
      DF_BUDGET_PER_SECOND: '5',
      DF_BUDGET_PER_MINUTE: '50',
      // The default 200 ms margin: the emulator's arrival watch counts a batch its stalled process stamps at
      // once over the spell it came in. Before the persisted windows, a restart sent at once whatever the
      // margin (this row drew three 429s and 6 requests in a second).
      DF_BUDGET_SAFETY_MARGIN_MS: '200',
      // Each kill lands while 4 executions run, and their reruns are the next ones killed: by design an
      // execution killed 3 times is failed as poison (rows 12 and 13 show that). This row is about the
      // windows, so the guard is set out of reach.
      DF_MAX_CRASHES_PER_EXECUTION: '10',
    },
  };
  return withHandlerFaults(setup, async (h) => {
    const ids = h.rig.enqueue(KILL_LOOP_EXECUTIONS, { delayMs: KILL_LOOP_WORK_MS });
    const firstStartAt = Date.now();
    h.supervisor.start();
    let killsUnguarded = 0;
    let lastKillAt = firstStartAt;
    for (let kill = 0; kill < kills; kill++) {
      const claimedBefore = h.rig.tally().claimed;
      const guarded = await h.rig.waitUntil(async () => {
        if (h.rig.tally().claimed <= claimedBefore) return false;
        const running = h.claimedUnreported();
        if (running.length < CONCURRENCY) return false;
        const journaled = new Set((await h.rig.journalRecords()).map((r) => r.executionId));
        return running.every((id) => journaled.has(id));
      }, 15_000);
      // A slot may free up between that check and the kill, and its next poll's answer be lost to the kill
      // (scenario 1: no client can avoid that). So the service holds its claims for the kill (polls answered
      // 404, as when nothing is pending) once every claim it handed out is journaled; the kill then never
      // lands on a poll answer in flight, which is what this row assumes.
      h.rig.emulator.setFaults([{ operation: 'tasks.poll', kind: 'status', status: 404 }]);
      const settled = await h.rig.waitUntil(async () => {
        const journaled = new Set((await h.rig.journalRecords()).map((r) => r.executionId));
        return h.claimedUnreported().every((id) => journaled.has(id));
      }, 5_000);
      if (!guarded || !settled) killsUnguarded++;
      await h.supervisor.killAndRestart();
      h.rig.emulator.clearFaults();
      lastKillAt = Date.now();
    }
    await h.rig.waitUntil(() => ids.every((id) => h.reported(id)), 90_000);
    h.addHealthySpan({ ids, until: Date.now() });
    const responsive = await h.supervisor.responsive();
    await h.stop(responsive);
    const requests = h.rig.emulator.requests();
    const arrivals = requests.map((r) => r.at);
    const t0 = arrivals[0] ?? 0;
    const around429 = requests
      .filter((r) => r.status === 429)
      .map((hit) =>
        requests
          .filter((r) => r.at > hit.at - 2_000 && r.at <= hit.at)
          .map((r) => `${r.at - t0} ${r.operation} ${r.status}`)
          .join('; '),
      );
    return {
      // A claim may wait for a slot (one handler's run) and for the per-second window.
      ...h.result({ responsive, normalPickupMs: KILL_LOOP_WORK_MS + 1_000 }),
      kills,
      killsWithinMs: lastKillAt - firstStartAt,
      killsUnguarded,
      maxPerSecond: busiestWindow(requests, 1_000),
      maxPerMinute: busiestWindow(requests, 60_000),
      around429,
    };
  });
}

// 16 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface KeyLeakResult extends HandlerFaultResult {
  /** Every execution of the leaking task, both daemons. */
  leaking: ExecutionFate[];
  /** Executions of any task whose reports the service received carry the API key. */
  reportsWithKey: string[];
  /** Lines of the daemons' stdout and stderr that carry the API key (each cut at 300 characters). */
  outputLinesWithKey: string[];
}

const LEAK_INPUTS = [
  { source: 'env', how: 'throw' },
  { source: 'env', how: 'return' },
  { source: 'file', how: 'throw' },
  { source: 'file', how: 'return' },
];

/**
 * A handler throws (or returns) `token <API key>`, reading the key from DF_API_KEY or from the file
 * DF_API_KEY_FILE names. Two daemons in turn: one given the key in DF_API_KEY, then one given it in
 * DF_API_KEY_FILE. The key must reach neither a report nor a log line.
 */
export function keyInHandlerError(options: HandlerFaultOptions = {}): Promise<KeyLeakResult> {
  const setup = { ...options, faulty: (rig: { runsFile: string }) => [keyLeakTask(rig.runsFile)] };
  return withHandlerFaults(setup, async (h) => {
    const keyFile = join(h.rig.dir, 'api-key');
    await writeFile(keyFile, `${h.rig.apiKey}\n`);
    const leaking: string[] = [];
    let responsive = true;
    const keyEnvs: Record<string, string>[] = [{}, { DF_API_KEY: '', DF_API_KEY_FILE: keyFile }];
    for (const keyEnv of keyEnvs) {
      await h.start(keyEnv);
      h.startSteadyWork();
      await faultWindow(WARMUP_MS);
      const ids = LEAK_INPUTS.map((input) => h.enqueueFaulty('leaks-key', input));
      leaking.push(...ids);
      await h.rig.waitUntil(() => ids.every((id) => h.reported(id)), 10_000);
      await faultWindow(500);
      h.stopSteadyWork();
      responsive &&= await h.supervisor.responsive();
      await h.settle(5_000);
      await h.stop(responsive);
    }
    const key = h.rig.apiKey;
    return {
      ...h.result({ responsive }),
      leaking: await Promise.all(leaking.map((id) => h.fate(id))),
      reportsWithKey: h.rig.emulator
        .executions()
        .filter((e) => e.reports.some((r) => JSON.stringify(r.output).includes(key)))
        .map((e) => e.id),
      outputLinesWithKey: h
        .output()
        .split('\n')
        .filter((line) => line.includes(key))
        .map((line) => (line.length > 300 ? `${line.slice(0, 300)}…` : line)),
    };
  });
}

// 17 ────────────────────────────────────────────────────────────────────────────────────────────────────

export interface LateErrorsResult extends HandlerFaultResult {
  late: (ExecutionFate & { throwLogged: boolean; rejectionLogged: boolean })[];
}

/**
 * A handler returns, then 100 ms later a promise it left unawaited rejects and 200 ms later a timer it set
 * throws. The execution is COMPLETED, the daemon stays up, and each late error is logged with the
 * execution's id (the log line's executionId field).
 */
export function lateErrorsAfterReturn(options: HandlerFaultOptions = {}): Promise<LateErrorsResult> {
  const setup = { ...options, faulty: (rig: { runsFile: string }) => [lateErrorsTask(rig.runsFile)] };
  return withHandlerFaults(setup, async (h) => {
    await h.start();
    h.startSteadyWork();
    await faultWindow(WARMUP_MS);
    const ids = [h.enqueueFaulty('late-errors'), h.enqueueFaulty('late-errors')];
    const logged = (id: string, text: string) =>
      h.logs().some((line) => line.executionId === id && JSON.stringify(line).includes(`${text} from ${id}`));
    await h.rig.waitUntil(
      () => ids.every((id) => h.reported(id) && logged(id, 'late throw') && logged(id, 'late rejection')),
      5_000,
    );
    await faultWindow(1_000);
    const responsive = await h.wrapUp();
    const late = await Promise.all(
      ids.map(async (id) => ({
        ...(await h.fate(id)),
        throwLogged: logged(id, 'late throw'),
        rejectionLogged: logged(id, 'late rejection'),
      })),
    );
    return { ...h.result({ responsive }), late };
  });
}

// The table ──────────────────────────────────────────────────────────────────────────────────────────────

/** One of issue 9's rows for bench/faults-report.ts, run with the issue's figures. */
export interface HandlerScenarioEntry {
  name: string;
  /** Runs the row under `isolation` (undefined: the daemon's default); `detail` is a line on what it showed. */
  run: (isolation: IsolationMode | undefined) => Promise<HandlerFaultResult & { detail: string }>;
}

function describeFate(fate: ExecutionFate): string {
  const reports =
    fate.reports.length === 0
      ? 'not reported'
      : fate.reports
          .map((r) => (r.error === undefined ? r.status : `${r.status} (${r.error.slice(0, 80)})`))
          .join(', then ');
  return `${reports}, ${fate.runs} run(s)`;
}

/** Every row of issue 9, in its order, with the figures (the suite uses shorter ones for 10). */
export const HANDLER_SCENARIOS: HandlerScenarioEntry[] = [
  {
    name: '10 CPU block 30 s in a handler, 300 ms answers',
    run: async (isolation) => {
      const r = await cpuBlockInHandler({ isolation, blockMs: 30_000 });
      return {
        ...r,
        detail: `blocking execution (timeoutMs ${r.timeoutMs}): ${describeFate(r.blocking)}`,
      };
    },
  },
  {
    name: '11 handler never yields past its timeout',
    run: async (isolation) => {
      const r = await hungHandler({ isolation });
      return { ...r, detail: `hung execution (timeoutMs ${r.timeoutMs}): ${describeFate(r.hung)}` };
    },
  },
  {
    name: '12 handler runs out of memory',
    run: async (isolation) => {
      const r = await memoryHogHandler({ isolation });
      return { ...r, detail: `hog (DF_HANDLER_MEMORY_MB ${r.memoryMb}): ${describeFate(r.hog)}` };
    },
  },
  {
    name: '13 process.exit(1) in a handler, replay rerun',
    run: async (isolation) => {
      const r = await processExitInHandler({ isolation });
      const healthy = r.healthy.filter((e) => e.reports.length > 0).length;
      return {
        ...r,
        detail: `exiting execution: ${describeFate(r.exiting)}; healthy reported ${healthy}/6`,
      };
    },
  },
  {
    name: '14 SIGTERM, handler ignores ctx.signal',
    run: async (isolation) => {
      const r = await sigtermWhileHandlerIgnoresSignal({ isolation });
      const exit = r.exit
        ? `exit ${r.exit.killed ? 'by kill -9' : r.exit.code} ${r.exit.elapsedMs} ms after SIGTERM`
        : 'not running at SIGTERM';
      const failedAt = r.ignoring.reports.find((report) => report.status === 'FAILED')?.at;
      const sideEffect =
        r.sideEffectAt === undefined
          ? 'no side effect'
          : failedAt === undefined
            ? 'side effect, no FAILED report'
            : `side effect ${r.sideEffectAt - failedAt} ms after the FAILED report`;
      return {
        ...r,
        detail: `${exit} (bound ${sigtermExitBoundMs(r)} ms); ${sideEffect}; ${describeFate(r.ignoring)}`,
      };
    },
  },
  {
    name: '15 kill -9 + restart 5 times in a minute, 5/s 50/min',
    run: async (isolation) => {
      const r = await killRestartLoop({ isolation });
      return {
        ...r,
        detail:
          `${r.kills} kills in ${(r.killsWithinMs / 1000).toFixed(1)} s (${r.killsUnguarded} unguarded); ` +
          `at most ${r.maxPerSecond} requests in a second, ${r.maxPerMinute} in a minute at the service`,
      };
    },
  },
  {
    name: '16 API key in what a handler throws or returns',
    run: async (isolation) => {
      const r = await keyInHandlerError({ isolation });
      return {
        ...r,
        detail: `key in ${r.reportsWithKey.length} execution(s)' reports, ${r.outputLinesWithKey.length} output line(s)`,
      };
    },
  },
  {
    name: '17 late rejection and throw after return',
    run: async (isolation) => {
      const r = await lateErrorsAfterReturn({ isolation });
      const count = (logged: (e: (typeof r.late)[number]) => boolean) => r.late.filter(logged).length;
      return {
        ...r,
        detail:
          `logged with the execution id: ${count((e) => e.throwLogged)}/${r.late.length} throws, ` +
          `${count((e) => e.rejectionLogged)}/${r.late.length} rejections; ` +
          r.late.map(describeFate).join('; '),
      };
    },
  },
];
