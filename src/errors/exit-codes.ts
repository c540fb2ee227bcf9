// Every exit code df-worker's process can end with, in one table beside the error catalogue: what scripts and
// supervisors read from `$?`. A code keeps its meaning from one release to the next; the table in
// src/errors/README.md is generated from this one by `npm run docs`. Imports nothing, so any module may use it.

/** One exit code: its number and what it tells whoever started the process. */
export interface ExitCodeEntry {
  code: number;
  /** One line: why the process ended with it, and what the one who started it should do. */
  meaning: string;
}

export const EXIT_CODES = {
  EXIT_OK: {
    code: 0,
    meaning: 'The command did what it was asked; `start` drained and reported every outcome',
  },
  EXIT_FAILURE: {
    code: 1,
    meaning: 'The command failed (a refused start, a handler that did not load...); the output says why',
  },
  EXIT_USAGE: {
    code: 2,
    meaning: 'The command line cannot be understood (a bad option, a missing argument); see `--help`',
  },
  EXIT_INTERNAL_ERROR: {
    code: 70,
    meaning:
      'sysexits EX_SOFTWARE: the daemon met an error of its own and exited rather than go on in doubt (the journal replays on restart)',
  },
  EXIT_STATE_LOCK_LOST: {
    code: 75,
    meaning:
      "sysexits EX_TEMPFAIL: the state folder's lock vanished or changed owner; another daemon may use `DF_STATE_DIR`",
  },
  EXIT_CONFIG: {
    code: 78,
    meaning:
      'sysexits EX_CONFIG: the configuration is wrong (`DFW_CONFIG_INVALID`); restarting will not help',
  },
  EXIT_SECOND_SIGNAL: {
    code: 130,
    meaning:
      'A second SIGTERM or SIGINT during the drain: exited at once; unreported outcomes stay in the journal',
  },
} as const satisfies Record<string, ExitCodeEntry>;

export type ExitCodeName = keyof typeof EXIT_CODES;

export const EXIT_OK = EXIT_CODES.EXIT_OK.code;
export const EXIT_FAILURE = EXIT_CODES.EXIT_FAILURE.code;
/** Exit code for a command line that cannot be understood (bad option, missing argument). */
export const EXIT_USAGE = EXIT_CODES.EXIT_USAGE.code;
/** sysexits EX_SOFTWARE: the daemon met an error of its own and exited rather than go on in doubt. */
export const EXIT_INTERNAL_ERROR = EXIT_CODES.EXIT_INTERNAL_ERROR.code;
/**
 * Exit code of a daemon that stopped because its state folder's lock vanished or changed owner (sysexits
 * EX_TEMPFAIL): another daemon may use the folder and the key; a supervisor restarting it meets that lock.
 */
export const EXIT_STATE_LOCK_LOST = EXIT_CODES.EXIT_STATE_LOCK_LOST.code;
/** sysexits EX_CONFIG: the configuration is wrong; restarting will not help. */
export const EXIT_CONFIG = EXIT_CODES.EXIT_CONFIG.code;
/** A second signal during the drain: exit now, as a shell does for an interrupted command (128 + SIGINT). */
export const EXIT_SECOND_SIGNAL = EXIT_CODES.EXIT_SECOND_SIGNAL.code;
