// The fault table: rules that make chosen service requests fail the way networks and services do.
// Rules are tried in order and the first that applies wins; a seeded PRNG decides probabilistic rules.
import { OPERATIONS } from '../api/types.ts';
import type { Operation } from '../api/types.ts';
import { InvalidFaultRuleError } from './errors.ts';
import type { FaultRule } from './types.ts';

interface ActiveRule {
  rule: FaultRule;
  remaining: number;
}

export class FaultTable {
  readonly #seed: number;
  #random: () => number;
  #rules: ActiveRule[] = [];

  constructor(seed: number) {
    this.#seed = seed;
    this.#random = mulberry32(seed);
  }

  /** Replaces every rule and reseeds, so a table's outcomes depend only on the requests that follow. */
  replace(rules: readonly FaultRule[]): void {
    const valid = validateFaultRules(rules);
    this.#rules = valid.map((rule) => ({ rule, remaining: rule.count ?? Infinity }));
    this.#random = mulberry32(this.#seed);
  }

  clear(): void {
    this.replace([]);
  }

  /** The rule to apply to a request, spending one use of it; undefined when none applies. */
  pick(operation: Operation | 'unknown', taskId: string | undefined): FaultRule | undefined {
    for (const active of this.#rules) {
      const { rule } = active;
      if (active.remaining <= 0) continue;
      if (rule.operation !== undefined && rule.operation !== '*' && rule.operation !== operation) continue;
      if (rule.taskId !== undefined && rule.taskId !== taskId) continue;
      // Only probabilistic rules draw, so adding a certain rule does not shift the others' sequence.
      const probability = rule.probability ?? 1;
      if (probability < 1 && this.#random() >= probability) continue;
      active.remaining--;
      return rule;
    }
    return undefined;
  }
}

/** Checks rules that may come from JSON (the admin surface); returns copies safe to keep. */
export function validateFaultRules(value: unknown): FaultRule[] {
  if (!Array.isArray(value)) throw new InvalidFaultRuleError('Fault rules must be an array of rule objects.');
  return value.map((rule: unknown, index) => {
    const problem = problemOf(rule);
    if (problem) throw new InvalidFaultRuleError(`Fault rule #${index} is invalid: ${problem}.`);
    return structuredClone(rule) as FaultRule;
  });
}

function problemOf(rule: unknown): string | undefined {
  if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) return 'it is not an object';
  const r = rule as Record<string, unknown>;
  if (r.operation !== undefined && r.operation !== '*' && !OPERATIONS.includes(r.operation as Operation)) {
    return `operation must be '*' or one of ${OPERATIONS.join(', ')}`;
  }
  if (r.taskId !== undefined && typeof r.taskId !== 'string') return 'taskId must be a string';
  if (r.probability !== undefined && !isNumberIn(r.probability, 0, 1)) {
    return 'probability must be a number from 0 to 1';
  }
  if (r.count !== undefined && !(Number.isInteger(r.count) && (r.count as number) >= 0)) {
    return 'count must be a non-negative integer';
  }
  switch (r.kind) {
    case 'status':
      if (!Number.isInteger(r.status) || !isNumberIn(r.status, 100, 599)) {
        return 'status must be an HTTP status';
      }
      if (r.body !== undefined && typeof r.body !== 'string') return 'body must be a string';
      if (r.contentType !== undefined && typeof r.contentType !== 'string') {
        return 'contentType must be a string';
      }
      if (r.headers !== undefined && !isStringRecord(r.headers)) return 'headers must map names to strings';
      return undefined;
    case 'rateLimit':
      if (
        r.retryAfterSeconds !== undefined &&
        !(Number.isInteger(r.retryAfterSeconds) && (r.retryAfterSeconds as number) >= 0)
      ) {
        return 'retryAfterSeconds must be a non-negative integer';
      }
      return undefined;
    case 'latency':
      return isNumberIn(r.ms, 0, Number.MAX_SAFE_INTEGER) ? undefined : 'ms must be a non-negative number';
    case 'dropAfterApply':
    case 'drop':
      return undefined;
    default:
      return "kind must be one of 'status', 'rateLimit', 'latency', 'dropAfterApply', 'drop'";
  }
}

function isNumberIn(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && value >= min && value <= max;
}

function isStringRecord(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => typeof v === 'string')
  );
}

/** Small, well-known 32-bit PRNG; plenty for fault rates and reproducible from a seed. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
