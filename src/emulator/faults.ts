// The fault table: rules that make chosen service requests fail the way networks and services do.
// Rules are tried in order and the first that applies wins; a seeded PRNG decides probabilistic rules.
import { validateFaultRules } from './bodies.ts';
import { mulberry32 } from '../clock/seeded-random.ts';
import type { ClaimTimeout } from './response-timeouts.ts';
import type { EmulatorOperation, FaultRule } from './types.ts';

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
    // Claims timed by a rule replaced here run on: their time-out asks the old rule, now spent.
    for (const active of this.#rules) active.remaining = 0;
    this.#rules = valid.map((rule) => ({ rule, remaining: rule.count ?? Infinity }));
    this.#random = mulberry32(this.#seed);
  }

  clear(): void {
    this.replace([]);
  }

  /** The rule to apply to a request, spending one use of it; undefined when none applies. */
  pick(operation: EmulatorOperation | 'unknown', taskId: string | undefined): FaultRule | undefined {
    for (const active of this.#rules) {
      const { rule } = active;
      if (active.remaining <= 0 || rule.kind === 'responseTimeout') continue;
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

  /**
   * The response timeout a claim of `taskId` runs under, from the first responseTimeout rule that applies; its
   * count is spent when the claim actually times out. Undefined when no rule applies.
   */
  claimTimeout(taskId: string): ClaimTimeout | undefined {
    for (const active of this.#rules) {
      const { rule } = active;
      if (rule.kind !== 'responseTimeout' || active.remaining <= 0) continue;
      if (rule.taskId !== undefined && rule.taskId !== taskId) continue;
      const probability = rule.probability ?? 1;
      if (probability < 1 && this.#random() >= probability) continue;
      return {
        ms: rule.ms,
        requeue: rule.requeue ?? 'new-execution',
        spend: () => active.remaining-- > 0,
      };
    }
    return undefined;
  }
}
