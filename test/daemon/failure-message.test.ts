// FAILED reports as the service's jobs read them: `message` beside df-worker's keys, whichever part of
// df-worker failed the execution (the handler, the input check, no handler at all).
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, waitFor, type Harness } from './harness.ts';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const reportOf = (h: Harness, id: string) => h.emulator.execution(id)?.reports[0];

describe('FAILED outputs', () => {
  it('carry message and keep error, errorName and attempts when the handler throws', async () => {
    harness = await startHarness({
      handlers: [
        {
          key: 'fails',
          handle: () => {
            throw new Error('the upstream refused the file');
          },
        },
      ],
    });
    const execution = harness.emulator.enqueueExecution('fails', {});
    harness.worker.wake();
    await waitFor(() => reportOf(harness!, execution.id) !== undefined, 'the FAILED report');
    const report = reportOf(harness, execution.id)!;
    expect(report.status).toBe('FAILED');
    expect(report.output).toMatchObject({ errorName: 'Error', attempts: 1 });
    expect(typeof report.output.error).toBe('string');
    expect(report.output.message).toBe(report.output.error);
    expect(report.output.message).toContain('the upstream refused the file');
  });

  it('carry message when an input key is missing and the handler is never called', async () => {
    harness = await startHarness({ handlers: [{ key: 'needs', inputKeys: ['text'], handle: () => ({}) }] });
    const execution = harness.emulator.enqueueExecution('needs', {});
    harness.worker.wake();
    await waitFor(() => reportOf(harness!, execution.id) !== undefined, 'the FAILED report');
    const { output } = reportOf(harness, execution.id)!;
    expect(output).toMatchObject({ missingInputKeys: ['text'] });
    expect(output.message).toBe(output.error);
    expect(output.message).toContain('text');
  });
});
