// The chart's alert rules checked by Prometheus's own promtool: they parse (`check rules`), each alert fires on the
// series that should fire it and stays silent on a healthy worker (`test rules`), and the plain rules file shipped
// for a Prometheus without the Operator is the chart's rules, rendered.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { chartRules, PLAIN_RULES_FILE, plainRules, plainRulesText, type AlertRule } from './alert-rules.ts';
import { findTool, MISSING_TOOL_HINT, runTool, runsHere } from './prometheus-tools.ts';

const UNIT_TESTS_FILE = fileURLToPath(new URL('./fixtures/alerts.promtool-test.yaml', import.meta.url));
const tempDirs: string[] = [];

afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

interface UnitTests {
  rule_files: string[];
  tests: {
    name: string;
    alert_rule_test: { eval_time: string; alertname: string; exp_alerts: unknown[] }[];
  }[];
}

const plain = (await plainRules()).groups[0]!.rules;

describe('the plain Prometheus rules file', () => {
  it('is the chart\'s rules rendered with job="df-worker" (regenerate with `npm run docs`)', async () => {
    expect(await readFile(PLAIN_RULES_FILE, 'utf8')).toBe(await plainRulesText());
  });

  it("has the chart's alerts with the same expressions, durations and labels, only the selector differing", async () => {
    const chart = (await chartRules('team-a', 'df-worker')).groups[0]!.rules;
    const comparable = (rule: AlertRule, selector: string) => ({
      ...rule,
      expr: rule.expr.replaceAll(selector, '<worker>'),
      annotations: undefined,
    });
    expect(chart.map((rule) => comparable(rule, 'namespace="team-a", service="df-worker"'))).toEqual(
      plain.map((rule) => comparable(rule, 'job="df-worker"')),
    );
    expect(chart.map((rule) => rule.alert)).toEqual(
      expect.arrayContaining([
        'DfWorkerNoTaskServed',
        'DfWorkerHandlerWithoutTask',
        'DfWorkerJournalStuck',
        'DfWorkerBudgetProjectedToRunOut',
      ]),
    );
  });
});

describe.skipIf(!runsHere('promtool'))('promtool', () => {
  it('is installed', () => {
    expect(findTool('promtool'), MISSING_TOOL_HINT).toBeDefined();
  });

  it('check rules: the plain file and the chart rendered for a release both pass', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-rules-'));
    tempDirs.push(dir);
    const chartFile = path.join(dir, 'chart-rules.yaml');
    await writeFile(chartFile, stringifyYaml(await chartRules('team-a', 'df-worker')));
    const result = await runTool('promtool', ['check', 'rules', PLAIN_RULES_FILE, chartFile]);
    expect(result.stdout + result.stderr).not.toMatch(/FAILED/);
    expect(result.code).toBe(0);
    expect(result.stdout.match(/SUCCESS: (\d+) rules found/g)).toEqual([
      `SUCCESS: ${plain.length} rules found`,
      `SUCCESS: ${plain.length} rules found`,
    ]);
  });

  it('test rules: the unit tests cover every alert, each firing on its series and silent on a healthy one', async () => {
    const unitTests = parseYaml(await readFile(UNIT_TESTS_FILE, 'utf8')) as UnitTests;
    expect(path.resolve(path.dirname(UNIT_TESTS_FILE), unitTests.rule_files[0]!)).toBe(PLAIN_RULES_FILE);
    const cases = unitTests.tests.flatMap((test) => test.alert_rule_test);
    const [healthy] = unitTests.tests;
    expect(healthy!.name).toMatch(/^a healthy worker/);
    for (const { alert } of plain) {
      expect(
        cases.some((c) => c.alertname === alert && c.exp_alerts.length > 0),
        `${alert} fires`,
      ).toBe(true);
      expect(
        healthy!.alert_rule_test.some((c) => c.alertname === alert && c.exp_alerts.length === 0),
        `${alert} silent on the healthy worker`,
      ).toBe(true);
    }
    const result = await runTool('promtool', ['test', 'rules', path.basename(UNIT_TESTS_FILE)], {
      cwd: path.dirname(UNIT_TESTS_FILE),
    });
    expect(result.stdout + result.stderr).toMatch(/SUCCESS/);
    expect(result.code).toBe(0);
  });
});
