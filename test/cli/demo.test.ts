// `df-worker demo`, the front page's first command: each reported execution is printed with the input it was given,
// and the first nine include a bad-data failure and one for a missing input key, named.
import { describe, expect, it } from 'vitest';
import { runTaskLocally } from '../../src/index.ts';
import { demoInput, MISSING_KEY_AT } from '../../src/cli/demo-feed.ts';
import { compactJson, INPUT_PREVIEW_CHARS, outcomeLine } from '../../src/cli/demo-output.ts';
import csvToRecords from '../../handlers/csv-to-records.ts';
import enrichProduct from '../../handlers/enrich-product.ts';
import notifyWebhook from '../../handlers/notify-webhook.ts';
import { cli } from './run-cli.ts';

// In the loader's order (file names sorted), as the demo gets them.
const EXAMPLES = [csvToRecords, enrichProduct, notifyWebhook];

describe('the demo feed', () => {
  it('lacks a declared input key in its fifth execution, whatever the handlers', () => {
    const fifth = demoInput(MISSING_KEY_AT, EXAMPLES, 'http://127.0.0.1:1/hook');
    expect(MISSING_KEY_AT).toBeLessThan(9);
    expect(fifth.taskKey).toBe('enrich-product');
    expect(Object.keys(fifth.input)).toEqual(['sku', 'title', 'price']);
    const other = { ...csvToRecords, key: 'my-task', inputKeys: [{ key: 'a', description: '' }] };
    expect(demoInput(MISSING_KEY_AT, [other], '').input).toEqual({});
    expect(demoInput(MISSING_KEY_AT - 1, [other], '').input).toEqual({ a: 'demo a 4' });
  });

  it('fails two of the first nine on the example handlers: a missing key and bad data', async () => {
    const outcomes = [];
    for (let i = 0; i < 9; i++) {
      const { taskKey, input } = demoInput(i, EXAMPLES, 'http://127.0.0.1:9/hook');
      if (taskKey === 'notify-webhook') continue; // it would post to the webhook: run by the demo below
      const task = EXAMPLES.find((handler) => handler.key === taskKey)!;
      outcomes.push({ i, taskKey, ...(await runTaskLocally(task, input)) });
    }
    const failed = outcomes.filter((outcome) => outcome.status === 'FAILED');
    expect(failed).toMatchObject([
      { i: 4, taskKey: 'enrich-product', attempts: 0, output: { missingInputKeys: ['currency'] } },
      { i: 6, taskKey: 'csv-to-records', attempts: 1, output: { errorName: 'NonRetryableError' } },
    ]);
  });
});

describe('an outcome line', () => {
  it('shows the input without the job context, and the output, each as one line of JSON', () => {
    const line = outcomeLine({
      id: 'execution-7',
      taskKey: 'csv-to-records',
      input: { csv: 'a,b\n"unterminated,2\n', context: { jobId: 'job-1' } },
      status: 'FAILED',
      output: { error: 'line 2: quoted field is never closed' },
      tookMs: 1_250,
    });
    expect(line).toBe(
      '✖ execution-7 csv-to-records FAILED in 1.3 s  input {"csv":"a,b\\n\\"unterminated,2\\n"}  ' +
        '→ {"error":"line 2: quoted field is never closed"}',
    );
  });

  it('cuts a long input to its preview length, ending in …', () => {
    const long = compactJson({ title: 'x'.repeat(500) }, INPUT_PREVIEW_CHARS);
    expect(long).toHaveLength(INPUT_PREVIEW_CHARS);
    expect(long.endsWith('…')).toBe(true);
    expect(compactJson({ a: 1 }, INPUT_PREVIEW_CHARS)).toBe('{"a":1}');
  });
});

describe('df-worker demo --executions 9', () => {
  it('prints nine outcomes with their input, two FAILED: the missing key named, then bad data', async () => {
    const result = await cli(['demo', '--executions', '9', '--interval-ms', '400'], {
      DF_LOG_LEVEL: 'error',
    });
    expect(result.code, result.stderr).toBe(0);
    const outcomes = result.stdout.split('\n').filter((line) => /^[✔✖] /.test(line));
    expect(outcomes).toHaveLength(9);
    for (const line of outcomes) expect(line).toMatch(/ (COMPLETED|FAILED) .* {2}input \{.*[}…] {2}→ [{[]/);
    const failed = outcomes.filter((line) => line.startsWith('✖'));
    expect(failed).toHaveLength(2);
    expect(failed[0]).toMatch(
      /^✖ execution-5 enrich-product FAILED .*"sku":"MUG-7".*missing input key \\"currency\\"/,
    );
    expect(failed[1]).toMatch(
      /^✖ execution-7 csv-to-records FAILED .*unterminated.*quoted field is never closed/,
    );
    expect(result.stdout).toMatch(/demo: 9 executions reported, \d+ requests to the service, 0 answered 429/);
  }, 60_000);
});
