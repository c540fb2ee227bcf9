// Screenshots of the local web console for handlers/README.md (npm run docs:screenshots): a real df-worker dev
// session driven by headless Chromium, as console-browser.test.ts drives it.
//   npm run docs:screenshots            writes handlers/console-executions.png and handlers/console-budget.png
import path from 'node:path';
import { REPO_ROOT } from '../cli/process.ts';
import { launchChromium, startConsoleSession } from './console-session.ts';

const browser = await launchChromium();
// The service's own limits (5 a second, 50 a minute), as a user's session has them.
const session = await startConsoleSession({ DF_BUDGET_PER_SECOND: '5', DF_BUDGET_PER_MINUTE: '50' });
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 760 } });
  await page.goto(session.consoleUrl);
  const enqueue = async (task: string, input: string) => {
    await page.selectOption('#enqueue select[name=taskKey]', task);
    await page.fill('#enqueue textarea[name=input]', input);
    const before = await page.locator('details.execution').count();
    await page.click('#enqueue button[type=submit]');
    // The page reloads with the new execution listed first, then refreshes its list every second.
    await page.locator('details.execution').nth(before).waitFor({ timeout: 10_000 });
    await page
      .locator(
        `#executions > details:first-of-type[data-status="COMPLETED"][data-execution="execution-${before + 1}"]`,
      )
      .waitFor({ timeout: 20_000 });
  };
  await enqueue('flaky', '{"name": "Grace"}');
  await enqueue('greet', '{"name": "Ada"}');
  await page.locator('details.execution').first().locator('summary').click();
  await page.locator('details.execution[open] .log-line').first().waitFor();
  const shots = path.join(REPO_ROOT, 'handlers');
  await page.screenshot({ path: path.join(shots, 'console-executions.png'), fullPage: true });
  await page.goto(`${session.url}/console/budget`);
  await page.locator('svg.chart').waitFor();
  await page.screenshot({ path: path.join(shots, 'console-budget.png'), fullPage: true });
  console.log(
    `wrote ${path.join('handlers', 'console-executions.png')} and ${path.join('handlers', 'console-budget.png')}`,
  );
} finally {
  await browser.close();
  await session.stop();
}
