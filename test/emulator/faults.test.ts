import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidFaultRuleError } from '../../src/emulator/index.ts';
import type { Emulator, FaultRule } from '../../src/emulator/index.ts';
import { FAULT_RULES_DOC } from '../../src/emulator/bodies.ts';
import { EMULATOR_OPERATIONS } from '../../src/emulator/routes.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';
import { call, envelope, startEmulator } from './helpers.ts';

const LIST = '/v1/data-factory/tasks';
const UNLIMITED = { perSecond: 0, perMinute: 0, perMonth: 0 };
let emulator: Emulator;

beforeEach(async () => {
  emulator = await startEmulator({ limits: UNLIMITED });
});
afterEach(() => emulator.close());

describe('status faults', () => {
  it('answers the raw status and HTML body instead of handling the request', async () => {
    emulator.setFaults([{ kind: 'status', status: 502, body: '<html>502</html>', contentType: 'text/html' }]);
    const reply = await call(emulator, 'POST', LIST, { body: { key: 'never-created' } });
    expect(reply.status).toBe(502);
    expect(reply.headers.get('content-type')).toBe('text/html');
    expect(reply.text).toBe('<html>502</html>');
    emulator.clearFaults();
    expect((await call(emulator, 'GET', LIST)).json).toMatchObject({ totalElements: 0 });
  });

  it('answers the INTERNAL error envelope when no body is given', async () => {
    emulator.setFaults([{ kind: 'status', status: 500 }]);
    const reply = await call(emulator, 'GET', LIST);
    expect(reply.status).toBe(500);
    expect(reply.json).toEqual(envelope(500, 'INTERNAL'));
  });

  it('applies only to the named operation and task', async () => {
    const a = emulator.createTask({ key: 'a' });
    const b = emulator.createTask({ key: 'b' });
    emulator.setFaults([{ kind: 'status', status: 503, operation: 'tasks.poll', taskId: a.id }]);
    expect((await call(emulator, 'GET', `${LIST}/${a.id}/poll`)).status).toBe(503);
    expect((await call(emulator, 'GET', `${LIST}/${b.id}/poll`)).status).toBe(404);
    expect((await call(emulator, 'GET', `${LIST}/${a.id}`)).status).toBe(200);
  });

  it('stops applying a rule once its count is spent', async () => {
    emulator.setFaults([{ kind: 'status', status: 503, count: 2 }]);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await call(emulator, 'GET', LIST)).status);
    expect(statuses).toEqual([503, 503, 200, 200]);
  });

  it('draws probabilistic rules from the seeded PRNG, so the same seed gives the same outcomes', async () => {
    const rules: FaultRule[] = [{ kind: 'status', status: 500, probability: 0.5 }];
    const outcomes = async (target: Emulator) => {
      target.setFaults(rules);
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await call(target, 'GET', LIST)).status);
      return statuses;
    };
    const twin = await startEmulator({ limits: UNLIMITED, seed: 1 });
    try {
      const first = await outcomes(emulator);
      expect(await outcomes(twin)).toEqual(first);
      expect(first).toContain(200);
      expect(first).toContain(500);
      // setFaults reseeds, so replaying the table replays the outcomes.
      expect(await outcomes(emulator)).toEqual(first);
    } finally {
      await twin.close();
    }
  });

  it('refuses a malformed rule with InvalidFaultRuleError naming the rule', () => {
    const bad = [{ kind: 'status', status: 500 }, { kind: 'explode' }] as unknown as FaultRule[];
    expect(() => emulator.setFaults(bad)).toThrow(InvalidFaultRuleError);
    expect(() => emulator.setFaults(bad)).toThrow(/#1/);
  });

  it("answers a malformed rule with a 400 that points at the rules' format", async () => {
    const reply = await call(emulator, 'PUT', '/__admin/faults', {
      key: null,
      body: { rules: [{ kind: 'slow' }] },
    });
    expect(reply.status).toBe(400);
    expect((reply.json as { message: string }).message).toBe(
      "Fault rule #0 is invalid: kind must be one of 'status', 'rateLimit', 'latency', 'dropAfterApply', 'drop', " +
        "'responseTimeout'. " +
        'The format, with an example of each kind: handlers/README.md#fault-rules (in the df-worker package).',
    );
  });

  it("accepts the guide's example of every kind, and the guide names every operation a rule may target", async () => {
    const guide = await readFile(path.join(REPO_ROOT, 'handlers/README.md'), 'utf8');
    const section = guide.slice(guide.indexOf('\n### Fault rules\n'));
    expect(section).not.toBe(guide);
    expect(FAULT_RULES_DOC).toMatch(/^handlers\/README\.md#fault-rules /);
    const example = /<!-- fault-rules-example:start -->\s*```json\n([\s\S]*?)```/.exec(section)?.[1];
    const { rules } = JSON.parse(example!) as { rules: FaultRule[] };
    expect(new Set(rules.map((rule) => rule.kind))).toEqual(
      new Set(['status', 'rateLimit', 'latency', 'dropAfterApply', 'drop', 'responseTimeout']),
    );
    const reply = await call(emulator, 'PUT', '/__admin/faults', { key: null, body: { rules } });
    expect(reply.status).toBe(204);
    const listed = section.slice(section.indexOf('The operations:'), section.indexOf('One example'));
    expect([...listed.matchAll(/`([\w.]+)`/g)].map((match) => match[1]).sort()).toEqual(
      [...EMULATOR_OPERATIONS].sort(),
    );
  });
});

