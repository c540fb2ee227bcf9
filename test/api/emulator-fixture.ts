// One emulator per test file (limits off: the limiter has its own tests) and the clients a test creates,
// closed after each test. Register it at the top of a file: `const fx = useEmulatorAndClients();`.
import type { EventEmitter } from 'node:events';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { ServiceClient, type ServiceClientOptions } from '../../src/api/client.ts';
import { Emulator, type EmulatorOptions } from '../../src/emulator/index.ts';
import { WorkerEvents, type WorkerEventMap } from '../../src/events/worker-events.ts';

export const KEY = 'k1-secret-key';

/** An emitter to give a client as its `events`, and every `name` event it told so far. */
export function told<K extends keyof WorkerEventMap>(
  name: K,
): { events: WorkerEvents; seen: WorkerEventMap[K][0][] } {
  const events = new WorkerEvents();
  const seen: WorkerEventMap[K][0][] = [];
  const listener = (...payload: WorkerEventMap[K]) => void seen.push(payload[0]);
  (events as EventEmitter).on(name, listener as (...args: unknown[]) => void);
  return { events, seen };
}

export interface ClientFixture {
  readonly emu: Emulator;
  readonly url: string;
  client(options?: Partial<ServiceClientOptions>): ServiceClient;
}

export function useEmulatorAndClients(options: EmulatorOptions = {}): ClientFixture {
  let emu: Emulator | undefined;
  let url = '';
  const clients: ServiceClient[] = [];
  beforeAll(async () => {
    emu = new Emulator({ apiKeys: [KEY], limits: { perSecond: 0, perMinute: 0, perMonth: 0 }, ...options });
    url = await emu.listen();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    emu?.reset();
  });
  afterAll(async () => {
    await emu?.close();
  });
  return {
    get emu() {
      if (!emu) throw new Error('the emulator starts in beforeAll');
      return emu;
    },
    get url() {
      return url;
    },
    client(clientOptions = {}) {
      const created = new ServiceClient({ baseUrl: url, apiKey: KEY, ...clientOptions });
      clients.push(created);
      return created;
    },
  };
}

/** The rejection of `promise`, checked to be an instance of `type`. */
export async function failure<T extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => T,
): Promise<T> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}
