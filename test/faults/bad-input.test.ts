// Bad input from the service: malformed poll answers, and an execution of a task no handler here serves.
import { describe, expect, it } from 'vitest';
import { badInputFromService } from './scenarios.ts';

describe('bad input from the service', () => {
  it('logs each malformed poll answer, reports what it can FAILED, never crashes and keeps serving both tasks', async () => {
    const result = await badInputFromService();
    expect(result.daemonRunning).toBe(true);
    const [notJson, noId, badInput, unserved] = result.problems;
    expect(notJson?.err).toMatch(/tasks\.poll answer 200 is not JSON/);
    expect(noId?.err).toMatch(/lacks string field 'id'/);
    expect(badInput?.err).toMatch(/field 'input' is not an object/);
    expect(unserved?.msg).toMatch(/no handler/);

    // The execution handed out with an unusable input is failed, so its job does not wait forever.
    expect(result.inputNotObject.reports).toEqual([
      {
        status: 'FAILED',
        output: expect.objectContaining({
          error: expect.stringMatching(/input.*not an object/) as unknown,
        }) as unknown,
      },
    ]);
    // An execution of a task without a handler here is failed, naming the task; no other handler runs it.
    expect(result.unservedTask.reports).toEqual([
      {
        status: 'FAILED',
        output: expect.objectContaining({
          error: expect.stringContaining(result.unservedTask.taskId) as unknown,
        }) as unknown,
      },
    ]);
    expect(result.unservedTask.runs).toBe(0);
    expect(result.figures.lost).toBe(0);
    expect(result.figures.duplicated).toBe(0);
    expect(result.tally.wrong).toBe(0);
    // Both tasks are still served: the workload's executions (checked against their inputs by the tally
    // above) and the second task's.
    expect(result.afterwards.workload.map((reports) => reports.length)).toEqual([1, 1]);
    for (const { text, reports } of result.afterwards.second) {
      expect(reports).toEqual([{ status: 'COMPLETED', output: { shout: text.toUpperCase() } }]);
    }
  }, 30_000);
});
