// Checks that span several settings or depend on the command, which the per-setting formats cannot
// express. Each is skipped when a setting it reads is already reported invalid, to avoid noise.
import { keyShapeProblem } from '../secrets/key-shape.ts';
import type { ConfigProblem } from './errors.ts';
import { listSettings } from './schema.ts';
import type { WorkerConfig } from './schema.ts';

const ENV_BY_SETTING = new Map(listSettings().map(({ setting, entry }) => [setting, entry.env]));

function named(setting: string): string {
  return `${ENV_BY_SETTING.get(setting)} (${setting})`;
}

function problem(setting: string, message: string): ConfigProblem {
  const env = ENV_BY_SETTING.get(setting);
  return env === undefined ? { setting, message } : { setting, env, message };
}

/** `lower` must not exceed `higher`, e.g. budget.perSecond <= budget.perMinute. */
function atMost(lower: string, lowerValue: number, higher: string, higherValue: number): ConfigProblem[] {
  if (lowerValue <= higherValue) return [];
  return [problem(lower, `must be at most ${named(higher)}, which is ${higherValue}; got ${lowerValue}`)];
}

export function checkRelations(config: WorkerConfig, invalid: ReadonlySet<string>): ConfigProblem[] {
  const valid = (...settings: string[]) => settings.every((setting) => !invalid.has(setting));
  const problems: ConfigProblem[] = [];
  const { budget, scheduler, api, http } = config;
  problems.push(...checkRedis(config, valid));
  if (valid('budget.perSecond', 'budget.perMinute')) {
    problems.push(...atMost('budget.perSecond', budget.perSecond, 'budget.perMinute', budget.perMinute));
  }
  if (valid('budget.perMinute', 'budget.perMonth')) {
    problems.push(...atMost('budget.perMinute', budget.perMinute, 'budget.perMonth', budget.perMonth));
  }
  if (valid('scheduler.minPollIntervalMs', 'scheduler.maxPollIntervalMs')) {
    problems.push(
      ...atMost(
        'scheduler.minPollIntervalMs',
        scheduler.minPollIntervalMs,
        'scheduler.maxPollIntervalMs',
        scheduler.maxPollIntervalMs,
      ),
    );
  }
  if (valid('api.key', 'api.keyFile') && api.key !== '' && api.keyFile !== '') {
    problems.push(problem('api.key', `is set together with ${named('api.keyFile')}; set only one of them`));
  }
  if (valid('http.wake', 'http.wakeToken') && http.wake === 'token' && http.wakeToken.trim() === '') {
    problems.push(
      problem(
        'http.wakeToken',
        `must be set when ${named('http.wake')} is token; set a token or choose DF_HTTP_WAKE=off or open`,
      ),
    );
  }
  if (valid('http.port', 'http.probePort') && http.probePort > 0 && http.probePort === http.port) {
    problems.push(
      problem(
        'http.probePort',
        `must differ from ${named('http.port')} (both are ${http.port}); -1 answers the probes on that port alone`,
      ),
    );
  }
  return problems;
}

/** Clustered mode's settings that only make sense together: sentinels and TLS files need a Redis URL. */
function checkRedis(config: WorkerConfig, valid: (...settings: string[]) => boolean): ConfigProblem[] {
  const { redisUrl, sentinels, tlsCaFile, tlsCertFile, tlsKeyFile } = config.cluster;
  if (!valid('cluster.redisUrl')) return [];
  const problems: ConfigProblem[] = [];
  if (redisUrl === '' && sentinels !== '' && valid('cluster.sentinels')) {
    problems.push(
      problem(
        'cluster.sentinels',
        `needs ${named('cluster.redisUrl')} for the password and database of the master, e.g. redis://:password@mymaster/0 (its host is not used with sentinels)`,
      ),
    );
  }
  const tls = {
    'cluster.tlsCaFile': tlsCaFile,
    'cluster.tlsCertFile': tlsCertFile,
    'cluster.tlsKeyFile': tlsKeyFile,
  };
  for (const [setting, value] of Object.entries(tls)) {
    if (value !== '' && !redisUrl.startsWith('rediss://')) {
      problems.push(
        problem(
          setting,
          `is used only over TLS; give ${named('cluster.redisUrl')} as a rediss:// URL, or unset it`,
        ),
      );
    }
  }
  if ((tlsCertFile === '') !== (tlsKeyFile === '')) {
    const [set, unset] =
      tlsCertFile === ''
        ? ['cluster.tlsKeyFile', 'cluster.tlsCertFile']
        : ['cluster.tlsCertFile', 'cluster.tlsKeyFile'];
    problems.push(
      problem(unset, `must be set together with ${named(set)}: a client certificate needs its key`),
    );
  }
  return problems;
}

/** What `start` needs to talk to the service: a URL and a key. */
export function checkServiceAccess(config: WorkerConfig, invalid: ReadonlySet<string>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  if (config.api.url === '' && !invalid.has('api.url')) {
    problems.push(
      problem('api.url', 'is required to connect to the service; set it to the base URL of the service'),
    );
  }
  const keyInvalid = invalid.has('api.key') || invalid.has('api.keyFile');
  if (config.api.key === '' && config.api.keyFile === '' && !keyInvalid) {
    problems.push(
      problem('api.key', `is required to connect to the service; set it or ${named('api.keyFile')}`),
    );
  }
  return problems;
}

/** Checks the key's shape without ever quoting it; `path` names the key file it came from. */
export function checkKey(
  key: string,
  setting: 'api.key' | 'api.keyFile',
  path?: string,
): ConfigProblem | undefined {
  const message = keyShapeProblem(key, path);
  return message === undefined ? undefined : problem(setting, message);
}
