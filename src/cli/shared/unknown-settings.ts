// The warning `run` and `dev` print for a DF_* variable that is no setting (a typo?), naming the setting it was
// probably meant to be; they go on, as `start` does.
import type { WorkerConfig } from '../../config/schema.ts';
import { unknownSettingWarnings } from '../../config/unknown-settings.ts';

/**
 * Names, on stderr, each DF_* variable that is no setting, with the setting it was probably meant to be:
 * `dev` and `run` go on, as `start` does.
 */
export function warnUnknownSettings(command: string, config?: WorkerConfig): void {
  for (const line of unknownSettingWarnings(process.env, config)) {
    process.stderr.write(`df-worker ${command}: ${line}\n`);
  }
}
