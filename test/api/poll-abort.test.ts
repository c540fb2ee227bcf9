// pollTask's signal against the emulator over loopback: it cancels the wait for the budget gate, but never a
// poll already sent, whose answer hands over an execution the service has just claimed for this client.
import { describe, expect, it, vi } from 'vitest';
import type { ServiceClient } from '../../src/api/client.ts';
import type { RequestGate } from '../../src/api/client.ts';
import type { Operation } from '../../src/api/types.ts';
import type { WorkerEvents } from '../../src/events/worker-events.ts';
import { told, useEmulatorAndClients } from './emulator-fixture.ts';

const POLL_LATENCY_MS = 300;
const fx = useEmulatorAndClients();
const emu = () => fx.emu;

function client(gate?: RequestGate, events?: WorkerEvents): ServiceClient {
  return fx.client({ ...(gate ? { gate } : {}), ...(events ? { events } : {}) });
}

/** Resolves once the emulator has received a request for `operation` (it logs it on arrival, before any latency). */
async function arrived(operation: Operation): Promise<void> {
  await vi.waitFor(
    () => {
      expect(
        emu()
          .requests()
          .some((r) => r.operation === operation),
      ).toBe(true);
    },
    { timeout: 5_000, interval: 5 },
  );
}

/** A gate that lets nothing through: its acquire settles only by rejecting with the signal's reason. */
function closedGate(): { gate: RequestGate; waiting: Operation[] } {
  const waiting: Operation[] = [];
  const gate: RequestGate = {
    acquire: (operation, signal) =>
      new Promise<void>((_resolve, reject) => {
        waiting.push(operation);
        signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      }),
  };
  return { gate, waiting };
}

describe('pollTask abort signal', () => {
  it('still resolves with the claimed execution when the signal aborts after the poll was sent', async () => {
    const task = emu().createTask({ key: 'enrich' });
    const queued = emu().enqueueExecution(task.id, { sku: 'A' });
    emu().setFaults([{ operation: 'tasks.poll', kind: 'latency', ms: POLL_LATENCY_MS }]);
    const { events: emitter, seen: events } = told('response');
    const controller = new AbortController();

    const polling = client(undefined, emitter).pollTask(task.id, controller.signal);
    // Abort while the emulator holds the answer back: the service has claimed the execution by then.
    await arrived('tasks.poll');
    controller.abort(new Error('shutting down'));
    expect(emu().requests()).toMatchObject([{ operation: 'tasks.poll', status: 0 }]);

    const polled = await polling;
    expect(polled).toMatchObject({ id: queued.id, taskId: task.id, input: { sku: 'A' } });
    expect(emu().requests()).toMatchObject([{ operation: 'tasks.poll', status: 200 }]);
    expect(emu().executions()[0]?.claimedAt).toEqual(expect.any(String));
    expect(events).toMatchObject([{ operation: 'tasks.poll', status: 200 }]);
  });

  it('still cuts other requests short when their signal aborts after sending', async () => {
    const task = emu().createTask({ key: 'enrich' });
    const queued = emu().enqueueExecution(task.id, { sku: 'A' });
    // Held back far longer than the test runs: only the abort can end this call.
    emu().setFaults([{ operation: 'executions.get', kind: 'latency', ms: 30_000 }]);
    const controller = new AbortController();
    const reason = new Error('shutting down');

    const getting = client().getExecution(queued.id, controller.signal);
    await arrived('executions.get');
    controller.abort(reason);

    await expect(getting).rejects.toBe(reason);
  });

  it('rejects with the signal reason and sends no poll when the signal aborts while the gate waits', async () => {
    const task = emu().createTask({ key: 'enrich' });
    emu().enqueueExecution(task.id, { sku: 'A' });
    const { gate, waiting } = closedGate();
    const controller = new AbortController();
    const reason = new Error('shutting down');

    const polling = client(gate).pollTask(task.id, controller.signal);
    expect(waiting).toEqual(['tasks.poll']);
    controller.abort(reason);

    await expect(polling).rejects.toBe(reason);
    expect(emu().requests()).toEqual([]);
    expect(emu().executions()[0]?.claimedAt).toBeUndefined();
  });

  it('sends no poll when the signal aborted during a gate wait that ignores the signal', async () => {
    const task = emu().createTask({ key: 'enrich' });
    emu().enqueueExecution(task.id, { sku: 'A' });
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const gate: RequestGate = {
      acquire: () => {
        controller.abort(reason);
        return Promise.resolve();
      },
    };

    await expect(client(gate).pollTask(task.id, controller.signal)).rejects.toBe(reason);
    expect(emu().requests()).toEqual([]);
  });
});
