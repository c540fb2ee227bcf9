// Which Node.js df-worker runs on: checked first by every entry point (the CLI, the package import), before a
// module that needs a newer Node (undici, node:module's compile cache, type stripping) fails with its own stack.
// This file imports nothing at run time (types only), so it loads on any Node that runs ES modules.
import type { ErrorCode } from '../errors/catalogue.ts';

/** The oldest Node.js df-worker supports, as package.json's "engines" says. */
export const REQUIRED_NODE = { major: 22, minor: 19 } as const;

/**
 * Why `version` (e.g. "20.20.2", default the running Node's) is too old for df-worker, in one line naming the
 * version needed; undefined when it is recent enough.
 */
export function nodeVersionProblem(version: string = process.versions.node): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const { major: wantMajor, minor: wantMinor } = REQUIRED_NODE;
  if (major > wantMajor || (major === wantMajor && minor >= wantMinor)) return undefined;
  return (
    `df-worker needs Node.js >= ${wantMajor}.${wantMinor}; this is Node.js ${version} (${process.execPath}). ` +
    `Install Node.js ${wantMajor}.${wantMinor} or later (24 LTS is recommended), then run it again`
  );
}

/** Thrown when df-worker is imported on a Node.js older than REQUIRED_NODE. */
export class UnsupportedNodeError extends Error {
  readonly code: ErrorCode = 'DFW_NODE_UNSUPPORTED';

  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedNodeError';
    // The stack would point into this file, not at the cause: the message alone says what to do.
    this.stack = `${this.name}: ${message}`;
  }
}
