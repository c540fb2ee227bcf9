// The core's one event surface: what a listener hears of one execution, in order, and the metrics that the
// telemetry listener derives from the same events.
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkerEventMap } from '../../src/events/worker-events.ts';
import { startHarness, waitFor, type Harness } from './harness.ts';

type Heard = { [K in keyof WorkerEventMap]: { event: K } & WorkerEventMap[K][0] }[keyof WorkerEventMap];

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function record(h: Harness): Heard[] {
  const heard: Heard[] = [];
  const names: (keyof WorkerEventMap)[] = [
    'poll',
    'pollAnswerLost',
    'response',
    'rateLimited',
    'tasks',
    'claim',
    'attempt',
    'outcome',
    'report',
    'replay',
    'journal',
    'handlerWorker',
    'lease',
  ];
  for (const name of names) {
    h.worker.events.on(name, (payload: object) => heard.push({ event: name, ...payload } as Heard));
  }
  return heard;
}

describe('the core event surface', () => {
  it('tells one execution from claim to report: two attempts (the first failed), the outcome, the report', async () => {
    let calls = 0;
    harness = await startHarness({
      start: false,
      settings: { 'handlers.isolation': 'none' },
      handlers: [
        {
          key: 'flaky',
          retryCount: 1,
          handle: () => {
            calls++;
            if (calls === 1) throw new Error('first attempt fails (key test-key must not show)');
            return { ok: true };
          },
        },
      ],
    });
    const heard = record(harness);
    await harness.worker.start();
    const e = harness.emulator.enqueueExecution('flaky', {});
    harness.worker.wake();
    await waitFor(() => heard.some((h) => h.event === 'report' && h.executionId === e.id), 'the report');

    expect(heard.find((h) => h.event === 'tasks')).toMatchObject({ served: ['flaky'], withoutTask: [] });
    expect(heard.some((h) => h.event === 'poll' && h.task === 'flaky' && h.result === 'hit')).toBe(true);
    const ofExecution = heard.filter((h) => 'executionId' in h && h.executionId === e.id);
    expect(
      ofExecution.map((h) => (h.event === 'attempt' ? `attempt ${h.phase} ${h.attempt}` : h.event)),
    ).toEqual([
      'claim',
      'attempt start 1',
      'attempt end 1',
      'attempt start 2',
      'attempt end 2',
      'outcome',
      'report',
    ]);
    const [, , failed, , succeeded, outcome, report] = ofExecution;
    expect(failed).toMatchObject({ result: 'threw', error: { name: 'Error' } });
    expect(JSON.stringify(failed)).toContain('first attempt fails');
    expect(JSON.stringify(heard)).not.toContain('test-key');
    expect(succeeded).toMatchObject({ result: 'returned' });
    expect(outcome).toMatchObject({ outcome: { status: 'COMPLETED', attempts: 2 } });
    expect(report).toMatchObject({ result: 'delivered', attempts: 1 });
    // The standalone journal's counts follow the report.
    expect(heard.some((h) => h.event === 'journal' && h.pending === 0)).toBe(true);
    // Every request the service answered was heard once, as a 'response'. The poll loop goes on after the report:
    // a poll the emulator has recorded may not be answered yet (one behind, seen beside busy loops), so the two
    // counts are compared once they settle, and a response is never heard ahead of its request.
    const responses = () => heard.filter((h) => h.event === 'response').length;
    expect(responses()).toBeLessThanOrEqual(harness.emulator.requests().length);
    await waitFor(() => responses() === harness!.emulator.requests().length, 'every request answered, heard');

    // The metrics are what the telemetry listener made of the same events.
    const metrics = await harness.worker.metrics.render();
    expect(metrics).toMatch(/dfworker_executions_total\{task="flaky",outcome="COMPLETED"\} 1/);
    expect(metrics).toMatch(/dfworker_reports_total\{task="flaky",result="delivered"\} 1/);
    expect(metrics).toMatch(/dfworker_polls_total\{task="flaky",result="hit"\} [1-9]/);
    expect(metrics).toMatch(/dfworker_executions_in_flight 0/);
  });
});
