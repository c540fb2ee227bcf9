// What the console keeps of a worker's executions, heard from the daemon's own event surface and log lines; and
// the month's pace chart.
import { describe, expect, it } from 'vitest';
import { evenPaceAt, monthPaceChart, UsageSamples } from '../../src/console/budget-chart.ts';
import { ExecutionRecorder } from '../../src/console/execution-record.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';

function line(fields: Record<string, unknown>): string {
  return JSON.stringify({ level: 30, time: '2026-11-28T10:00:00.000Z', name: 'df-worker', ...fields });
}

describe('ExecutionRecorder', () => {
  it("keeps each attempt's duration, result and log lines, and the outcome and report", () => {
    let now = 1_000;
    const recorder = new ExecutionRecorder({ now: () => now });
    const events = new WorkerEvents();
    recorder.listen(events);
    events.emit('claim', { task: 'greet', executionId: 'e1', resumed: false });
    events.emit('attempt', { task: 'greet', executionId: 'e1', attempt: 1, phase: 'start' });
    recorder.logLine(line({ taskKey: 'greet', executionId: 'e1', attempt: 1, msg: 'hello', rows: 3 }));
    now = 1_050;
    events.emit('attempt', {
      task: 'greet',
      executionId: 'e1',
      attempt: 1,
      phase: 'end',
      durationMs: 50,
      result: 'threw',
      error: { name: 'Error', message: 'boom' },
    });
    // A line relayed from a handler worker may come before its attempt's start is heard.
    recorder.logLine(line({ level: 40, executionId: 'e1', attempt: 2, msg: 'early' }));
    events.emit('attempt', { task: 'greet', executionId: 'e1', attempt: 2, phase: 'start' });
    events.emit('outcome', {
      task: 'greet',
      executionId: 'e1',
      outcome: { status: 'COMPLETED', output: {}, attempts: 2, durationMs: 80 },
    });
    events.emit('report', {
      task: 'greet',
      executionId: 'e1',
      result: 'delivered',
      attempts: 1,
      status: 'COMPLETED',
    });
    recorder.logLine(line({ executionId: 'e1', msg: 'execution reported' }));
    recorder.logLine('not json');
    recorder.logLine(line({ msg: 'no execution' }));

    const [record] = recorder.all();
    expect(record).toMatchObject({
      executionId: 'e1',
      task: 'greet',
      outcome: { status: 'COMPLETED', attempts: 2, durationMs: 80 },
      report: { result: 'delivered', attempts: 1 },
      lines: [{ msg: 'execution reported', level: 'info' }],
    });
    expect(record!.attempts).toEqual([
      {
        attempt: 1,
        startedAt: 1_000,
        durationMs: 50,
        result: 'threw',
        error: { name: 'Error', message: 'boom' },
        lines: [{ at: '2026-11-28T10:00:00.000Z', level: 'info', msg: 'hello', fields: '{"rows":3}' }],
      },
      { attempt: 2, startedAt: 1_050, lines: [expect.objectContaining({ level: 'warn', msg: 'early' })] },
    ]);
  });

  it('forgets the oldest executions past its bound, and lines past its per-attempt bound', () => {
    const recorder = new ExecutionRecorder({ maxExecutions: 2, maxLinesPerAttempt: 1 });
    for (const id of ['a', 'b', 'c']) recorder.logLine(line({ executionId: id, attempt: 1, msg: 'one' }));
    recorder.logLine(line({ executionId: 'c', attempt: 1, msg: 'two' }));
    expect(recorder.all().map((r) => r.executionId)).toEqual(['c', 'b']);
    expect(recorder.get('c')!.attempts[0]!.lines.map((l) => l.msg)).toEqual(['one']);
  });

  it('keeps a few thousand characters of a line that logs a large object, saying how long it was', () => {
    const recorder = new ExecutionRecorder();
    const rows = Array.from({ length: 50_000 }, (_, n) => n);
    recorder.logLine(line({ executionId: 'big', attempt: 1, msg: 'x'.repeat(10_000), rows }));
    const [kept] = recorder.get('big')!.attempts[0]!.lines;
    expect(kept!.msg.length).toBeLessThan(2_100);
    expect(kept!.msg).toMatch(/… \(10000 characters\)$/);
    expect(kept!.fields.length).toBeLessThan(2_100);
    expect(kept!.fields).toMatch(/^\{"rows":\[0,1,2,/);
  });
});

describe("the month's pace chart", () => {
  const month = { startsAt: Date.UTC(2026, 10, 1), endsAt: Date.UTC(2026, 11, 1), limit: 40_000 };

  it('draws used against the even pace, which reaches the limit at the end of the month', () => {
    const halfway = Date.UTC(2026, 10, 16);
    expect(evenPaceAt(month, halfway)).toBe(20_000);
    const svg = monthPaceChart({ ...month, samples: [[halfway - 60_000, 100]], nowMs: halfway, used: 120 });
    expect(svg).toContain('class="even-pace"');
    expect(svg).toContain('class="used"');
    expect(svg).toContain('used: 120');
    expect(svg).toContain("even pace: 20000 by now, 40000 by the month's end");
  });

  it('keeps one sample per interval unless the count moved, and halves them when full', () => {
    const samples = new UsageSamples(1_000, 4);
    samples.add(0, 1);
    samples.add(500, 1);
    samples.add(600, 2);
    for (let i = 1; i <= 3; i++) samples.add(1_000 * i + 600, 2 + i);
    expect(samples.all.length).toBeLessThanOrEqual(4);
    expect(samples.all[0]).toEqual([0, 1]);
  });
});
