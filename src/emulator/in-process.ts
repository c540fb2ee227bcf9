// The emulator answering in process: no socket and no timer, so a request takes no wall-clock time. The month
// replay and the unit tests of the daemon's parts use it as the service client's transport.
import type { ServiceTransport } from '../api/client.ts';
import { NetworkError } from '../api/errors.ts';
import type { Answer } from '../api/response.ts';
import type { OutgoingRequest } from '../api/transport.ts';
import type { Operation } from '../api/types.ts';
import type { Emulator } from './emulator.ts';

/**
 * Carries requests to `emulator.answer()`, the month replay's transport. `beforeSend` runs before each request
 * reaches the emulator (to look at the world as the service sees it then). A dropped connection (the `drop`
 * and `dropAfterApply` faults) is a NetworkError, as from the real transport: the request was sent. With
 * `dateHeader`, answers carry the emulator's clock in a Date header as over HTTP (whole seconds); without
 * it they carry none, and the client reads createdAt against its own wall clock, exactly (the month replay).
 */
export function inProcessTransport(
  emulator: Emulator,
  beforeSend?: (operation: Operation, request: OutgoingRequest) => void | Promise<void>,
  options: { dateHeader?: boolean } = {},
): ServiceTransport {
  return {
    async send(operation, request, _signal, onSent): Promise<Answer> {
      if (typeof request.body !== 'string' && request.body !== undefined) {
        throw new Error('the in-process transport carries JSON bodies only');
      }
      await beforeSend?.(operation, request);
      onSent?.();
      const answer = await emulator.answer({
        method: request.method,
        path: request.path,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body }),
      });
      if (!answer) {
        throw new NetworkError(
          operation,
          `${operation} failed: the connection closed unanswered`,
          undefined,
          {
            sent: true,
          },
        );
      }
      const headers = options.dateHeader
        ? { date: new Date(emulator.now()).toUTCString(), ...answer.headers }
        : answer.headers;
      return { status: answer.status, headers, text: answer.body ?? '' };
    },
    close: () => Promise.resolve(),
  };
}
