// The worker's dead letters: executions whose report the service refused for good, kept in its journal, each
// with what the service answered and the outcome it refused; with retry (send the report again) and discard.
import type { DeadLetter } from '../journal/journal.ts';
import { html, prettyJson, shortTime, type SafeHtml } from './html.ts';

export function deadLettersSection(
  letters: readonly DeadLetter[] | undefined,
  options: { base: string; actions: boolean; showData: boolean },
): SafeHtml {
  if (letters === undefined) {
    return html`<p class="note">
      Dead letters are kept by a worker's journal: run df-worker dev (or a daemon with its status page) to see
      them.
    </p>`;
  }
  if (letters.length === 0) return html`<div id="dead-letters" data-live><p>No dead letter.</p></div>`;
  const rows = letters.map((letter) => {
    const id = letter.entry.executionId;
    const { status, code, message } = letter.answer;
    const url = `${options.base}/dead-letters/${encodeURIComponent(id)}`;
    return html`<tr data-dead-letter="${id}">
      <td>${id}</td>
      <td>${letter.entry.taskKey}</td>
      <td>${shortTime(letter.deadAt)}</td>
      <td>${status}${code ? ` ${code}` : ''}${options.showData && message ? `: ${message}` : ''}</td>
      <td>
        ${letter.entry.outcome?.status ?? ''}${options.showData && letter.entry.outcome && html`<pre>${prettyJson(letter.entry.outcome.output)}</pre>`}
      </td>
      ${
        options.actions &&
        html`<td>
          <form class="retry inline" data-method="POST" data-url="${url}/retry">
            <button type="submit">Retry</button> <span class="form-error" role="alert"></span>
          </form>
          <form class="discard inline" data-method="POST" data-url="${url}/discard">
            <button type="submit">Discard</button> <span class="form-error" role="alert"></span>
          </form>
        </td>`
      }
    </tr>`;
  });
  return html`<div id="dead-letters" data-live>
    <table>
      <thead>
        <tr>
          <th>Execution</th>
          <th>Task</th>
          <th>Dead since</th>
          <th>The service's answer</th>
          <th>Outcome refused</th>
          ${options.actions && html`<th></th>`}
        </tr>
      </thead>
      <tbody>
        ${rows}
      </tbody>
    </table>
  </div>`;
}
