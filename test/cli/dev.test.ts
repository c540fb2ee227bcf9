// `df-worker dev` as a developer runs it: the session in one process, `dev --enqueue` from a second one, handler
// files edited on disk, and Ctrl-C / SIGTERM, all on loopback.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { runCli, type CliProcess } from './process.ts';
import { cli, tempDir } from './run-cli.ts';
import { READ_SECRET_HANDLER } from './fixtures/read-secret-handler.ts';

let session: CliProcess | undefined;

afterEach(async () => {
  const running = session;
  session = undefined;
  if (!running || running.child.exitCode !== null) return;
  // Stopped as a developer stops it, so that it removes its temp folder; killed if that does not work.
  running.child.kill('SIGTERM');
  const killer = setTimeout(() => running.child.kill('SIGKILL'), 10_000);
  await running.exited;
  clearTimeout(killer);
});

function greet(version: string): string {
  return `export default {
  key: 'greet',
  inputKeys: ['name'],
  outputKeys: ['text'],
  handle: (input: { name: string }) => ({ text: '${version} ' + input.name }),
};
`;
}

interface Started {
  dir: string;
  url: string;
  adminToken: string;
  workerUrl: string;
}

/** Starts `df-worker dev` in a fresh project folder with the greet handler; resolves once it is serving. */
async function startSession(env: Record<string, string> = {}): Promise<Started> {
  const dir = await tempDir({ 'handlers/greet.ts': greet('v1') });
  session = runCli(['dev'], env, dir);
  const s = session;
  await waitFor(
    () => s.stdout().includes('Ctrl-C stops the session.') || s.child.exitCode !== null,
    'the session banner',
    20_000,
  );
  expect(s.stderr()).toBe('');
  const out = s.stdout();
  return {
    dir,
    url: /emulator on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!,
    adminToken: /Authorization: Bearer ([0-9a-f]+)/.exec(out)![1]!,
    workerUrl: /worker: (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!,
  };
}

/** `df-worker dev --enqueue greet {"name": name}` from a second process, run to its end. */
function enqueue(dir: string, name: string, ...flags: string[]) {
  return cli(['dev', '--enqueue', 'greet', JSON.stringify({ name }), ...flags], {}, dir);
}

/** The times `--enqueue` printed: from the enqueue to the claim, and to the report, in ms. */
function timesOf(stdout: string): { pickupMs: number; reportedMs: number } {
  const match = /picked up (\d+) ms after the enqueue, reported after (\d+) ms/.exec(stdout);
  if (!match) throw new Error(`no times in: ${stdout}`);
  return { pickupMs: Number(match[1]), reportedMs: Number(match[2]) };
}

/**
 * Resolves once the emulator has had no request for 1.2 s: the daemon's per-second budget (5, the service's
 * limit, plus its 200 ms safety margin) is then free, as it is when a developer enqueues by hand. Back-to-back
 * enqueues (a poll, a re-poll and a report each) can find the window full and wait for it, up to 1.2 s.
 */
async function quietBudgetWindow(started: Started): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const answer = await fetch(`${started.url}/__admin/requests`, {
      headers: { authorization: `Bearer ${started.adminToken}` },
    });
    const { data } = (await answer.json()) as { data: { at: number }[] };
    const last = Math.max(0, ...data.map((r) => r.at));
    const quietFor = Date.now() - last;
    if (quietFor >= 1_200) return;
    if (Date.now() > deadline) throw new Error('the emulator never went quiet for 1.2 s');
    await new Promise((resolve) => setTimeout(resolve, 1_200 - quietFor));
  }
}

