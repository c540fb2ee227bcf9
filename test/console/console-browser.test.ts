// The local web console in a real browser (headless Chromium) against a real `df-worker dev`: an execution
// enqueued from the page's form reaches COMPLETED with its attempt and its log line; a flaky one shows two
// attempts; variables and file records are created, edited and deleted; dead letters are sent again or
// discarded. One browser and one session serve every test.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { launchChromium, startConsoleSession, type ConsoleSession } from './console-session.ts';

let browser: Browser;
let session: ConsoleSession;
let page: Page;

beforeAll(async () => {
  // The browser first: without one the test fails at once, with no session left running.
  browser = await launchChromium();
  session = await startConsoleSession();
}, 45_000);

// A tab of its own for each test: a reload an earlier test's form started cannot cut the next test's navigation.
beforeEach(async () => {
  await page?.close();
  page = await browser.newPage();
  // The printed URL carries the admin token in its fragment; the page keeps it for the tab's life.
  await page.goto(session.consoleUrl);
});

afterAll(async () => {
  await browser?.close();
  await session?.stop();
});

/** The execution the page lists first (the newest), once its status reads `status`. */
async function newestExecution(status: string) {
  const item = page.locator('details.execution').first();
  await expect.poll(() => item.getAttribute('data-status'), { timeout: 20_000 }).toBe(status);
  return item;
}

async function enqueueFromForm(task: string, input: string): Promise<void> {
  await page.goto(session.consoleUrl.split('#')[0]!);
  await page.selectOption('#enqueue select[name=taskKey]', task);
  await page.fill('#enqueue textarea[name=input]', input);
  const before = await page.locator('details.execution').count();
  await page.click('#enqueue button[type=submit]');
  await expect.poll(() => page.locator('details.execution').count(), { timeout: 10_000 }).toBe(before + 1);
}

