// A task's fields beyond the documented ones (a Conductor definition's timeouts and limits) survive
// `df-worker tasks sync`: read, shown in the plan, sent back unchanged by the PUT that changes retryCount.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { cli, tempDir } from './run-cli.ts';

const API_KEY = 'cli-extra-fields-key-0123';
// The SDK's task fields beyond the service API description (Conductor's task definition).
const CONDUCTOR_FIELDS = {
  timeoutSeconds: 3600,
  timeoutPolicy: 'TIME_OUT_WF',
  responseTimeoutSeconds: 600,
  retryLogic: 'FIXED',
  retryDelaySeconds: 60,
  backoffScaleFactor: 1,
  concurrentExecLimit: 2,
  pollTimeoutSeconds: 30,
  ownerEmail: 'team@example.com',
  inputTemplate: { region: 'eu', nested: [1, { deep: true }] },
};

describe('df-worker tasks sync and the fields it does not manage', () => {
  let emulator: Emulator;
  let env: Record<string, string>;

  beforeEach(async () => {
    emulator = new Emulator({ apiKeys: [API_KEY], limits: { perSecond: 100, perMinute: 1000 } });
    await emulator.listen(0);
    emulator.createTask({ key: 'changed', retryCount: 0, ...CONDUCTOR_FIELDS });
    const handlersDir = await tempDir({
      'changed.mjs': `export default { key: 'changed', retryCount: 3, handle: () => ({}) };\n`,
    });
    env = {
      DF_API_URL: emulator.url,
      DF_API_KEY: API_KEY,
      DF_STATE_DIR: path.join(await tempDir(), 'state'),
      DF_HANDLERS_DIR: handlersDir,
    };
  });

  afterEach(async () => {
    await emulator.close();
  });

  it('reads the extra fields and shows them as kept in the plan', async () => {
    const client = new ServiceClient({ baseUrl: emulator.url, apiKey: API_KEY });
    const [task] = await client.listTasks();
    await client.close();
    expect(task!.extraFields).toEqual(CONDUCTOR_FIELDS);

    const result = await cli(['tasks', 'sync', '--dry-run'], env);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      '~ update changed: retryCount 0 -> 3\n    kept as on the service: timeoutSeconds=3600, ' +
        'timeoutPolicy="TIME_OUT_WF", responseTimeoutSeconds=600, retryLogic="FIXED", retryDelaySeconds=60, ' +
        'backoffScaleFactor=1, concurrentExecLimit=2, pollTimeoutSeconds=30, ownerEmail="team@example.com", ' +
        'inputTemplate={"region":"eu","nested":[1,{"deep":true…\n' +
        '    at once: handler concurrency not set, concurrentExecLimit 2\n',
    );
  });

  it('changes retryCount and sends every extra field back unchanged in the PUT body', async () => {
    // A loopback proxy in front of the emulator keeps the PUT body as it went over the wire.
    const bodies: { method: string; path: string; body: string }[] = [];
    const proxy = createServer((request, response) => {
      void forward(request, emulator.url).then(({ status, headers, body, sent }) => {
        bodies.push({ method: request.method ?? '', path: request.url ?? '', body: sent });
        response.writeHead(status, headers);
        response.end(body);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = proxy.address() as AddressInfo;
      const result = await cli(['tasks', 'sync'], { ...env, DF_API_URL: `http://127.0.0.1:${port}` });
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(result.stdout).toContain('[1/1] updated changed\n');
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
    const puts = bodies.filter((sent) => sent.method === 'PUT');
    expect(puts).toHaveLength(1);
    const body = JSON.parse(puts[0]!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ ...CONDUCTOR_FIELDS, key: 'changed', retryCount: 3 });
    // And the service, which resets what a PUT lacks, still holds them.
    const [after] = emulator.tasks();
    expect(after).toMatchObject({ ...CONDUCTOR_FIELDS, retryCount: 3 });
  });
});

async function forward(
  request: IncomingMessage,
  target: string,
): Promise<{ status: number; headers: Record<string, string>; body: Buffer; sent: string }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const sent = Buffer.concat(chunks).toString('utf8');
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === 'string' && name !== 'host' && name !== 'content-length') headers.set(name, value);
  }
  const answer = await fetch(new URL(request.url ?? '/', target), {
    method: request.method ?? 'GET',
    headers,
    ...(sent === '' ? {} : { body: sent }),
  });
  const answerHeaders: Record<string, string> = {};
  answer.headers.forEach((value, name) => {
    if (name !== 'content-length' && name !== 'transfer-encoding' && name !== 'connection')
      answerHeaders[name] = value;
  });
  return {
    status: answer.status,
    headers: answerHeaders,
    body: Buffer.from(await answer.arrayBuffer()),
    sent,
  };
}
