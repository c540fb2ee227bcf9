// The output of a FAILED report as the service's jobs read it: `message`, as the official module writes
// (`{ message: 'Task failed "..."' }`), beside df-worker's own keys (`error`, `errorName`, `attempts`...).
// Applied to every FAILED outcome df-worker builds, where it is built and again where a report leaves.
import type { JsonObject } from '../api/types.ts';

/** What a job reads when nothing more specific is known. */
const FALLBACK_MESSAGE = 'the task failed';

/**
 * `output` with a string `message`: its own when it has one, else its `error` (a string, or an object's
 * `message`), else a fallback; every other key is kept as it is.
 */
export function withFailureMessage(output: JsonObject): JsonObject {
  if (typeof output.message === 'string' && output.message !== '') return output;
  return { ...output, message: messageOf(output.error) };
}

function messageOf(error: unknown): string {
  if (typeof error === 'string' && error !== '') return error;
  if (typeof error === 'object' && error !== null && 'message' in error) {
    const { message } = error;
    if (typeof message === 'string' && message !== '') return message;
  }
  return FALLBACK_MESSAGE;
}
