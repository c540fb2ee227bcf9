// Every error df-worker throws on purpose, by a stable `DFW_*` code: the code is what logs (`err.code`), the CLI
// (`error DFW_CONFIG_INVALID: ...`), alerts and the generated table in src/errors/README.md name. A code never
// changes meaning once released; a new kind of failure gets a new code. Imports nothing, so any module may use it.

/** One code: what it means to the user and which error classes carry it. */
export interface CatalogueEntry {
  /** One line: what happened, in the user's words. */
  meaning: string;
  /** The classes that carry this code, by their `name`. */
  errors: readonly string[];
}

export const ERROR_CATALOGUE = {
  DFW_CONFIG_INVALID: {
    meaning:
      'A setting (`DF_*` variable, `DF_CONFIG` file or option) is invalid; the message lists every one',
    errors: ['ConfigError'],
  },
  DFW_CONFIG_UNKNOWN_SETTING: {
    meaning:
      'A `DF_*` variable is no df-worker setting (a typo?); `check` fails on it unless it is in `DF_IGNORE_UNKNOWN`',
    errors: ['UnknownSettingsError'],
  },
  DFW_NODE_UNSUPPORTED: {
    meaning: 'The Node.js running df-worker is older than it needs',
    errors: ['UnsupportedNodeError'],
  },
  DFW_STARTUP_FAILED: {
    meaning:
      'The daemon refused to start (a refused API key, no task for a handler...); the message says what to fix',
    errors: ['StartupError'],
  },
  DFW_API_CLIENT: {
    meaning: 'The service client refused a call without sending it (the client was closed)',
    errors: ['ServiceClientError'],
  },
  DFW_API_STATUS: {
    meaning:
      "The service answered an error status; `status` and the service's own `code` (NOT_FOUND...) say which",
    errors: ['ServiceError'],
  },
  DFW_API_PRECONDITION_FAILED: {
    meaning: 'An update carried an If-Match version the resource no longer has (412); nothing changed',
    errors: ['PreconditionFailedError'],
  },
  DFW_API_NETWORK: {
    meaning: 'No answer from the service: DNS failure, connection refused or reset (check `DF_API_URL`)',
    errors: ['NetworkError'],
  },
  DFW_API_TIMEOUT: {
    meaning: 'The service did not answer within a `DF_API_*_TIMEOUT_MS` limit; the message names which',
    errors: ['TimeoutError'],
  },
  DFW_API_BAD_ANSWER: {
    meaning: "A success answer does not have the service's documented shape (a proxy, or an API change)",
    errors: ['ResponseValidationError'],
  },
  DFW_API_BAD_REPORT: {
    meaning: 'A report the service would refuse (bad status or output); nothing was sent',
    errors: ['ReportValidationError'],
  },
  DFW_API_PATH_STYLE_UNKNOWN: {
    meaning:
      'Neither spelling of the data-factory paths (`data_factory`, `data-factory`) answered the task list: check `DF_API_URL` and `DF_API_PATH_STYLE`',
    errors: ['PathStyleError'],
  },
  DFW_API_UPLOAD_TOO_LARGE: {
    meaning: "A file upload is larger than the service's 100 MB; nothing was sent",
    errors: ['UploadTooLargeError'],
  },
  DFW_SERVICE_CALL_REFUSED: {
    meaning: "A handler's `ctx.service` call was not sent: its attempt had ended or was aborted",
    errors: ['ServiceCallRefusedError'],
  },
  DFW_BUDGET_EXHAUSTED: {
    meaning: "The API key's monthly budget (`DF_BUDGET_PER_MONTH`) has no request left for this call",
    errors: ['BudgetExhaustedError'],
  },
  DFW_BUDGET_STATE_LOST: {
    meaning: "`budget.json` contradicts the rest of the state folder; the month's usage is estimated",
    errors: ['BudgetStateLostError'],
  },
  DFW_BUDGET_STATE_INVALID: {
    meaning: "`budget.json` is not a month's budget usage; the usage is estimated and the file rewritten",
    errors: ['BudgetStateError'],
  },
  DFW_HANDLER_LOAD: {
    meaning: 'A handler module could not be loaded or used; the message names the file',
    errors: ['HandlerLoadError'],
  },
  DFW_HANDLERS_LOAD: {
    meaning: 'Handler modules failed to load, one line each (see DFW_HANDLER_LOAD)',
    errors: ['HandlerLoadErrors'],
  },
  DFW_HANDLERS_DIR: {
    meaning: 'The handlers folder (`DF_HANDLERS_DIR`) is missing, not a folder or holds no handler module',
    errors: ['HandlersDirectoryError'],
  },
  DFW_TASK_DEFINITION_INVALID: {
    meaning: 'A `defineTask({...})` spec is invalid; the message lists every bad member',
    errors: ['TaskDefinitionError'],
  },
  DFW_HANDLER_NON_RETRYABLE: {
    meaning: 'A handler failed the execution at once (`NonRetryableError`): no retry',
    errors: ['NonRetryableError'],
  },
  DFW_HANDLER_TIMEOUT: {
    meaning: "An attempt ran past its task's `timeoutMs` (or `DF_HANDLER_TIMEOUT_MS`)",
    errors: ['HandlerTimeoutError'],
  },
  DFW_HANDLER_CRASH: {
    meaning: 'What ran the handler died during the attempt (a crash, out of memory, `process.exit`)',
    errors: ['HandlerCrashError'],
  },
  DFW_HANDLER_TMPDIR: {
    meaning:
      "An attempt's private folder (`ctx.tmpDir`) could not be made (the attempt fails) or removed (logged)",
    errors: ['AttemptTmpDirError'],
  },
  DFW_JOURNAL_UNAVAILABLE: {
    meaning: 'The state folder (`DF_STATE_DIR`) cannot hold the execution journal',
    errors: ['JournalUnavailableError'],
  },
  DFW_JOURNAL_WRITE: {
    meaning: 'A journal record did not reach the disk; no execution is claimed until it can be written',
    errors: ['JournalWriteError'],
  },
  DFW_JOURNAL_ENTRY_NOT_FOUND: {
    meaning: 'The journal holds no record of the execution named (never claimed, or already done)',
    errors: ['JournalEntryNotFoundError'],
  },
  DFW_STATE_FILE_INVALID: {
    meaning: 'A file in the state folder does not hold valid JSON',
    errors: ['JsonFileError'],
  },
  DFW_STATE_LOCKED: {
    meaning: 'Another df-worker uses the state folder (`DF_STATE_DIR`)',
    errors: ['StateFolderLockedError'],
  },
  DFW_REPLICA_ID_IN_USE: {
    meaning:
      'Another live process runs in clustered mode under the same `DF_REPLICA_ID`; give each replica its own',
    errors: ['ReplicaIdInUseError'],
  },
  DFW_CLI_INPUT_INVALID: {
    meaning: '`df-worker run --input` is unreadable, not JSON or not a JSON object',
    errors: ['InputError'],
  },
  DFW_CLI_SCAFFOLD_EXISTS: {
    meaning: '`df-worker new` would overwrite a handler or its test; nothing was written',
    errors: ['ScaffoldExistsError'],
  },
  DFW_CLI_INIT_NOT_EMPTY: {
    meaning:
      '`df-worker init` was given a folder that is not empty; nothing was written (`--force` writes anyway)',
    errors: ['ProjectFolderNotEmptyError'],
  },
  DFW_CLI_NO_DEV_SESSION: {
    meaning: 'No `df-worker dev` session runs for this state folder',
    errors: ['NoDevSessionError'],
  },
  DFW_EMULATOR_UNKNOWN_TASK: {
    meaning: 'The emulator has no task with the id or key named',
    errors: ['UnknownTaskError'],
  },
  DFW_EMULATOR_TASK_INVALID: {
    meaning: 'An emulator task definition lacks its key or has a member of the wrong type',
    errors: ['InvalidTaskDefinitionError'],
  },
  DFW_EMULATOR_VARIABLE_EXISTS: {
    meaning: 'An emulator variable was created with an id that another variable has',
    errors: ['VariableExistsError'],
  },
  DFW_EMULATOR_FAULT_INVALID: {
    meaning:
      'An emulator fault rule is malformed; the message names the rule and the member, and where the format is',
    errors: ['InvalidFaultRuleError'],
  },
  DFW_EMULATOR_STATE: {
    meaning: 'The emulator was asked for its URL before `listen()`, or to listen twice',
    errors: ['EmulatorStateError'],
  },
  DFW_HTTP_REFUSED: {
    meaning:
      "A local server (emulator, console, the daemon's port) refused a request a web page could send: a foreign Host, cross-site, or not JSON",
    errors: ['RequestRefusedError'],
  },
  DFW_PIPELINE_UNREADABLE: {
    meaning:
      'The job definitions could not be read or held no usable job: successor pacing is off (logged once)',
    errors: ['PipelineUnreadableError'],
  },
} as const satisfies Record<`DFW_${string}`, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/**
 * Error classes that never leave the module declaring them (control flow, or a cause wrapped by a catalogued
 * error), so they carry no code.
 */
