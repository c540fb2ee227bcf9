// The faulty handlers of issue 9's scenarios, as module sources written into the rig's handlers folder
// next to the healthy workload. Each appends its execution id to the rig's run log before misbehaving, so a
// scenario counts how often it ran (a rerun after a crash shows as a second line).

/** One faulty task: its key, its declared keys, and the handler module's source. */
export interface FaultyTask {
  key: string;
  inputKeys: string[];
  outputKeys: string[];
  source: string;
}

function faultyTask(
  key: string,
  keys: { inputKeys?: string[]; outputKeys?: string[]; timeoutMs?: number },
  imports: string,
  handle: string,
): FaultyTask {
  const { inputKeys = [], outputKeys = [], timeoutMs } = keys;
  const source = `
import { appendFileSync } from 'node:fs';
${imports}
import { defineTask } from 'df-worker';

export default defineTask({
  key: ${JSON.stringify(key)},
  inputKeys: ${JSON.stringify(inputKeys)},
  outputKeys: ${JSON.stringify(outputKeys)},
  ${timeoutMs === undefined ? '' : `timeoutMs: ${timeoutMs},`}
  ${handle}
});
`;
  return { key, inputKeys, outputKeys, source };
}

const logRun = (runsFile: string) => `appendFileSync(${JSON.stringify(runsFile)}, ctx.execution.id + '\\n');`;

/** Scenario 10: a synchronous busy loop of `input.blockMs`, far past its declared timeout. */
export function cpuBlockTask(runsFile: string, timeoutMs: number): FaultyTask {
  return faultyTask(
    'cpu-block',
    { inputKeys: ['blockMs'], outputKeys: ['spunMs'], timeoutMs },
    '',
    `handle: (input, ctx) => {
    ${logRun(runsFile)}
    const startedAt = Date.now();
    while (Date.now() - startedAt < Number(input.blockMs)) {
      // Never yields: neither its own timeout timer nor any other callback of this thread can run.
    }
    return { spunMs: Date.now() - startedAt };
  },`,
  );
}

/** Scenario 11: an infinite synchronous loop; only terminating its thread or process ends it. */
export function hungTask(runsFile: string, timeoutMs: number): FaultyTask {
  return faultyTask(
    'hang',
    { outputKeys: ['never'], timeoutMs },
    '',
    `handle: (_input, ctx) => {
    ${logRun(runsFile)}
    for (;;) {
      // Never yields, never returns.
    }
  },`,
  );
}

/** Scenario 12: allocates and keeps 8 MB after 8 MB until the heap limit ends it. */
export function memoryHogTask(runsFile: string): FaultyTask {
  return faultyTask(
    'memory-hog',
    { outputKeys: ['never'] },
    '',
    `handle: (_input, ctx) => {
    ${logRun(runsFile)}
    const hoard = [];
    for (;;) hoard.push(new Array(1_000_000).fill(hoard.length));
  },`,
  );
}

/** Scenario 13: ends the process it runs in, as a library calling process.exit on an error would. */
export function processExitTask(runsFile: string): FaultyTask {
  return faultyTask(
    'exits',
    { outputKeys: ['never'] },
    '',
    `handle: (_input, ctx) => {
    ${logRun(runsFile)}
    process.exit(1);
  },`,
  );
}

/**
 * Scenario 14: ignores ctx.signal, waits `input.sideEffectAfterMs`, then performs its side effect: appends
 * `{ id, at }` (wall-clock ms) to `sideEffectsFile`.
 */
export function ignoresSignalTask(runsFile: string, sideEffectsFile: string): FaultyTask {
  return faultyTask(
    'ignores-signal',
    { inputKeys: ['sideEffectAfterMs'], outputKeys: ['done'] },
    '',
    `handle: async (input, ctx) => {
    ${logRun(runsFile)}
    await new Promise((resolve) => setTimeout(resolve, Number(input.sideEffectAfterMs)));
    appendFileSync(
      ${JSON.stringify(sideEffectsFile)},
      JSON.stringify({ id: ctx.execution.id, at: Date.now() }) + '\\n',
    );
    return { done: true };
  },`,
  );
}

/**
 * Scenario 16: puts the API key into what it throws or returns. `input.source` says where it reads it:
 * 'env' from DF_API_KEY, 'file' from the file DF_API_KEY_FILE names (when that variable is set).
 * `input.how` is 'throw' or 'return'.
 */
export function keyLeakTask(runsFile: string): FaultyTask {
  return faultyTask(
    'leaks-key',
    { inputKeys: ['source', 'how'], outputKeys: ['echoed'] },
    "import { readFileSync } from 'node:fs';",
    `handle: (input, ctx) => {
    ${logRun(runsFile)}
    const keyFile = process.env.DF_API_KEY_FILE;
    const key =
      input.source === 'file'
        ? keyFile ? readFileSync(keyFile, 'utf8').trim() : 'no key file'
        : process.env.DF_API_KEY;
    if (input.how === 'return') return { echoed: \`token \${key}\` };
    throw new Error(\`token \${key}\`);
  },`,
  );
}

/**
 * Scenario 17: returns at once, leaving behind a rejection nobody awaits (after 100 ms) and a throw from a
 * timer (after 200 ms), each naming the execution.
 */
export function lateErrorsTask(runsFile: string): FaultyTask {
  return faultyTask(
    'late-errors',
    { outputKeys: ['ok'] },
    '',
    `handle: (_input, ctx) => {
    ${logRun(runsFile)}
    const id = ctx.execution.id;
    (async () => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      throw new Error('late rejection from ' + id);
    })();
    setTimeout(() => {
      throw new Error('late throw from ' + id);
    }, 200);
    return { ok: true };
  },`,
  );
}
