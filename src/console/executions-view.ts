// The tasks and their executions: what the service knows (status, input, output, claim, reports) joined with
// what the worker in this process did (each attempt, its duration, how it ended, its log lines); and the form
// that enqueues an execution.
import type { JsonObject, Task } from '../api/types.ts';
import { extraFieldsOf } from '../api/validate.ts';
import type { EmulatedExecution } from '../emulator/types.ts';
import type { AttemptRecord, LogLine, WorkerExecution } from './execution-record.ts';
import { html, prettyJson, shortTime, type SafeHtml } from './html.ts';
import type { ConsoleSources } from './sources.ts';

/** Executions listed at most, newest first. */
const MAX_SHOWN = 200;

export const NO_WORKER_NOTE =
  'Attempts and their log lines come from a worker: run df-worker dev, which runs one beside its emulator. ' +
  'Here only what the service knows is shown: the claim and the reports.';

export function tasksTable(tasks: readonly Task[]): SafeHtml {
  if (tasks.length === 0) return html`<p>No task yet. Tasks are created from the handlers' declarations.</p>`;
  const keys = (list: Task['inputKeys']) => list.map((k) => k.key).join(', ');
  return html`<table id="tasks">
    <thead>
      <tr>
        <th>Key</th>
        <th>Id</th>
        <th>Retries</th>
        <th>Input keys</th>
        <th>Output keys</th>
        <th>Description</th>
        <th>Other fields</th>
      </tr>
    </thead>
    <tbody>
      ${tasks.map(
        (t) =>
          html`<tr>
            <td>${t.key}</td>
            <td>${t.id}</td>
            <td>${t.retryCount}</td>
            <td>${keys(t.inputKeys)}</td>
            <td>${keys(t.outputKeys)}</td>
            <td>${t.description}</td>
            <td>${otherFields(t)}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** A task's fields beyond the description (`timeoutSeconds=3600, ...`): kept by every update, shown as sent. */
function otherFields(task: Task): string {
  const fields = { ...extraFieldsOf(task as unknown as JsonObject), ...task.extraFields };
  delete fields.extraFields;
  return Object.entries(fields)
    .map(([field, value]) => `${field}=${JSON.stringify(value) ?? 'null'}`)
    .join(', ');
}

export function enqueueForm(tasks: readonly Task[]): SafeHtml {
  if (tasks.length === 0) return html``;
  const example = JSON.stringify(Object.fromEntries(tasks[0]!.inputKeys.map((k) => [k.key, ''])));
  return html`<form id="enqueue" data-method="POST" data-url="/__admin/executions">
    <label
      >Task
      <select name="taskKey">
        ${tasks.map((t) => html`<option value="${t.key}">${t.key}</option>`)}
      </select></label
    >
    <label>Input (a JSON object)<textarea name="input" data-json rows="3">${example}</textarea></label>
    <button type="submit">Enqueue</button> <span class="form-error" role="alert"></span>
  </form>`;
}

/** Every execution, newest first: the service's records joined with the worker's, or the worker's alone. */
export function executionsList(sources: ConsoleSources, options: { showData: boolean }): SafeHtml {
  const { service, worker } = sources;
  const serviceSide = service ? [...service.executions()].reverse() : [];
  const known = new Set(serviceSide.map((e) => e.id));
  const workerOnly = (worker?.recorder.all() ?? []).filter((w) => !known.has(w.executionId));
  const all: [EmulatedExecution | undefined, WorkerExecution | undefined][] = [
    ...workerOnly.map((w): [undefined, WorkerExecution] => [undefined, w]),
    ...serviceSide.map((e): [EmulatedExecution, WorkerExecution | undefined] => [
      e,
      worker?.recorder.get(e.id),
    ]),
  ];
  // The page is refreshed every second: a long session's history stays bounded on it.
  const items = all.slice(0, MAX_SHOWN).map(([e, w]) => executionItem(e, w, options));
  const hidden = all.length - items.length;
  return html`<div id="executions" data-live>
    ${items.length === 0 ? html`<p>No execution yet.</p>` : items}
    ${hidden > 0 && html`<p>${hidden} older execution(s) not shown (GET /__admin/executions lists them all).</p>`}
  </div>`;
}

function executionItem(
  service: EmulatedExecution | undefined,
  worker: WorkerExecution | undefined,
  options: { showData: boolean },
): SafeHtml {
  const id = service?.id ?? worker!.executionId;
  const task = service?.taskKey ?? worker!.task;
  const status = service?.status ?? worker?.outcome?.status ?? 'IN_PROGRESS';
  const attempts = worker?.attempts.length ?? 0;
  const reported = service ? service.reports.length > 0 : worker?.report !== undefined;
  return html`<details class="execution" id="x-${id}" data-execution="${id}" data-status="${status}">
    <summary>
      <strong>${id}</strong> · ${task} ·
      <span class="status status-${status}">${status}</span
      >${service && html` · created ${shortTime(service.createdAt)}`}${worker && html` · ${attempts} attempt${attempts === 1 ? '' : 's'}`}${reported ? ' · reported' : ''}
    </summary>
    <table>
      <tbody>
        ${
          service &&
          options.showData &&
          html`<tr>
            <th>Input</th>
            <td><pre class="input">${prettyJson(service.input)}</pre></td>
          </tr>`
        }
        ${
          service &&
          options.showData &&
          service.output !== undefined &&
          html`<tr>
            <th>Output</th>
            <td><pre class="output">${prettyJson(service.output)}</pre></td>
          </tr>`
        }
        ${
          service &&
          html`<tr>
            <th>Claimed</th>
            <td>${service.claimedAt ? shortTime(service.claimedAt) : 'not yet (pending)'}</td>
          </tr>`
        }
        ${
          service?.timeouts &&
          service.timeouts.length > 0 &&
          html`<tr>
            <th>Timed out</th>
            <td>
              ${service.timeouts.map(
                (t) =>
                  html`<div class="timeout">
                    claimed ${shortTime(t.claimedAt)}, not reported in time, timed out ${shortTime(t.at)}:
                    ${
                      t.requeuedAs === id
                        ? 'queued again under its id'
                        : html`queued again as <a href="#x-${t.requeuedAs}">${t.requeuedAs}</a>`
                    }
                  </div>`,
              )}
            </td>
          </tr>`
        }
        ${
          service?.requeuedFrom !== undefined &&
          html`<tr>
            <th>Queued again from</th>
            <td><a href="#x-${service.requeuedFrom}">${service.requeuedFrom}</a> (it timed out)</td>
          </tr>`
        }
        ${
          service &&
          html`<tr>
            <th>Reports</th>
            <td>
              ${service.reports.length === 0 ? 'none yet' : service.reports.map((r) => html`<div>${shortTime(r.at)} ${r.status}</div>`)}
            </td>
          </tr>`
        }
        ${
          worker?.outcome &&
          html`<tr>
            <th>Outcome</th>
            <td>
              ${worker.outcome.status} after ${worker.outcome.attempts} attempt(s),
              ${worker.outcome.durationMs}
              ms${worker.outcome.failure ? ` (${failureText(worker.outcome.failure, options.showData)})` : ''}
            </td>
          </tr>`
        }
        ${
          worker?.report &&
          html`<tr>
            <th>Report</th>
            <td>
              ${worker.report.result} (${worker.report.attempts}
              request${worker.report.attempts === 1 ? '' : 's'})
            </td>
          </tr>`
        }
        <tr>
          <th>Attempts</th>
          <td class="attempts">
            ${worker ? attemptsOf(worker, options.showData) : html`<span class="note">${NO_WORKER_NOTE}</span>`}
          </td>
        </tr>
      </tbody>
    </table>
  </details>`;
}

function attemptsOf(worker: WorkerExecution, showLogs: boolean): SafeHtml {
  if (worker.attempts.length === 0 && worker.lines.length === 0)
    return html`none (the handler was not called)`;
  return html`${worker.attempts.map((a) => attemptItem(a, showLogs))}${showLogs && worker.lines.length > 0 && html`<div class="attempt-after">the worker's own lines for this execution:${logList(worker.lines)}</div>`}`;
}

function attemptItem(attempt: AttemptRecord, showLogs: boolean): SafeHtml {
  const how =
    attempt.result === undefined
      ? 'running'
      : `${attempt.result} after ${attempt.durationMs ?? '?'} ms${errorText(attempt.error, showLogs)}`;
  return html`<div
    class="attempt"
    data-attempt="${attempt.attempt}"
    data-result="${attempt.result ?? 'running'}"
  >
    <div><strong>Attempt ${attempt.attempt}</strong> · started ${shortTime(attempt.startedAt)} · ${how}</div>
    ${showLogs && logList(attempt.lines)}
  </div>`;
}

/** The outcome's failure, `kind: message`: its kind alone where no user data may show (/status). */
function failureText(failure: string, withMessage: boolean): string {
  return withMessage ? failure : failure.replace(/:.*$/s, '');
}

/** The attempt's error: its name, and its message where user data may show (the console, not /status). */
function errorText(error: AttemptRecord['error'], withMessage: boolean): string {
  if (!error) return '';
  return withMessage ? `: ${error.name}: ${error.message}` : `: ${error.name}`;
}

function logList(lines: readonly LogLine[]): SafeHtml {
  if (lines.length === 0) return html`<div class="log">(no log line)</div>`;
  return html`<div class="log">
    ${lines.map(
      (l) =>
        html`<div class="log-line level-${l.level}">
          ${shortTime(l.at)} ${l.level.toUpperCase()}
          ${l.msg}${l.fields && html` <span class="fields">${l.fields}</span>`}
        </div>`,
    )}
  </div>`;
}