function children(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((n) => n > 0);
  } catch {
    return []; // ps exits 1 when it lists nothing
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('df-worker dev', () => {
  it('holds each --variable in its emulator from the start, so a handler finds it with ctx.service.variables.get', async () => {
    const dir = await tempDir({ 'handlers/read-secret.ts': READ_SECRET_HANDLER });
    const args = ['dev', '--variable', 'api-token=s3cret', '--variable', 'region=eu-north-1'];
    session = runCli(args, { DF_CONCURENCY: '2' }, dir);
    const s = session;
    await waitFor(() => s.stdout().includes('Ctrl-C stops the session.'), 'the session banner', 20_000);
    expect(s.stdout()).toContain('  variables: api-token, region (ctx.service.variables.get(id); ');
    expect(s.stderr()).toContain(
      'df-worker dev: warning DFW_CONFIG_UNKNOWN_SETTING: DF_CONCURENCY is not a df-worker setting; did you mean DF_CONCURRENCY?\n',
    );
    const result = await cli(['dev', '--enqueue', 'read-secret', '{}'], {}, dir);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      JSON.stringify({ token: 's3cret', region: 'eu-north-1', etag: '"1"' }, null, 2),
    );
  });

  it('starts the emulator and the daemon, prints URL, key and admin token, and writes the session file', async () => {
    const { dir, url, adminToken, workerUrl } = await startSession();
    const out = session!.stdout();
    // A key of this session alone, never the former fixed 'dev-key'.
    const apiKey = /\(API key ([0-9a-f]{32}), this session's alone\)/.exec(out)?.[1];
    expect(apiKey).toBeDefined();
    expect(out).toMatch(/^ {2}\+ create greet$/m);
    expect(out).toMatch(/handlers: handlers \(watched\): greet/);

    const file = JSON.parse(await readFile(path.join(dir, '.state/dev-session.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(file).toMatchObject({ pid: session!.child.pid, url, apiKey, adminToken, workerUrl });

    // The admin root lists the routes to anyone; the routes themselves want the token.
    const index = (await (await fetch(`${url}/__admin/`)).json()) as { routes: string[] };
    expect(index.routes).toContain(
      'POST /__admin/executions: enqueues an execution: {taskKey | taskId, input?, context?}, or several with {..., inputs: [...]}',
    );
    expect((await fetch(`${url}/__admin/executions`)).status).toBe(401);
    const listed = await fetch(`${url}/__admin/tasks`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(((await listed.json()) as { data: { key: string }[] }).data.map((t) => t.key)).toEqual(['greet']);
    // The worker's wake endpoint takes the session's token, printed with the worker's URL.
    const wakeToken = /POST \/wake with Authorization: Bearer ([0-9a-f]{32})/.exec(out)![1]!;
    expect((await fetch(`${workerUrl}/wake?task=greet`, { method: 'POST' })).status).toBe(401);
    const woken = await fetch(`${workerUrl}/wake?task=greet`, {
      method: 'POST',
      headers: { authorization: `Bearer ${wakeToken}` },
    });
    expect(woken.status).toBe(202);

    const unknown = await cli(['dev', '--enqueue', 'nope'], {}, dir);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('the dev session has no task "nope"; its tasks: greet');

    // A second session on the same state folder is refused, naming the first.
    const second = await cli(['dev'], {}, dir);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(
      `a dev session already runs for this state folder (pid ${session!.child.pid}`,
    );
  });

  it('runs an execution enqueued from a second process: picked up at once, all but one figure under a second', async () => {
    const started = await startSession();
    const { dir, url, adminToken } = started;
    const measured: { pickupMs: number; reportedMs: number }[] = [];
    for (let i = 0; i < 3; i++) {
      await quietBudgetWindow(started);
      const result = await enqueue(dir, `Ada ${i}`);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(result.stdout).toContain(`"text": "v1 Ada ${i}"`);
      measured.push(timesOf(result.stdout));
    }
    // The admin route with curl's request wakes the worker just the same.
    await quietBudgetWindow(started);
    const postedAt = Date.now();
    const byCurl = await fetch(`${url}/__admin/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ taskKey: 'greet', input: { name: 'curl' } }),
    });
    expect(byCurl.status).toBe(201);
    await waitFor(() => session!.stdout().includes('{"text":"v1 curl"}'), 'the admin-route execution', 5_000);
    const line = session!
      .stdout()
      .split('\n')
      .find((l) => l.includes('{"text":"v1 curl"}'))!;
    const curlPickupMs = Number(/picked up in (\d+) ms/.exec(line)![1]);
    console.log(
      `dev loop pickup after an enqueue (--enqueue, 3 runs): ${measured.map((m) => `${m.pickupMs} ms (reported ${m.reportedMs} ms)`).join(', ')}; ` +
        `by the admin route: ${curlPickupMs} ms (seen by the test ${Date.now() - postedAt} ms after the POST)`,
    );
    // Woken, not left to the idle pace (65 s for one task at 40,000 a month): every enqueue is picked up and
    // reported in a small fraction of it even on a busy machine, and all but one figure in under a second (one
    // of a loaded run took 1,068 ms: a single figure is the CPU scheduler's to decide, not the daemon's).
    const figures = [...measured.flatMap((m) => [m.pickupMs, m.reportedMs]), curlPickupMs];
    for (const ms of figures) expect(ms).toBeLessThan(5_000);
    expect(figures.filter((ms) => ms >= 1_000).length, figures.join(', ')).toBeLessThanOrEqual(1);
  });

  it('reloads an edited handler: the next execution runs the new code', async () => {
    const { dir } = await startSession();
    expect((await enqueue(dir, 'Ada')).stdout).toContain('"text": "v1 Ada"');
    await writeFile(path.join(dir, 'handlers/greet.ts'), greet('v2'));
    await waitFor(() => session!.stdout().includes('greet.ts changed'), 'the reload', 10_000);
    expect((await enqueue(dir, 'Ada')).stdout).toContain('"text": "v2 Ada"');

    // Editors often save by writing a new file and renaming it over the old one: still seen.
    const reloads = session!.stdout().split('greet.ts changed').length;
    await writeFile(path.join(dir, 'handlers/.greet.ts.swp'), greet('v3'));
    await rename(path.join(dir, 'handlers/.greet.ts.swp'), path.join(dir, 'handlers/greet.ts'));
    await waitFor(
      () => session!.stdout().split('greet.ts changed').length > reloads,
      'the reload after a rename',
      10_000,
    );
    expect((await enqueue(dir, 'Ada')).stdout).toContain('"text": "v3 Ada"');
  });

  it('reports a handler that no longer loads and pauses its task until it is fixed; the session goes on', async () => {
    const { dir } = await startSession();
    await writeFile(path.join(dir, 'handlers/greet.ts'), "export default { key: 'greet', handle( => 1 };\n");
    await waitFor(() => session!.stdout().includes('task greet paused'), 'the pause', 10_000);
    expect(session!.stdout()).toMatch(/✖ handlers\/greet\.ts: syntax error: .*\(line 1\)/);

    const waiting = await enqueue(dir, 'Ada', '--wait-ms', '500');
    expect(waiting.code).toBe(1);
    expect(waiting.stderr).toContain('was not picked up within 500 ms');

    await writeFile(path.join(dir, 'handlers/greet.ts'), greet('v2'));
    await waitFor(() => session!.stdout().includes('task greet resumed'), 'the resume', 10_000);
    // The execution queued while the task was paused runs on the fixed code.
    await waitFor(() => session!.stdout().includes('{"text":"v2 Ada"}'), 'the queued execution', 5_000);
    expect(session!.child.exitCode).toBeNull();
  });

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'stops on %s: exit 0, session file removed, no handler process left behind',
    async (signal) => {
      const { dir } = await startSession({ DF_HANDLER_ISOLATION: 'process' });
      expect((await enqueue(dir, 'Ada')).code).toBe(0);
      const pid = session!.child.pid!;
      const handlerProcesses = children(pid);
      expect(handlerProcesses.length).toBeGreaterThan(0);
      const sent = Date.now();
      session!.child.kill(signal);
      const { code } = await session!.exited;
      console.log(`dev session stopped on ${signal} in ${Date.now() - sent} ms`);
      expect(code).toBe(0);
      expect(handlerProcesses.filter(alive)).toEqual([]);
      await expect(readFile(path.join(dir, '.state/dev-session.json'))).rejects.toThrow(/ENOENT/);
      const after = await enqueue(dir, 'Ada');
      expect(after.code).toBe(1);
      expect(after.stderr).toContain('no dev session found');
    },
  );

  it('--enqueue with no session running says how to start one', async () => {
    const dir = await tempDir({});
    await mkdir(path.join(dir, '.state'));
    await writeFile(
      path.join(dir, '.state/dev-session.json'),
      JSON.stringify({
        pid: 2 ** 22 + 17, // above Linux's pid_max default: no such process
        url: 'http://127.0.0.1:9',
        apiKey: 'k',
        adminToken: 't',
        workerUrl: '',
        handlersDir: dir,
        startedAt: new Date().toISOString(),
      }),
    );
    const stale = await enqueue(dir, 'Ada');
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/no dev session is running: .* was left by process \d+, which is gone/);
    // Run from this repo's source, the command to start one is the npm script that works in a clone.
    expect(stale.stderr).toContain('start one with `npm run cli -- dev`');
    const bad = await cli(['dev', '--enqueue', 'greet', '{"name":'], {}, dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('the input is not valid JSON: unexpected end of input');
  });
});
