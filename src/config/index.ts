// Public face of the configuration: load, validate, describe and print the worker's settings.
export { loadConfig, PACKAGE_DEFAULTS_FILE } from './load.ts';
export type { LoadConfigOptions } from './load.ts';
export { ConfigError } from './errors.ts';
export type { ConfigProblem } from './errors.ts';
export { describeConfig, redactedConfig } from './describe.ts';
export type { SettingDescription } from './describe.ts';
export type { WorkerConfig } from './schema.ts';