export const INTERNAL_ERRORS: readonly string[] = [
  'LimitExpired',
  'JsonStop',
  'NotJsonError',
  'UnreadableOutputError',
];

const CODE_BY_CLASS = new Map<string, ErrorCode>(
  Object.entries(ERROR_CATALOGUE).flatMap(([code, entry]) =>
    entry.errors.map((name) => [name, code as ErrorCode] as const),
  ),
);

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CATALOGUE, value);
}

/**
 * The catalogue's code for a thrown value: its own `code` when catalogued, else the code of its class by name
 * (a ServiceError's `code` is the service's own). Undefined for anything else. Never throws.
 */
export function errorCodeOf(error: unknown): ErrorCode | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  try {
    const { code, name } = error as { code?: unknown; name?: unknown };
    if (isErrorCode(code)) return code;
    return typeof name === 'string' ? CODE_BY_CLASS.get(name) : undefined;
  } catch {
    return undefined; // a getter or proxy trap that throws
  }
}

/**
 * What the CLI prints for an error: `error DFW_CONFIG_INVALID: <text>` for a catalogued one, `<text>` alone for
 * anything else. `text` is the error's message unless the caller words it better.
 */
export function describeError(
  error: unknown,
  text = error instanceof Error ? error.message : String(error),
): string {
  const code = errorCodeOf(error);
  return code === undefined ? text : `error ${code}: ${text}`;
}
