// DF_* environment variables that are no setting of df-worker: most often a misspelt one (DF_API_KYE), which
// would otherwise be ignored without a word. `start`, `dev` and `run` warn about each; `check` fails on them.
import type { ErrorCode } from '../errors/catalogue.ts';
import { nearestName } from '../errors/nearest-name.ts';
import { listSettings } from './schema.ts';
import type { WorkerConfig } from './schema.ts';

/** The catalogue's code for an unknown DF_* variable, in log lines and warnings. */
export const UNKNOWN_SETTING_CODE = 'DFW_CONFIG_UNKNOWN_SETTING' satisfies ErrorCode;

/**
 * DF_* variables that df-worker's own code, tests or CI read and that are not settings, with who reads them:
 * the one list of them, so that none is taken for a typo (test/config/unknown-settings.test.ts greps the
 * repository for any other).
 */
export const NON_SETTING_VARIABLES: Readonly<Record<string, string>> = {
  DF_CONFIG: 'the configuration file itself (src/config/load.ts)',
  DF_WORKER_UNDER_TEST: 'the checkout whose CLI the tests run (test/cli/process.ts, bench/)',
  DF_TEST_REDIS_SERVER: 'the redis-server the cluster tests start (test/cluster/redis-server.ts)',
  DF_TEST_REDIS_SENTINEL: 'the redis-sentinel the cluster tests start (test/cluster/redis-sentinel.ts)',
  DF_CI_NODE_DIR: 'where CI installs its Node.js (.ci/run)',
  DF_CI_CACHE: "CI's image cache (.ci/image-smoke)",
  DF_CHROMIUM_PATH: "the browser the console's tests drive (test/console/)",
  DF_HELM: 'the helm binary the chart tests run (test/deploy/helm-chart.ts; .ci/run sets it)',
  DF_CI_HELM_DIR: 'where .ci/install-helm puts helm (.ci/install-helm)',
};

const SETTING_VARIABLES = listSettings().map(({ entry }) => entry.env);
const KNOWN = new Set([...SETTING_VARIABLES, ...Object.keys(NON_SETTING_VARIABLES)]);

/** One DF_* variable that is not a setting, and the setting it was probably meant to be. */
export interface UnknownSetting {
  variable: string;
  /** The setting's variable nearest in spelling, when one is close enough to be a typo of it. */
  suggestion?: string;
}

/**
 * The DF_* variables of `env` that df-worker does not read, in name order, less those in `ignored`. Set but
 * empty counts too: `DF_API_KYE=` is as much a typo.
 */
export function findUnknownSettings(
  env: NodeJS.ProcessEnv,
  ignored: Iterable<string> = [],
): UnknownSetting[] {
  const skip = new Set(ignored);
  return Object.keys(env)
    .filter((name) => name.startsWith('DF_') && !KNOWN.has(name) && !skip.has(name))
    .sort()
    .map((variable) => {
      const suggestion = nearestName(variable, SETTING_VARIABLES);
      return suggestion === undefined ? { variable } : { variable, suggestion };
    });
}

/**
 * The names DF_IGNORE_UNKNOWN lists: from the loaded configuration (which may take it from the DF_CONFIG
 * file), else, when the configuration did not load, from the environment as it is.
 */
export function ignoredVariables(env: NodeJS.ProcessEnv, config?: WorkerConfig): string[] {
  const list = config === undefined ? (env.DF_IGNORE_UNKNOWN ?? '') : config.ignoreUnknown;
  return list
    .split(/[\s,]+/)
    .map((name) => name.trim())
    .filter((name) => name !== '');
}

/** `DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?`, or what to do when nothing is close. */
export function describeUnknownSetting({ variable, suggestion }: UnknownSetting): string {
  const head = `${variable} is not a df-worker setting`;
  if (suggestion !== undefined) return `${head}; did you mean ${suggestion}?`;
  return `${head} (see config/README.md for the settings); if another tool reads it, list it in DF_IGNORE_UNKNOWN`;
}

/**
 * The CLI's warning lines for the unknown DF_* variables of `env` (none when there are none), e.g.
 * `warning DFW_CONFIG_UNKNOWN_SETTING: DF_API_KYE is not a df-worker setting; did you mean DF_API_KEY?`.
 */
export function unknownSettingWarnings(env: NodeJS.ProcessEnv, config?: WorkerConfig): string[] {
  return findUnknownSettings(env, ignoredVariables(env, config)).map(
    (one) => `warning ${UNKNOWN_SETTING_CODE}: ${describeUnknownSetting(one)}`,
  );
}
