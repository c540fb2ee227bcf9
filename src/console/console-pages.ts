// The console's routes, served by the emulator's own server under `/console` (df-worker dev, df-worker
// emulator). Pages are read-only GETs; what changes state goes to the admin routes, or to the dead-letter
// actions here, and needs the admin token in `Authorization: Bearer` exactly as the admin routes do.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EmulatorPages } from '../emulator/types.ts';
import { budgetSection } from './budget-view.ts';
import { deadLettersSection } from './dead-letters-view.ts';
import { enqueueForm, executionsList, NO_WORKER_NOTE, tasksTable } from './executions-view.ts';
import { html, type SafeHtml } from './html.ts';
import { page, pageHeaders } from './layout.ts';
import { filesSection, variablesSection } from './records-view.ts';
import type { ConsoleSources } from './sources.ts';

export const CONSOLE_PATH = '/console';

const TABS = [
  { path: '', label: 'Tasks and executions' },
  { path: 'records', label: 'Variables and files' },
  { path: 'budget', label: 'Budget' },
  { path: 'dead-letters', label: 'Dead letters' },
] as const;

export interface ConsolePagesOptions {
  sources: ConsoleSources;
  /** Whether a request's Authorization header carries the admin token (or none is needed). */
  authorized: (authorization: string | undefined) => boolean;
  mode: string;
  now?: () => number;
}

export function consolePages(options: ConsolePagesOptions): EmulatorPages {
  return {
    path: CONSOLE_PATH,
    serve: (request, response, url) => serve(options, request, response, url),
  };
}

async function serve(
  o: ConsolePagesOptions,
  request: IncomingMessage,
  response: ServerResponse,
  url: URL,
): Promise<void> {
  // Host and cross-site requests are checked by the emulator before it hands a request to its pages.
  const rest = url.pathname.slice(CONSOLE_PATH.length).replace(/^\/+|\/+$/g, '');
  const method = request.method ?? 'GET';
  const action = /^dead-letters\/([^/]+)\/(retry|discard)$/.exec(rest);
  if (action) {
    request.resume();
    if (method !== 'POST') return sendJson(response, 405, { message: 'Use POST.' });
    if (!o.authorized(request.headers.authorization)) {
      return sendJson(response, 401, { message: 'This action needs Authorization: Bearer <admin token>.' });
    }
    let executionId: string;
    try {
      executionId = decodeURIComponent(action[1]!);
    } catch {
      return sendJson(response, 400, { message: `'${action[1]}' is not a well-formed execution id.` });
    }
    return deadLetterAction(o, executionId, action[2] as 'retry' | 'discard', response);
  }
  const tab = TABS.find((t) => t.path === rest);
  if (method !== 'GET' || !tab) {
    return sendJson(response, 404, {
      message: `No console page ${method} ${url.pathname}; open ${CONSOLE_PATH}.`,
    });
  }
  const body = await tabBody(o, tab.path);
  const nonce = randomBytes(16).toString('base64');
  const text = page(
    { base: CONSOLE_PATH, active: tab.path, title: tab.label, mode: o.mode, tabs: TABS, nonce },
    body,
  );
  response.writeHead(200, pageHeaders(nonce));
  response.end(text);
}

async function tabBody(o: ConsolePagesOptions, tab: string): Promise<SafeHtml> {
  const { sources } = o;
  const tasks = sources.service?.tasks() ?? [];
  switch (tab) {
    case 'records':
      return html`${variablesSection(sources.service?.variables() ?? [])}${filesSection(sources.service?.files() ?? [])}`;
    case 'budget':
      return html`<h2>Budget</h2>
        ${budgetSection(sources, (o.now ?? Date.now)())}`;
    case 'dead-letters': {
      const letters = await sources.worker?.deadLetters();
      const actions = sources.worker?.retryDeadLetter !== undefined;
      return html`<h2>Dead letters</h2>
        ${deadLettersSection(letters, { base: CONSOLE_PATH, actions, showData: true })}`;
    }
    default:
      return html`<section>
          <h2>Tasks</h2>
          ${tasksTable(tasks)}
        </section>
        <section>
          <h2>Enqueue an execution</h2>
          ${enqueueForm(tasks)}
        </section>
        <section>
          <h2>Executions</h2>
          ${!sources.worker && html`<p class="note">${NO_WORKER_NOTE}</p>`}${executionsList(sources, { showData: true })}
        </section>`;
  }
}

async function deadLetterAction(
  o: ConsolePagesOptions,
  executionId: string,
  action: 'retry' | 'discard',
  response: ServerResponse,
): Promise<void> {
  const worker = o.sources.worker;
  if (!worker?.retryDeadLetter || !worker.discardDeadLetter) {
    return sendJson(response, 404, { message: 'No worker runs here: dead letters are kept by a worker.' });
  }
  if (action === 'discard') {
    const removed = await worker.discardDeadLetter(executionId);
    return removed
      ? sendJson(response, 200, { discarded: executionId })
      : sendJson(response, 404, { message: `No dead letter of ${executionId} is kept.` });
  }
  const result = await worker.retryDeadLetter(executionId);
  return result.delivered
    ? sendJson(response, 200, { delivered: executionId })
    : sendJson(response, 409, { message: `The report was not accepted: ${result.message}` });
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  response.end(text);
}
