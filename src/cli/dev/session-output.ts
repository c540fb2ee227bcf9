// What a dev session prints on its terminal: the banner (where the emulator, the console and the worker are, and
// how to enqueue from another terminal), then a line for each execution once it is reported.
import path from 'node:path';
import type { WorkerConfig } from '../../config/schema.ts';
import type { EmulatedExecution, Emulator, NewVariable } from '../../emulator/index.ts';
import type { LoadedHandler } from '../../handlers/loader.ts';
import { cliCommand } from '../invocation.ts';

export interface Banner {
  url: string;
  apiKey: string;
  wakeToken: string;
  adminToken: string;
  consoleUrl: string;
  file: string;
  handlersDir: string;
  workerUrl: string;
  handlers: LoadedHandler[];
  budget: WorkerConfig['budget'];
  variables: NewVariable[];
}

export function printBanner(say: (line: string) => void, b: Banner): void {
  const first = b.handlers[0];
  const example = first?.key ?? 'my-task';
  const input = JSON.stringify(Object.fromEntries((first?.inputKeys ?? []).map((k) => [k.key, '...'])));
  say(`df-worker dev: emulator on ${b.url} (API key ${b.apiKey}, this session's alone)`);
  say(`  console: ${b.consoleUrl}`);
  say(`  admin routes: ${b.url}/__admin (Authorization: Bearer ${b.adminToken})`);
  say(`  worker: ${b.workerUrl} (/metrics, /readyz, POST /wake with Authorization: Bearer ${b.wakeToken})`);
  say(
    `  budget and emulator limits: ${b.budget.perSecond}/s, ${b.budget.perMinute}/min, ${b.budget.perMonth}/month; ` +
      'every enqueue wakes the worker',
  );
  say(
    `  handlers: ${path.relative(process.cwd(), b.handlersDir) || '.'} (watched): ${b.handlers.map((h) => h.key).join(', ') || 'none'}`,
  );
  if (b.variables.length > 0) {
    say(
      `  variables: ${b.variables.map((v) => v.id).join(', ')} (ctx.service.variables.get(id); ` +
        'GET /v1/data-factory/variables lists them)',
    );
  }
  say(`  session file: ${path.relative(process.cwd(), b.file)}`);
  say('Enqueue from another terminal:');
  say(`  ${cliCommand(`dev --enqueue ${example} '${input}'`)}`);
  say(
    `  curl -X POST ${b.url}/__admin/executions -H 'authorization: Bearer ${b.adminToken}' ` +
      `-H 'content-type: application/json' -d '{"taskKey":"${example}","input":${input}}'`,
  );
  say('Ctrl-C stops the session.');
}

/** Prints each tracked execution once it has its first report, with its pickup and report times. */
export function printReports(
  emulator: Emulator,
  tracked: Map<string, EmulatedExecution>,
  say: (line: string) => void,
): void {
  for (const id of tracked.keys()) {
    const execution = emulator.execution(id);
    const report = execution?.reports[0];
    if (!execution || !report) continue;
    tracked.delete(id);
    const created = Date.parse(execution.createdAt);
    const pickup = execution.claimedAt
      ? `picked up in ${Date.parse(execution.claimedAt) - created} ms, `
      : '';
    say(
      `${report.status === 'COMPLETED' ? '✔' : '✖'} ${id} ${execution.taskKey} ${report.status} ` +
        `(${pickup}reported in ${Date.parse(report.at) - created} ms): ${preview(report.output)}`,
    );
  }
}

function preview(output: unknown): string {
  const text = JSON.stringify(output);
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}
