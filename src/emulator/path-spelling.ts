// Which spelling of the data-factory paths the emulator serves: both by default, as the service's API
// description lists them, or one only (`pathStyle`, `--path-style`), so a client's `auto` is tested on each.
import type { PathStyle } from '../api/paths.ts';

/** `both` (default), or only the underscore (`data_factory/task_executions`) or hyphen spelling. */
export type ServedSpelling = PathStyle | 'both';

export const SERVED_SPELLINGS: readonly ServedSpelling[] = ['both', 'underscore', 'hyphen'];

/** The spelling a data-factory path is written in; undefined for a path outside `/vN/data?factory`. */
export function spellingOf(path: string): PathStyle | undefined {
  const match = /^\/v\d+\/data([-_])factory(?=\/|$)/.exec(path);
  if (!match) return undefined;
  return match[1] === '_' ? 'underscore' : 'hyphen';
}

/**
 * Whether an emulator serving `served` has `path` as a route: a one-spelling server answers the other
 * spelling, or a path mixing both (`data_factory/task-executions`), with a route-level 404.
 */
export function serves(served: ServedSpelling, path: string): boolean {
  const spelling = spellingOf(path);
  if (served === 'both' || spelling === undefined) return true;
  const otherSegment =
    served === 'underscore' ? /\/(task|job)-executions(?=\/|$)/ : /\/(task|job)_executions(?=\/|$)/;
  return spelling === served && !otherSegment.test(path);
}