describe('the local web console', () => {
  it('enqueues from its form and shows the execution COMPLETED with its attempt and log line', async () => {
    await enqueueFromForm('greet', '{"name": "Ada"}');
    const execution = await newestExecution('COMPLETED');
    await execution.locator('summary').click();
    await expect.poll(() => execution.locator('.attempt').count(), { timeout: 10_000 }).toBe(1);
    const attempt = execution.locator('.attempt[data-attempt="1"]');
    expect(await attempt.getAttribute('data-result')).toBe('returned');
    expect(await attempt.locator('.log-line').allTextContents()).toContainEqual(
      expect.stringContaining('greeting Ada'),
    );
    expect(await execution.locator('pre.output').textContent()).toContain('hello Ada');
  });

  it('says what is wrong with an input that is not a JSON object, and sends nothing', async () => {
    await page.goto(session.consoleUrl.split('#')[0]!);
    const before = await page.locator('details.execution').count();
    await page.fill('#enqueue textarea[name=input]', '{"name": ');
    await page.click('#enqueue button[type=submit]');
    await expect.poll(() => page.locator('#enqueue .form-error').textContent()).toContain('not valid JSON');
    await page.fill('#enqueue textarea[name=input]', '["Ada"]');
    await page.click('#enqueue button[type=submit]');
    await expect
      .poll(() => page.locator('#enqueue .form-error').textContent())
      .toContain('must be a JSON object');
    expect(await page.locator('details.execution').count()).toBe(before);
  });

  it('shows a <script> in an input as text, never running it', async () => {
    await enqueueFromForm(
      'greet',
      JSON.stringify({ name: '<script>window.injected = 1</script><b>bold</b>' }),
    );
    const execution = await newestExecution('COMPLETED');
    await execution.locator('summary').click();
    expect(await execution.locator('pre.input').textContent()).toContain(
      '<script>window.injected = 1</script>',
    );
    expect(await execution.locator('pre.input b').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { injected?: number }).injected)).toBeUndefined();
  });

  it('shows both attempts of an execution that fails its first attempt and passes its second', async () => {
    await enqueueFromForm('flaky', '{"name": "Grace"}');
    const execution = await newestExecution('COMPLETED');
    await execution.locator('summary').click();
    await expect.poll(() => execution.locator('.attempt').count()).toBe(2);
    expect(await execution.locator('.attempt[data-attempt="1"]').getAttribute('data-result')).toBe('threw');
    expect(await execution.locator('.attempt[data-attempt="1"]').textContent()).toContain(
      'the first attempt fails',
    );
    expect(await execution.locator('.attempt[data-attempt="2"]').getAttribute('data-result')).toBe(
      'returned',
    );
    expect(await execution.locator('.attempt[data-attempt="2"] .log-line').allTextContents()).toContainEqual(
      expect.stringContaining('flaky attempt 2 for Grace'),
    );
  });

  it('creates, edits and deletes a variable', async () => {
    await page.goto(`${session.url}/console/records`);
    await page.fill('#new-variable input[name=key]', 'region');
    await page.fill('#new-variable input[name=value]', 'eu-west');
    await page.click('#new-variable button[type=submit]');
    const row = page.locator('tr[data-variable="region"]');
    await row.waitFor({ timeout: 10_000 });
    expect(await row.locator('input[name=value]').inputValue()).toBe('eu-west');

    await row.locator('input[name=value]').fill('us-east');
    await row.locator('form.edit-variable button[type=submit]').click();
    await expect.poll(() => row.locator('td').nth(2).textContent(), { timeout: 10_000 }).toBe('"2"');
    expect(await row.locator('input[name=value]').inputValue()).toBe('us-east');
    const stored = (await (await session.admin('GET', '/__admin/variables')).json()) as {
      data: { key: string; value: string }[];
    };
    expect(stored.data).toContainEqual(expect.objectContaining({ key: 'region', value: 'us-east' }));

    await row.locator('form.delete-variable button[type=submit]').click();
    await expect.poll(() => page.locator('tr[data-variable="region"]').count(), { timeout: 10_000 }).toBe(0);
  });

  it('adds, renames and deletes a file record', async () => {
    await page.goto(`${session.url}/console/records`);
    await page.fill('#new-file input[name=name]', 'prices.csv');
    await page.fill('#new-file textarea[name=content]', 'sku,price\nA,1\n');
    await page.click('#new-file button[type=submit]');
    const row = page.locator('tr[data-file="prices.csv"]');
    await row.waitFor({ timeout: 10_000 });
    expect(await row.textContent()).toContain('14 bytes');

    await row.locator('input[name=name]').fill('prices-2026.csv');
    await row.locator('form.rename-file button[type=submit]').click();
    const renamed = page.locator('tr[data-file="prices-2026.csv"]');
    await renamed.waitFor({ timeout: 10_000 });
    await renamed.locator('form.delete-file button[type=submit]').click();
    await expect.poll(() => page.locator('tr[data-file]').count(), { timeout: 10_000 }).toBe(0);
  });

  it('sends a dead letter again, and discards another', async () => {
    // The service refuses one report for good (403): the worker keeps it as a dead letter.
    const deadLetter = async (name: string): Promise<string> => {
      const rule = { operation: 'executions.report', kind: 'status', status: 403, count: 1 };
      expect((await session.admin('PUT', '/__admin/faults', { rules: [rule] })).status).toBe(204);
      const answer = await session.admin('POST', '/__admin/executions', {
        taskKey: 'greet',
        input: { name },
      });
      return ((await answer.json()) as { id: string }).id;
    };
    const retried = await deadLetter('Lin');
    await page.goto(`${session.url}/console/dead-letters`);
    const row = page.locator(`tr[data-dead-letter="${retried}"]`);
    await row.waitFor({ timeout: 15_000 });
    expect(await row.textContent()).toContain('403');
    await row.locator('form.retry button').click();
    await expect
      .poll(() => page.locator(`tr[data-dead-letter="${retried}"]`).count(), { timeout: 10_000 })
      .toBe(0);
    const reported = (await (await session.admin('GET', `/__admin/executions/${retried}`)).json()) as {
      status: string;
    };
    expect(reported.status).toBe('COMPLETED');

    const discarded = await deadLetter('Kay');
    const other = page.locator(`tr[data-dead-letter="${discarded}"]`);
    await other.waitFor({ timeout: 15_000 });
    await other.locator('form.discard button').click();
    await expect
      .poll(() => page.locator(`tr[data-dead-letter="${discarded}"]`).count(), { timeout: 10_000 })
      .toBe(0);
    const left = (await (await session.admin('GET', `/__admin/executions/${discarded}`)).json()) as {
      status: string;
    };
    expect(left.status).toBe('IN_PROGRESS');
  });
});
