// The errors of the configuration: every bad setting at once, so a user fixes them in one go; and the DF_*
// variables that are no setting at all (a warning for `start`, a failure for `check`).
import type { ErrorCode } from '../errors/catalogue.ts';
import { describeUnknownSetting, type UnknownSetting } from './unknown-settings.ts';

/** One bad setting. `message` never contains a sensitive value (the API key, the wake token). */
export interface ConfigProblem {
  /** Dotted schema name (`budget.perMinute`), or `DF_CONFIG` for the configuration file itself. */
  setting: string;
  /** The environment variable that sets it, when there is one. */
  env?: string;
  message: string;
}

/** Formats a problem as one line: `DF_CONCURRENCY (concurrency): must be ...`. */
export function formatProblem(problem: ConfigProblem): string {
  const name =
    problem.env === undefined || problem.env === problem.setting
      ? problem.setting
      : `${problem.env} (${problem.setting})`;
  return `${name}: ${problem.message}`;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code: ErrorCode = 'DFW_CONFIG_INVALID';
  readonly problems: ConfigProblem[];

  constructor(problems: ConfigProblem[]) {
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    super(
      `Invalid configuration, ${count} (fix the environment variables, the DF_CONFIG file or the options, then start again):\n` +
        problems.map(formatProblem).join('\n'),
    );
    this.problems = problems;
  }
}

/** DF_* variables that are not settings, each with the setting it was probably meant to be. */
export class UnknownSettingsError extends Error {
  override readonly name = 'UnknownSettingsError';
  readonly code: ErrorCode = 'DFW_CONFIG_UNKNOWN_SETTING';
  readonly unknown: UnknownSetting[];

  constructor(unknown: UnknownSetting[]) {
    super(unknown.map(describeUnknownSetting).join('\n'));
    this.unknown = unknown;
  }
}
