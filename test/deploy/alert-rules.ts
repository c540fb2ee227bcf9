// The chart's alert rules (templates/prometheusrule.yaml) as Prometheus reads them, without a helm binary: the
// few template actions the rules use are substituted here, and any other action is refused, so a new one cannot
// slip through unrendered. Also writes the same rules as a plain Prometheus rules file (run by `npm run docs`).
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const RULE_TEMPLATE_FILE = path.join(repoRoot, 'helm/df-worker/templates/prometheusrule.yaml');
export const PLAIN_RULES_FILE = path.join(repoRoot, 'helm/manifests/df-worker.rules.yaml');
/** The scrape job the plain rules file selects; helm/README.md says to change it when yours has another name. */
export const PLAIN_RULES_JOB = 'df-worker';

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface RulesFile {
  groups: { name: string; rules: AlertRule[] }[];
}

export interface RenderTarget {
  /** What the template's `$sel` stands for: the label matchers selecting one worker's series. */
  selector: string;
  /** The chart's `prometheusRule` values. */
  values: Record<string, unknown>;
  /** Replaces the Kubernetes labels the annotations name (plain Prometheus has `instance` instead). */
  relabelAnnotation?: (text: string) => string;
}

/** Lines that only open or close the optional extra labels block, or guard the absent-worker alert. */
const SKIPPED_ACTIONS = new Set([
  '{{- with $rules.alertLabels }}',
  '{{- toYaml . | nindent 12 }}',
  '{{- end }}',
  '{{- if gt (int .Values.replicaCount) 0 }}',
]);

/**
 * The rules under `spec.groups[0].rules`, as Helm would render them for `target` with no alertLabels and one
 * replica. Throws on a template action it does not know.
 */
export function renderAlertRules(template: string, target: RenderTarget): AlertRule[] {
  const start = template.indexOf('\n      rules:\n');
  if (start < 0) throw new Error('prometheusrule.yaml: no `rules:` list under spec.groups');
  const relabel = target.relabelAnnotation ?? ((text: string) => text);
  const lines: string[] = [];
  for (const line of template.slice(start + 1).split('\n')) {
    if (SKIPPED_ACTIONS.has(line.trim())) continue;
    const rendered = line
      .replace(/\s*\{\{-\s*\$sel\s*-\}\}\s*/g, target.selector)
      .replace(/\{\{ \$sel \}\}/g, target.selector)
      .replace(/\{\{ \$rules\.(\w+) \}\}/g, (_, name: string) => {
        const value = target.values[name];
        if (typeof value !== 'string' && typeof value !== 'number')
          throw new Error(`prometheusrule.yaml: .Values.prometheusRule.${name} is not a string or number`);
        return String(value);
      })
      .replace(/\{\{ `([^`]*)` \| quote \}\}/g, (_, text: string) => JSON.stringify(relabel(text)))
      .replace(/\{\{ printf "([^"]*)" \$sel \| quote \}\}/g, (_, text: string) =>
        JSON.stringify(text.replace('%s', target.selector)),
      );
    const outsideStrings = rendered.replace(/"(?:[^"\\]|\\.)*"/g, '""');
    if (outsideStrings.includes('{{'))
      throw new Error(`prometheusrule.yaml: a template action this check cannot render: ${line.trim()}`);
    lines.push(rendered.slice(6));
  }
  const parsed = parseYaml(lines.join('\n')) as { rules: AlertRule[] };
  return parsed.rules;
}

/** Chart values as the rules see them: `.Values.prometheusRule` of values.yaml. */
export async function defaultRuleValues(): Promise<Record<string, unknown>> {
  const values = parseYaml(await readFile(path.join(repoRoot, 'helm/df-worker/values.yaml'), 'utf8')) as {
    prometheusRule: Record<string, unknown>;
  };
  return values.prometheusRule;
}

/** The chart's rules for a release `name` in `namespace`, as a rules file (the PrometheusRule's spec). */
export async function chartRules(namespace = 'default', name = 'df-worker'): Promise<RulesFile> {
  const template = await readFile(RULE_TEMPLATE_FILE, 'utf8');
  const selector = `namespace=${JSON.stringify(namespace)}, service=${JSON.stringify(name)}`;
  return {
    groups: [{ name, rules: renderAlertRules(template, { selector, values: await defaultRuleValues() }) }],
  };
}

/** The same rules for a Prometheus without the Operator: series of the scrape job `df-worker`, named by instance. */
export async function plainRules(): Promise<RulesFile> {
  const template = await readFile(RULE_TEMPLATE_FILE, 'utf8');
  const rules = renderAlertRules(template, {
    selector: `job=${JSON.stringify(PLAIN_RULES_JOB)}`,
    values: await defaultRuleValues(),
    relabelAnnotation: (text) =>
      text
        .replaceAll('{{ $labels.namespace }}/{{ $labels.pod }}', '{{ $labels.instance }}')
        .replaceAll('{{ $labels.namespace }}/{{ $labels.service }}', '{{ $labels.job }}'),
  });
  return { groups: [{ name: 'df-worker', rules }] };
}

/** The text of PLAIN_RULES_FILE as generated now, formatted as prettier formats the repository. */
export async function plainRulesText(): Promise<string> {
  const header =
    '# df-worker alerts as a plain Prometheus rules file, for a Prometheus without the Prometheus Operator.\n' +
    '# Generated from helm/df-worker/templates/prometheusrule.yaml by `npm run docs`: edit that file, not this one.\n' +
    `# The rules select the series of the scrape job "${PLAIN_RULES_JOB}": replace job="${PLAIN_RULES_JOB}" if yours is named\n` +
    "# otherwise. The thresholds are the chart's defaults (values.yaml, prometheusRule).\n";
  const text = header + stringifyYaml(await plainRules(), { lineWidth: 0 });
  const options = (await resolveConfig(PLAIN_RULES_FILE)) ?? {};
  return format(text, { ...options, filepath: PLAIN_RULES_FILE });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await writeFile(PLAIN_RULES_FILE, await plainRulesText());
  console.log(`wrote ${path.relative(repoRoot, PLAIN_RULES_FILE)}`);
}