describe('rate-limit faults', () => {
  it('answers 429 RATE_LIMIT with the Retry-After header when given, and records it as rate limited', async () => {
    emulator.setFaults([{ kind: 'rateLimit', retryAfterSeconds: 7, count: 1 }, { kind: 'rateLimit' }]);
    const withHeader = await call(emulator, 'GET', LIST);
    expect(withHeader.status).toBe(429);
    expect(withHeader.json).toEqual(envelope(429, 'RATE_LIMIT'));
    expect(withHeader.headers.get('retry-after')).toBe('7');
    const without = await call(emulator, 'GET', LIST);
    expect(without.status).toBe(429);
    expect(without.headers.get('retry-after')).toBeNull();
    expect(emulator.requests().map((r) => r.rateLimited)).toEqual([true, true]);
  });
});

describe('latency and dropped connections', () => {
  it('delays the answer by the given real milliseconds, then handles the request', async () => {
    emulator.setFaults([{ kind: 'latency', ms: 100 }]);
    const started = performance.now();
    const reply = await call(emulator, 'POST', LIST, { body: { key: 'slow' } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(95);
    expect(reply.status).toBe(201);
    expect(emulator.requests()[0]!.latencyMs).toBeGreaterThanOrEqual(95);
  });

  it('applies a report, then drops the connection so the client sees a socket error', async () => {
    const task = emulator.createTask({ key: 'k' });
    const execution = emulator.enqueueExecution(task.id);
    emulator.setFaults([{ kind: 'dropAfterApply', operation: 'executions.report' }]);
    const reporting = call(emulator, 'PATCH', `/v1/data-factory/task-executions/${execution.id}`, {
      body: { id: execution.id, status: 'COMPLETED', output: { done: true } },
    });
    await expect(reporting).rejects.toThrow();
    expect(emulator.executions()[0]).toMatchObject({ status: 'COMPLETED', output: { done: true } });
    expect(emulator.requests()[0]).toMatchObject({ operation: 'executions.report', status: 0 });
  });

  it('drops the connection without handling the request', async () => {
    emulator.setFaults([{ kind: 'drop', operation: 'tasks.create' }]);
    await expect(call(emulator, 'POST', LIST, { body: { key: 'lost' } })).rejects.toThrow();
    expect((await call(emulator, 'GET', LIST)).json).toMatchObject({ totalElements: 0 });
    expect(emulator.requests().map((r) => r.status)).toEqual([0, 200]);
  });

  it('closes promptly while a request waits on a long latency fault', async () => {
    emulator.setFaults([{ kind: 'latency', ms: 60_000 }]);
    const waiting = call(emulator, 'GET', LIST);
    await expect.poll(() => emulator.requests().length).toBe(1);
    const started = performance.now();
    await emulator.close();
    expect(performance.now() - started).toBeLessThan(1000);
    await expect(waiting).rejects.toThrow();
  });
});
