// Issue 36, item 3: what a web page can make the local servers do, on the real processes (`df-worker emulator`,
// `df-worker dev`, `df-worker start` with its status page). Requests carry the headers Chromium sends for a page
// of another loopback port (Origin, Sec-Fetch-Site: same-site; test/console/local-guard-browser.test.ts shows
// them in the browser itself), or the Host of a name rebound to 127.0.0.1. Each scenario counts the attacks
// that took effect; the state is read back as a client that is not a browser would.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, type CliProcess } from '../cli/process.ts';
import { waitFor } from '../daemon/harness.ts';
import { withRig } from './rig.ts';

/** The fixed keys of 1a0690a: what a page would try. */
const KNOWN_EMULATOR_KEY = 'emulator-key';
const KNOWN_DEV_KEY = 'dev-key';
const CROSS_SITE = { origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' };
const REBOUND_HOST = 'rebind.attacker.test';
/** What a handler's failure message quotes from its input (the status-page row). */
export const INPUT_SECRET = 'hunter2-INPUT-SECRET';

export interface LocalServerResult {
  /** No attack took effect (and, for the status page, its states still show). */
  completed: boolean;
  /** Attacks tried, and those that took effect, by name. */
  tried: number;
  tookEffect: string[];
  detail: string;
}

interface Sent {
  status: number;
  body: string;
}

function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A form post of a page: text/plain, cross-site. */
const formPost = (url: string, path: string, body: string) =>
  send(url, 'POST', path, { ...CROSS_SITE, 'content-type': 'text/plain;charset=UTF-8' }, body);

function rebound(url: string): Record<string, string> {
  return { host: `${REBOUND_HOST}:${new URL(url).port}` };
}

function result(tried: number, tookEffect: string[], extra = ''): LocalServerResult {
  return {
    completed: tookEffect.length === 0,
    tried,
    tookEffect,
    detail:
      `${tookEffect.length} of ${tried} requests a page can send took effect` +
      (tookEffect.length > 0 ? ` (${tookEffect.join(', ')})` : '') +
      extra,
  };
}

async function stop(cli: CliProcess): Promise<void> {
  if (cli.child.exitCode !== null || cli.child.signalCode !== null) return;
  cli.child.kill('SIGTERM');
  const killer = setTimeout(() => cli.child.kill('SIGKILL'), 10_000);
  await cli.exited;
  clearTimeout(killer);
}

/** `df-worker emulator` with its defaults: no admin token, the default key. */
export async function emulatorFromAnotherSite(): Promise<LocalServerResult> {
  const cli = runCli(['emulator', '--port', '0'], {});
  try {
    await waitFor(() => /emulator listening on http/.test(cli.stdout()), 'the emulator', 20_000);
    const url = /emulator listening on (http:\/\/\S+) /.exec(cli.stdout())![1]!;
    const admin = (method: string, path: string, body?: string) =>
      send(url, method, path, { 'content-type': 'application/json' }, body);
    const task = JSON.parse((await admin('POST', '/__admin/tasks', '{"key":"echo"}')).body) as { id: string };
    await admin('POST', '/__admin/executions', '{"taskKey":"echo","input":{}}');
    const state = async () => ({
      executions: (
        JSON.parse((await admin('GET', '/__admin/executions')).body) as { data: { claimedAt?: string }[] }
      ).data,
      variables: (JSON.parse((await admin('GET', '/__admin/variables')).body) as { data: unknown[] }).data,
      tasks: (JSON.parse((await admin('GET', '/__admin/tasks')).body) as { data: unknown[] }).data,
    });
    const tookEffect: string[] = [];
    await formPost(url, '/__admin/executions', '{"taskKey":"echo","input":{"x":"="}}');
    if ((await state()).executions.length !== 1) tookEffect.push('enqueue through /__admin');
    await formPost(url, '/__admin/variables', '{"key":"planted","value":"="}');
    await formPost(
      url,
      `/v1/data-factory/variables?api_key=${KNOWN_EMULATOR_KEY}`,
      '{"key":"planted2","name":"p","value":"="}',
    );
    const variables = (await state()).variables.length;
    if (variables > 0) tookEffect.push(`${variables} variable(s) created`);
    await send(
      url,
      'GET',
      `/v1/data-factory/tasks/${task.id}/poll?api_key=${KNOWN_EMULATOR_KEY}`,
      CROSS_SITE,
    );
    if ((await state()).executions.some((e) => e.claimedAt !== undefined)) tookEffect.push('a poll claimed');
    await formPost(url, '/__admin/reset', '');
    if ((await state()).tasks.length !== 1) tookEffect.push('reset');
    const read = await send(url, 'GET', '/__admin/tasks', rebound(url));
    if (read.status === 200) tookEffect.push('/__admin read under a foreign Host');
    return result(6, tookEffect);
  } finally {
    await stop(cli);
  }
}

/** `df-worker dev` with a variable holding a secret. */
export async function devFromAnotherSite(): Promise<LocalServerResult> {
  const dir = await mkdtemp(join(tmpdir(), 'df-worker-dev-guard-'));
  await mkdir(join(dir, 'handlers'));
  await writeFile(
    join(dir, 'handlers/greet.ts'),
    `export default { key: 'greet', inputKeys: ['name'], outputKeys: ['text'],
  handle: (input: { name: string }) => ({ text: 'hello ' + input.name }) };\n`,
  );
  const cli = runCli(
    ['dev', '--port', '0', '--state-dir', join(dir, '.state'), '--variable', 'token=hunter2'],
    { DF_HANDLERS_DIR: join(dir, 'handlers') },
    dir,
  );
  try {
    await waitFor(() => /Ctrl-C stops the session/.test(cli.stdout()), 'the dev session', 30_000);
    const out = cli.stdout();
    const url = /emulator on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    const adminToken = /Authorization: Bearer ([0-9a-f]+)/.exec(out)![1]!;
    const workerUrl = /worker: (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    const tookEffect: string[] = [];
    await formPost(
      url,
      `/v1/data-factory/variables?api_key=${KNOWN_DEV_KEY}`,
      '{"key":"planted","name":"p","value":"="}',
    );
    const listed = await send(url, 'GET', '/__admin/variables', { authorization: `Bearer ${adminToken}` });
    if (listed.body.includes('planted')) tookEffect.push('a variable created with the fixed key');
    const leaked = await send(
      url,
      'GET',
      `/v1/data-factory/variables/token?api_key=${KNOWN_DEV_KEY}`,
      rebound(url),
    );
    if (leaked.body.includes('hunter2')) tookEffect.push('a variable read under a foreign Host');
    const wake = await send(workerUrl, 'POST', '/wake', CROSS_SITE);
    if (wake.status === 202) tookEffect.push('/wake from another site');
    const metrics = await send(workerUrl, 'GET', '/metrics', rebound(workerUrl));
    if (metrics.status === 200) tookEffect.push('/metrics under a foreign Host');
    return result(4, tookEffect);
  } finally {
    await stop(cli);
    await rm(dir, { recursive: true, force: true });
  }
}

const LEAKY_HANDLER = `import { defineTask } from 'df-worker';
export default defineTask({
  key: 'leaky',
  inputKeys: ['password'],
  retryCount: 0,
  handle: (input) => { throw new Error('login refused for password ' + input.password); },
});
`;

/** `df-worker start` with DF_HTTP_STATUS_PAGE: a handler fails quoting its input. */
export async function statusPageLeak(
  extraEnv: Record<string, string> = {},
): Promise<LocalServerResult & { page: string }> {
  return withRig({}, async (rig) => {
    await rig.addTask({ key: 'leaky', inputKeys: ['password'] }, LEAKY_HANDLER);
    const execution = rig.emulator.enqueueExecution('leaky', { password: INPUT_SECRET });
    const daemon = rig.start({ DF_HTTP_STATUS_PAGE: 'true', ...extraEnv });
    await rig.started(daemon);
    await rig.waitFor(() => rig.reportsOf(execution.id).length > 0, 'the FAILED report');
    const health = daemon.healthUrl();
    const page = await send(health, 'GET', '/status', {});
    const tookEffect: string[] = [];
    if (page.body.includes(INPUT_SECRET)) tookEffect.push('the input shown on /status');
    const foreign = await send(health, 'GET', '/status', rebound(health));
    if (foreign.status === 200) tookEffect.push('/status under a foreign Host');
    const shown = page.body.includes(`data-execution="${execution.id}"`) && page.body.includes('FAILED');
    const r = result(2, tookEffect, shown ? '; the execution shows FAILED' : '; the execution is not shown');
    return { ...r, completed: r.completed && shown, page: page.body };
  });
}
