// The configuration schema: the one source of truth for every setting, its environment variable, default,
// format and documentation. `WorkerConfig` is derived from it, so a setting is added in one place.
import { clusterSchema } from './cluster-schema.ts';
import { SERVICE_REQUEST_LIMITS } from '../api/service-limits.ts';
import { FORMAT } from './formats.ts';
import { flag, flagOrAuto, integer, milliseconds, number, oneOf, string, withDefault } from './settings.ts';
import type { Setting } from './settings.ts';

export type { Setting } from './settings.ts';

export const schema = {
  api: {
    url: {
      env: 'DF_API_URL',
      default: '',
      format: FORMAT.httpUrl,
      doc: withDefault(
        'Base URL of the Data Factory service. Required by `start`; `demo` uses its embedded emulator.',
        'An http:// or https:// URL, without a user name, password, query or fragment (the key goes in DF_API_KEY)',
        '',
      ),
    } satisfies Setting<string>,
    key: string({
      env: 'DF_API_KEY',
      default: '',
      sensitive: true,
      doc: 'API key sent with every request. Set exactly one of DF_API_KEY and DF_API_KEY_FILE for `start`; never logged.',
    }),
    keyFile: string({
      env: 'DF_API_KEY_FILE',
      default: '',
      doc: 'Path of a file holding the API key (surrounding whitespace trimmed), relative to the working directory. Preferred over DF_API_KEY with container secrets: the daemon reads it again when it changes (a mounted Secret replaced in place, a file renamed over it or written anew; watched, and checked every DF_API_KEY_FILE_CHECK_MS) and after the service refuses the key (401), and uses the new key from the next request, without a restart. A file that cannot be read, or holds no valid key, leaves the key in use as it is.',
    }),
    keyFileCheckMs: integer({
      env: 'DF_API_KEY_FILE_CHECK_MS',
      default: 10_000,
      min: 100,
      max: 3_600_000,
      doc: "How often DF_API_KEY_FILE is stat'ed for a change besides the file system's own notifications (which some mounts never send), in milliseconds.",
    }),
    authMode: oneOf({
      env: 'DF_API_AUTH_MODE',
      default: 'header',
      values: ['header', 'query', 'bearer'],
      doc: 'How the key is sent: X-Api-Key header, api_key query parameter, or Authorization: Bearer. Avoid query: it puts the key in URLs, which proxies and access logs record.',
    }),
    pathStyle: oneOf({
      env: 'DF_API_PATH_STYLE',
      default: 'auto',
      values: ['auto', 'underscore', 'hyphen'],
      doc: "Spelling of data-factory paths: /v1/data_factory/task_executions (underscore, the service's own examples), /v1/data-factory/task-executions (hyphen), or auto: found at start by the first task list, tried in the underscore spelling first, then hyphen, and kept for the process (a 404 on both stops the start).",
    }),
    connectTimeoutMs: milliseconds({
      env: 'DF_API_CONNECT_TIMEOUT_MS',
      default: 5_000,
      min: 1,
      doc: 'Time allowed to open a connection to the service, in milliseconds.',
    }),
    headersTimeoutMs: milliseconds({
      env: 'DF_API_HEADERS_TIMEOUT_MS',
      default: 15_000,
      min: 1,
      doc: 'Time allowed for the response headers to arrive after the request is sent, in milliseconds.',
    }),
    bodyTimeoutMs: milliseconds({
      env: 'DF_API_BODY_TIMEOUT_MS',
      default: 15_000,
      min: 1,
      doc: 'Longest silence allowed between chunks of a response body, in milliseconds.',
    }),
    requestTimeoutMs: milliseconds({
      env: 'DF_API_REQUEST_TIMEOUT_MS',
      default: 30_000,
      min: 1,
      doc:
        'Time allowed from sending a request (connecting included) to the response headers, in milliseconds. The body ' +
        'then has only DF_API_BODY_TIMEOUT_MS between chunks, within DF_API_ANSWER_TIMEOUT_MS overall.',
    }),
    answerTimeoutMs: milliseconds({
      env: 'DF_API_ANSWER_TIMEOUT_MS',
      default: 60_000,
      min: 1,
      doc:
        'Time allowed for a whole answer, from sending the request to the last byte of its body, in milliseconds, ' +
        'whatever the gaps between chunks: an answer that trickles is cut there and counted as lost. The other ' +
        "requests never wait for it: each task's poll and each report has its own connection.",
    }),
  },
  handlers: {
    dir: string({
      env: 'DF_HANDLERS_DIR',
      default: './handlers',
      nonEmpty: true,
      doc: 'Directory of handler modules, relative to the working directory.',
    }),
    timeoutMs: milliseconds({
      env: 'DF_HANDLER_TIMEOUT_MS',
      default: 300_000,
      min: 1,
      doc: 'Time a handler that declares no timeoutMs may run on one execution before it is aborted and the attempt fails, in milliseconds; a handler that declares timeoutMs gets its own limit instead, shorter or longer.',
    }),
    isolation: oneOf({
      env: 'DF_HANDLER_ISOLATION',
      default: 'process',
      values: ['thread', 'process', 'none'],
      doc: "Where handler attempts run: process (a pool of child processes, started when an attempt needs one and ended after DF_HANDLER_IDLE_TIMEOUT_MS idle: a handler that blocks, leaks, exits, crashes, overruns its timeout or runs out of memory, on the heap or off it, fails only its attempt; each process holds memory of its own while it lives: see Handler isolation in handlers/README.md), thread (a pool of worker threads in the daemon's process, lighter, but only the V8 heap is limited: Buffers and native memory count against the daemon's, and some allocations past the heap limit (a large String.replace) abort the whole daemon), or none (on the daemon's own event loop, as a debugging aid: no protection at all).",
    }),
    memoryMb: integer({
      env: 'DF_HANDLER_MEMORY_MB',
      default: 512,
      min: 16,
      max: 65_536,
      doc: "Memory each handler worker may use, in MB: a handler that exceeds it fails its attempt and its worker is replaced. With DF_HANDLER_ISOLATION process, the worker's V8 heap is capped at it and the daemon kills a worker whose anonymous resident memory (heap, Buffers, native allocations) grew by more than it since the worker started (checked every 100 ms); each worker process also carries Node.js's own memory (measured in Handler isolation, handlers/README.md), and the kernel ends a handler process, never the daemon, at the container's memory limit. With thread, only the V8 heap is capped. Up to DF_CONCURRENCY workers run at once.",
    }),
    maxOutputBytes: integer({
      env: 'DF_HANDLER_MAX_OUTPUT_BYTES',
      default: 1_048_576,
      min: 1_024,
      max: 268_435_456,
      doc: 'Largest output a handler may return, as JSON in bytes: a larger one fails the execution (not retried). With DF_HANDLER_ISOLATION process or thread it is checked in the worker, so that the output never reaches the daemon (its journal, a report body); with none, before it is journaled.',
    }),
    idleTimeoutMs: milliseconds({
      env: 'DF_HANDLER_IDLE_TIMEOUT_MS',
      default: 30_000,
      min: 0,
      doc: 'Time a handler worker (with DF_HANDLER_ISOLATION thread or process) may wait for its next attempt before it is terminated to give its memory back, in milliseconds; the next attempt then starts a new one (0.1 to 0.4 s more for that attempt). 0 keeps idle workers for ever.',
    }),
  },
  state: {
    dir: string({
      env: 'DF_STATE_DIR',
      default: './.state',
      nonEmpty: true,
      doc: 'Directory for the journal and budget state that must survive restarts, relative to the working directory.',
    }),
    lockCheckMs: milliseconds({
      env: 'DF_STATE_LOCK_CHECK_MS',
      default: 250,
      min: 10,
      doc: "How often the daemon checks that the state folder's lock file is still its own (it is also checked before every poll), in milliseconds; a lock that vanished or names another owner stops the daemon (exit 75).",
    }),
  },
  cluster: clusterSchema,
  concurrency: integer({
    env: 'DF_CONCURRENCY',
    default: 4,
    min: 1,
    max: 256,
    doc: 'Executions run at the same time (handlers in flight).',
  }),
  budget: {
    perSecond: integer({
      env: 'DF_BUDGET_PER_SECOND',
      default: SERVICE_REQUEST_LIMITS.perSecond,
      min: 1,
      doc: 'Requests per second the worker allows itself with this API key. At most DF_BUDGET_PER_MINUTE.',
    }),
    perMinute: integer({
      env: 'DF_BUDGET_PER_MINUTE',
      default: SERVICE_REQUEST_LIMITS.perMinute,
      min: 1,
      doc: `Requests per minute the worker allows itself; the service's default limit is ${SERVICE_REQUEST_LIMITS.perMinute} per key. At most DF_BUDGET_PER_MONTH.`,
    }),
    perMonth: integer({
      env: 'DF_BUDGET_PER_MONTH',
      default: SERVICE_REQUEST_LIMITS.perMonth,
      min: 1,
      doc: 'Requests per calendar month (in DF_BUDGET_TIME_ZONE) the worker allows itself with this key.',
    }),
    timeZone: {
      env: 'DF_BUDGET_TIME_ZONE',
      default: 'UTC',
      format: FORMAT.timeZone,
      doc: withDefault(
        'Time zone in which the monthly budget resets (midnight of the 1st).',
        'An IANA time zone name such as UTC or Europe/Paris',
        'UTC',
      ),
    } satisfies Setting<string>,
    reserve: number({
      env: 'DF_BUDGET_RESERVE',
      default: 0.1,
      min: 0,
      max: 0.9,
      doc: "How far re-polls after a hit may run ahead of an even spend of the month, as a fraction of the month's budget; the allowance shrinks as the month passes. Past it, a task that found work waits for its idle pace, unless its work is steady at a rate already learnt: the pace then plans for its re-polls.",
    }),
    safetyMarginMs: milliseconds({
      env: 'DF_BUDGET_SAFETY_MARGIN_MS',
      default: 200,
      min: 0,
      doc: 'Added to the per-second and per-minute windows so that network jitter cannot make the service count one request more in a window than the worker did, in milliseconds.',
    }),
  },
  scheduler: {
    maxPollIntervalMs: milliseconds({
      env: 'DF_MAX_POLL_INTERVAL_MS',
      default: 900_000,
      min: 1,
      doc: 'Every task is polled at least this often when the budget permits (hours with no work expected get this pace), in milliseconds.',
    }),
    minPollIntervalMs: milliseconds({
      env: 'DF_MIN_POLL_INTERVAL_MS',
      default: 0,
      min: 0,
      doc: 'Delay before re-polling a task whose last poll found work, in milliseconds. At most DF_MAX_POLL_INTERVAL_MS.',
    }),
    pipelinePacing: flag({
      env: 'DF_PIPELINE_PACING',
      default: true,
      doc: "Read the job definitions at start (GET jobs: one request a page, within the budget) and, when a step of a job is reported and the job's next custom step is a task served here, poll that task around the learnt delay from such a report to its arrival (a burst before any history). When the jobs cannot be read, tasks are polled as without it (DFW_PIPELINE_UNREADABLE, logged once).",
    }),
    pipelineJobList: flag({
      env: 'DF_PIPELINE_JOB_LIST',
      default: true,
      doc: "With DF_PIPELINE_PACING: read the job-executions list (GET job-executions, newest first; a quarter of the monthly budget at most, every 259 s at 40,000 a month) and, for each run seen starting, poll the tasks its start announces (a job's first custom step) around the learnt delay from a start to their arrival, instead of idle-polling them (then every 6 h). A 4xx or a run lacking jobId, status or createdAt turns it off (DFW_PIPELINE_UNREADABLE, logged once).",
    }),
    taskRefreshMs: milliseconds({
      env: 'DF_TASK_REFRESH_MS',
      default: 3_600_000,
      min: 1,
      doc: 'How often the list of tasks is fetched again while a handler has no task on the service, in milliseconds. Once every handler has its task the list is read daily (weekly while there is more work than the month can carry): each refresh is a request (per 1,000 tasks) against the same budget.',
    }),
    errorBackoffMaxMs: milliseconds({
      env: 'DF_ERROR_BACKOFF_MAX_MS',
      default: 300_000,
      min: 1,
      doc: 'Cap of every exponential back-off (failed handler attempts, reports, polls, the task list at start), in milliseconds; also how often a poll is tried while the service refuses the key (401).',
    }),
    retryBaseMs: milliseconds({
      env: 'DF_RETRY_BASE_MS',
      default: 1_000,
      min: 1,
      doc: 'First step of every exponential back-off (failed handler attempts, reports, polls, the task list at start), in milliseconds: retry n waits a random time up to DF_RETRY_BASE_MS × 2^(n-1) (full jitter; a failed poll starts one step up), at most DF_ERROR_BACKOFF_MAX_MS.',
    }),
    rateLimitPauseMs: milliseconds({
      env: 'DF_RATE_LIMIT_PAUSE_MS',
      default: 60_000,
      min: 1,
      doc: 'Pause after a 429 response that carries no Retry-After, in milliseconds.',
    }),
    retryAfterMaxMs: milliseconds({
      env: 'DF_RETRY_AFTER_MAX_MS',
      default: 120_000,
      min: 1,
      doc:
        "Longest pause a 429's Retry-After (seconds or an HTTP date) may impose on every request, reports included, " +
        'in milliseconds; a longer ask is cut to it and logged with both values. Also caps DF_RATE_LIMIT_PAUSE_MS.',
    }),
  },
  tasks: {
    sync: flag({
      env: 'DF_TASK_SYNC',
      default: false,
      doc: 'Create on the service the tasks that handlers declare and that do not exist yet.',
    }),
  },
  journal: {
    replay: oneOf({
      env: 'DF_JOURNAL_REPLAY',
      default: 'rerun',
      values: ['rerun', 'fail'],
      doc: 'What to do at start with executions claimed but not reported before a crash: run them again, or report them as failed.',
    }),
    maxCrashesPerExecution: integer({
      env: 'DF_MAX_CRASHES_PER_EXECUTION',
      default: 3,
      min: 1,
      max: 1_000,
      doc: 'Runs of one execution that may end with the daemon or its handler worker dying (killed, out of memory, process.exit) before it is reported FAILED as a poison execution and never run again.',
    }),
    recheckMs: milliseconds({
      env: 'DF_JOURNAL_RECHECK_MS',
      default: 5_000,
      min: 1,
      doc: 'After a journal write failed (disk full, read-only or missing folder), how often the folder is tried again before claiming resumes, in milliseconds.',
    }),
  },
  http: {
    port: integer({
      env: 'DF_HTTP_PORT',
      default: 9464,
      min: 0,
      max: 65_535,
      doc: 'TCP port of the health, metrics and wake endpoints; 0 picks a free port.',
    }),
    probePort: integer({
      env: 'DF_HTTP_PROBE_PORT',
      default: -1,
      min: -1,
      max: 65_535,
      doc: "TCP port of a second listener that answers GET /healthz and /readyz only, for the kubelet's probes (the chart sets 9465): a flood of the metrics port (a scraper gone wrong, a scan) then queues ahead of no probe, where on one port the probes wait behind the flood's connections. -1 (the default): the probes are answered on DF_HTTP_PORT only; 0 picks a free port. On DF_HTTP_HOST, with the cap of DF_HTTP_MAX_CONNECTIONS of its own.",
    }),
    host: string({
      env: 'DF_HTTP_HOST',
      default: '0.0.0.0',
      nonEmpty: true,
      doc: 'Address the health, metrics and wake endpoints listen on.',
    }),
    wake: oneOf({
      env: 'DF_HTTP_WAKE',
      default: 'off',
      values: ['off', 'token', 'open'],
      doc: 'The POST /wake endpoint that triggers an immediate poll: off, token (requires DF_HTTP_WAKE_TOKEN as a bearer token), or open to anyone who can reach the port.',
    }),
    wakeToken: string({
      env: 'DF_HTTP_WAKE_TOKEN',
      default: '',
      sensitive: true,
      doc: 'Bearer token the wake endpoint requires when DF_HTTP_WAKE is token; never logged.',
    }),
    metricsRenderIntervalMs: integer({
      env: 'DF_HTTP_METRICS_RENDER_INTERVAL_MS',
      default: 1_000,
      min: 0,
      max: 60_000,
      doc: 'How long one rendering of /metrics is served to every scraper before the next scrape renders a new one, in milliseconds: however many clients scrape, the daemon renders its metrics at most once per interval. 0 renders for each scrape (those arriving during a rendering still share it).',
    }),
    statusPage: flag({
      env: 'DF_HTTP_STATUS_PAGE',
      default: false,
      doc: "A read-only HTML status page at GET /status on the health and metrics port: readiness, the tasks served, the key's budget with the month's pace, recent executions with their attempts (task, durations, results; no input, output or log line, since the port may be reachable from the network) and the dead letters. Off: /status answers 404 and the page's code is never loaded, so it costs the idle daemon nothing.",
    }),
    statusPageDetails: flag({
      env: 'DF_HTTP_STATUS_PAGE_DETAILS',
      default: false,
      doc: "Whether the status page (DF_HTTP_STATUS_PAGE) shows what handlers said: failure messages, and the inputs and outputs of dead letters. Off, it shows states, counts and timings only, since a handler's message may quote its input (a secret included) and the port may be reachable from the network.",
    }),
    statusPageHosts: string({
      env: 'DF_HTTP_STATUS_PAGE_HOSTS',
      default: '',
      doc: 'Comma-separated host names (no port) GET /status and an open POST /wake (DF_HTTP_WAKE=open) answer for, besides localhost, 127.0.0.1, ::1 and IP addresses, e.g. df-worker.ops.example.com behind a proxy. Any other Host is answered 421 (a page of another site that resolves its own name to this address); /healthz, /readyz and /metrics answer whatever Host they are sent.',
    }),
    maxConnections: integer({
      env: 'DF_HTTP_MAX_CONNECTIONS',
      default: 64,
      min: 1,
      max: 10_000,
      doc: "Open connections the health, metrics and wake endpoints hold at most. A new connection over the cap takes the place of an idle one (first a keep-alive connection between requests, then one that has had 200 ms to send its request and has not), so clients that hold connections open cannot lock a probe out. While none can give way, newcomers wait unread in a line, first come first in, for the headers timeout (5 s) at most; past 1,024 waiting they are closed at once. Each request costs the daemon's event loop a little: the cap bounds how many it serves at a time.",
    }),
    maxRequestsPerSecond: integer({
      env: 'DF_HTTP_MAX_REQUESTS_PER_SECOND',
      default: 1_000,
      min: 1,
      max: 100_000,
      doc: "Requests the health, metrics and wake endpoints answer per second at most (each port its own), with a second's worth at once after a quiet spell; one over the rate waits its turn, in order. A client waiting for its answer sends no other, so a flood of the port (a scraper gone wrong, a scan) costs the daemon this many answers a second and leaves the rest of the CPU to the work: under 500 flooding clients the daemon spent 20% of a core at 1,000, against 31% unbounded, and the flooder 13% against 28%. Connections waiting for a place (DF_HTTP_MAX_CONNECTIONS) are let in at this rate too, so a probe behind 500 flooding connections is answered within half a second at 1,000; lower rates make it wait longer. Scrapers and probes ask a few a second.",
    }),
  },
  log: {
    level: oneOf({
      env: 'DF_LOG_LEVEL',
      default: 'info',
      values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      doc: 'Lowest level of the log lines written to stdout.',
    }),
    pretty: flagOrAuto({
      env: 'DF_LOG_PRETTY',
      default: 'auto',
      doc: 'Readable log lines (time, level, message, fields on one line) instead of JSON lines. auto: readable when stdout is a terminal, JSON otherwise (containers, files, pipes); false forces JSON on a terminal too.',
    }),
  },
  ignoreUnknown: string({
    env: 'DF_IGNORE_UNKNOWN',
    default: '',
    doc: "DF_* environment variables that are not df-worker settings but are meant to be there (another tool's, a handler's own), separated by commas: `start`, `dev`, `run` and `check` name every other unknown DF_* variable, with the setting it was probably meant to be, and `check` fails on them (`check --allow-unknown-settings` only warns).",
  }),
  shutdownGraceMs: milliseconds({
    env: 'DF_SHUTDOWN_GRACE_MS',
    default: 30_000,
    min: 0,
    doc: 'On SIGTERM, time running handlers get to finish and report before they are aborted, in milliseconds.',
  }),
};

type ConfigOf<S> = { [K in keyof S]: S[K] extends Setting<infer T> ? T : ConfigOf<S[K]> };

/** The loaded configuration; see `describeConfig()` or the schema for what each setting means. */
export type WorkerConfig = ConfigOf<typeof schema>;

/** A setting's dotted name (`budget.perMinute`) with its schema entry. */
export interface SettingEntry {
  setting: string;
  entry: Setting<unknown>;
}

function isSetting(node: object): node is Setting<unknown> {
  return 'default' in node && 'env' in node;
}

/** Every leaf of the schema, in declaration order. */
export function listSettings(node: object = schema, prefix = ''): SettingEntry[] {
  return Object.entries(node).flatMap(([name, child]: [string, object]) => {
    const setting = prefix === '' ? name : `${prefix}.${name}`;
    return isSetting(child) ? [{ setting, entry: child }] : listSettings(child, setting);
  });
}
