// The running daemon's read-only status page (GET /status on its health and metrics port, DF_HTTP_STATUS_PAGE):
// readiness, tasks served, the key's budget with the month's pace, recent executions with their attempts, and
// the dead letters. That port may be reachable from the network: no input, output or log line is shown, and
// nothing can be changed from it. Imported only when the setting is on (see cli/run-daemon.ts).
import { randomBytes } from 'node:crypto';
import type { BudgetSnapshot } from '../budget/budget.ts';
import type { DaemonWorker } from '../daemon/contract.ts';
import type { DeadLetter } from '../journal/journal.ts';
import { UsageSamples } from './budget-chart.ts';
import { budgetSection } from './budget-view.ts';
import { deadLettersSection } from './dead-letters-view.ts';
import { ExecutionRecorder } from './execution-record.ts';
import { executionsList } from './executions-view.ts';
import { html } from './html.ts';
import { page, pageHeaders } from './layout.ts';
import type { ConsoleSources } from './sources.ts';

/** What the page reads of the daemon: the standalone mode has it all; clustered mode has no journal here. */
type StatusSource = DaemonWorker & {
  readonly budget?: { snapshot(): BudgetSnapshot } | undefined;
  readonly mode?: { readonly label: string; deadLetters?(): Promise<DeadLetter[]> };
};

const STATUS_PATH = '/status';

/**
 * Subscribes to the worker's events now (call before it starts) and returns the page's renderer.
 * `showData` (DF_HTTP_STATUS_PAGE_DETAILS): handlers' messages, inputs and outputs too; else states and figures.
 */
export function createStatusPage(
  worker: StatusSource,
  options: { showData: boolean } = { showData: false },
): () => Promise<{ body: string; headers: Record<string, string> }> {
  const recorder = new ExecutionRecorder({ maxExecutions: 100 });
  recorder.listen(worker.events);
  const sources: ConsoleSources = {
    samples: new UsageSamples(),
    worker: {
      recorder,
      budget: () => worker.budget?.snapshot(),
      deadLetters: () => worker.mode?.deadLetters?.() ?? Promise.resolve([]),
    },
  };
  return async () => {
    const readiness = worker.readiness();
    const letters = worker.mode?.deadLetters ? await worker.mode.deadLetters() : undefined;
    const body = html`<section id="readiness" data-live>
        <h2>${readiness.ready ? 'Ready' : 'Not ready'}</h2>
        <table>
          <tbody>
            ${Object.entries(readiness.checks).map(
              ([name, check]) =>
                html`<tr>
                  <th>${name}</th>
                  <td>${check.ok ? 'ok' : `not ok: ${check.reason ?? ''}`}</td>
                </tr>`,
            )}
            <tr>
              <th>tasks served</th>
              <td>${readiness.tasks.served.join(', ') || 'none'}</td>
            </tr>
            ${
              readiness.tasks.withoutTask.length > 0 &&
              html`<tr>
                <th>handlers without a task</th>
                <td>${readiness.tasks.withoutTask.join(', ')}</td>
              </tr>`
            }
          </tbody>
        </table>
      </section>
      <section>
        <h2>Budget</h2>
        ${budgetSection(sources, Date.now())}
      </section>
      <section>
        <h2>Recent executions</h2>
        <p class="note">
          Read-only.
          ${options.showData ? 'Log lines are' : "Handlers' messages, inputs, outputs and log lines are"} not
          shown here (this port may be reachable from the network): see the daemon's logs.
        </p>
        ${executionsList(sources, { showData: options.showData })}
      </section>
      <section>
        <h2>Dead letters</h2>
        ${deadLettersSection(letters, { base: STATUS_PATH, actions: false, showData: options.showData })}
      </section>`;
    const nonce = randomBytes(16).toString('base64');
    const tabs = [{ path: '', label: 'Status' }];
    const text = page(
      { base: STATUS_PATH, active: '', title: 'Status', mode: 'daemon status', tabs, nonce },
      body,
    );
    return { body: text, headers: pageHeaders(nonce) };
  };
}
