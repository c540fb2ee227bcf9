// Which spelling of the data-factory paths the service answers, found once per process rather than assumed:
// the service's own examples and SDK spell `data_factory/task_executions`, its API description lists both.
// Under DF_API_PATH_STYLE=auto the ServiceClient's first task list is the probe (no extra request when the
// underscore spelling answers); a first request of another kind is preceded by a task list of size 1.
import type { ErrorCode } from '../errors/catalogue.ts';
import { ServiceClientError, ServiceError } from './errors.ts';
import { servicePaths, type PathStyle, type ServicePaths } from './paths.ts';
import { URL_SETTING } from './settings.ts';

/** The DF_API_PATH_STYLE values: a fixed spelling, or `auto` (find it at start). */
export type PathStyleSetting = PathStyle | 'auto';

/** The setting named when neither spelling answers. */
export const PATH_STYLE_SETTING = 'DF_API_PATH_STYLE';

/** The order `auto` tries: the spelling of every example the service publishes first. */
export const PROBE_ORDER: readonly PathStyle[] = ['underscore', 'hyphen'];

/** What `auto` found: the spelling, and the spellings tried in order (the last one answered). */
export interface PathStyleResolution {
  style: PathStyle;
  tried: PathStyle[];
}

/**
 * A 404 on the task list means the spelling is not a route there: the list always exists, so even the
 * service's own NOT_FOUND envelope (which a server also gives an unknown route) cannot mean "no tasks".
 */
export function isMissingRoute(error: unknown): boolean {
  return error instanceof ServiceError && error.status === 404;
}

/** Neither spelling of the task list answered: the URL is wrong, or the service spells its paths otherwise. */
export class PathStyleError extends ServiceClientError {
  override name = 'PathStyleError';
  override readonly code: ErrorCode = 'DFW_API_PATH_STYLE_UNKNOWN';
  /** The paths tried, in order, each answered 404. */
  readonly triedPaths: string[];

  constructor(triedPaths: string[], urlSetting = URL_SETTING, options?: ErrorOptions) {
    super(
      `neither spelling of the data-factory paths answered: ${triedPaths.map((path) => `GET ${path}`).join(' and ')} ` +
        `were both 404; check ${urlSetting} (the service's base URL, e.g. https://api.product-live.com, with ` +
        `no /v1) and set ${PATH_STYLE_SETTING} to underscore or hyphen if your service spells its paths so`,
      options,
    );
    this.triedPaths = triedPaths;
  }
}

/**
 * The spelling a client uses, shared by a client and the siblings it makes (withGate, observed), so the probe
 * runs once per process whichever of them asks first.
 */
export class PathStyleHolder {
  readonly setting: PathStyleSetting;
  readonly #prefix: string;
  #style: PathStyle | undefined;
  #paths: ServicePaths;
  #pending: Promise<undefined> | undefined;
  #found: PathStyleResolution | undefined;

  constructor(setting: PathStyleSetting, prefix: string) {
    this.setting = setting;
    this.#prefix = prefix;
    this.#style = setting === 'auto' ? undefined : setting;
    // Until the probe answers, requests are spelt as the probe's first guess.
    this.#paths = servicePaths(this.#style ?? PROBE_ORDER[0]!, prefix);
  }

  /** The spelling in use; undefined while `auto` has not found it. */
  get style(): PathStyle | undefined {
    return this.#style;
  }

  get paths(): ServicePaths {
    return this.#paths;
  }

  /** What `auto` found; undefined for a fixed spelling, or while nothing answered yet. */
  get found(): PathStyleResolution | undefined {
    return this.#found;
  }

  /**
   * Runs `probe` (a task list) in each spelling in turn until one answers, and resolves that answer; a caller
   * that came while another's probe ran gets no answer (`undefined`) and sends its own request. A failure other
   * than a missing route (the network, a refused key) leaves the spelling unknown: the next request probes again.
   */
  async resolve<T>(probe: (paths: ServicePaths) => Promise<T>, urlSetting: string): Promise<T | undefined> {
    if (this.#style !== undefined) return undefined;
    if (this.#pending) {
      await this.#pending;
      // The other probe failed (no answer, a refused key): this caller probes for itself.
      return this.#style === undefined ? await this.resolve(probe, urlSetting) : undefined;
    }
    const running = this.#probe(probe, urlSetting);
    this.#pending = running.then(
      () => undefined,
      () => undefined,
    );
    try {
      return await running;
    } finally {
      this.#pending = undefined;
    }
  }

  async #probe<T>(probe: (paths: ServicePaths) => Promise<T>, urlSetting: string): Promise<T> {
    const tried: PathStyle[] = [];
    let last: unknown;
    for (const style of PROBE_ORDER) {
      tried.push(style);
      const paths = servicePaths(style, this.#prefix);
      let answer: T;
      try {
        answer = await probe(paths);
      } catch (error) {
        if (!isMissingRoute(error)) throw error;
        last = error;
        continue;
      }
      this.#style = style;
      this.#paths = paths;
      this.#found = { style, tried };
      return answer;
    }
    throw new PathStyleError(
      tried.map((style) => servicePaths(style, this.#prefix).tasks()),
      urlSetting,
      { cause: last },
    );
  }
}
