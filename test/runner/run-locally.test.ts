import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { defineTask, type TaskContext } from '../../src/handlers/define-task.ts';
import { runTaskLocally } from '../../src/runner/run-locally.ts';
import { drive, recordingLogger } from './helpers.ts';

describe('runTaskLocally', () => {
  it('runs the handler against its own declarations with a local execution', async () => {
    let seen: TaskContext | undefined;
    const handler = defineTask({
      key: 'greet',
      inputKeys: ['name'],
      outputKeys: ['greeting'],
      handle: (input, ctx) => {
        seen = ctx;
        return { greeting: `Hello, ${String(input.name)}` };
      },
    });
    const context = { jobId: 'job-7' };
    const outcome = await runTaskLocally(handler, { name: 'Ada', context });
    expect(outcome).toMatchObject({ status: 'COMPLETED', output: { greeting: 'Hello, Ada' }, attempts: 1 });
    expect(seen?.execution).toMatchObject({
      taskId: 'local',
      status: 'IN_PROGRESS',
      input: { name: 'Ada', context },
    });
    expect(seen?.execution.id).toMatch(/^local-/);
    expect(seen?.task).toEqual({
      key: 'greet',
      retryCount: 0,
      inputKeys: handler.inputKeys,
      outputKeys: handler.outputKeys,
    });
    expect(seen?.job).toEqual(context);
  });

  it("checks the input against the handler's inputKeys", async () => {
    const handler = defineTask({ key: 'greet', inputKeys: ['name'], handle: () => ({}) });
    const outcome = await runTaskLocally(handler, {});
    expect(outcome).toMatchObject({
      status: 'FAILED',
      failure: { kind: 'input' },
      output: { missingInputKeys: ['name'] },
    });
  });

  it('takes a clock, logger, retryCount, timeout and backoff from the options', async () => {
    const clock = new ManualClock(0);
    const { logger, lines } = recordingLogger();
    const handler = defineTask({ key: 'stuck', handle: () => new Promise<never>(() => {}) });
    const outcome = await drive(
      clock,
      runTaskLocally(
        handler,
        {},
        { clock, logger, retryCount: 1, defaultTimeoutMs: 100, backoff: { baseMs: 0, maxMs: 0 } },
      ),
    );
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 2,
      durationMs: 200,
      failure: { kind: 'timeout' },
    });
    expect(lines.filter((l) => l.msg === 'attempt failed; retrying')).toHaveLength(1);
  });
});
