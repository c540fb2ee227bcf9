// A handler's own tests with ctx.service: runTaskLocally given a client on the emulator, all from the package's
// public API, as a project's test file would import it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  defineTask,
  Emulator,
  PreconditionFailedError,
  runTaskLocally,
  ServiceCallRefusedError,
  ServiceClient,
} from 'df-worker';

const bumpCounter = defineTask({
  key: 'bump-counter',
  inputKeys: ['variableId'],
  outputKeys: ['value', 'reportFileId'],
  handle: async (input, ctx) => {
    const { variable, etag } = await ctx.service.variables.get(String(input.variableId));
    const value = String(Number(variable.value) + 1);
    await ctx.service.variables.update(variable.id, { ...variable, value }, { ifMatch: etag });
    const file = await ctx.service.files.upload({ name: 'counter.txt', data: value });
    return { value, reportFileId: file.id };
  },
});

let emulator: Emulator;
let service: ServiceClient;
beforeAll(async () => {
  // Limits off: with no daemon there is no budget in front of this client to keep within them.
  emulator = new Emulator({ limits: { perSecond: 0, perMinute: 0, perMonth: 0 } });
  service = new ServiceClient({ baseUrl: await emulator.listen(), apiKey: 'emulator-key' });
});
afterAll(async () => {
  await service.close();
  await emulator.close();
});

describe('runTaskLocally with a service', () => {
  it('gives the handler ctx.service on the emulator', async () => {
    const { id } = emulator.createVariable({ key: 'counter', value: '41' });
    const outcome = await runTaskLocally(bumpCounter, { variableId: id }, { service });
    expect(outcome).toMatchObject({ status: 'COMPLETED', output: { value: '42' } });
    expect(emulator.variable(id)).toMatchObject({ value: '42', etag: '"2"' });
  });

  it('lets the handler tell a stale ETag from other failures', async () => {
    const { id } = emulator.createVariable({ key: 'counter', value: '1' });
    const racing = defineTask({
      key: 'racing',
      outputKeys: ['lost'],
      handle: async (_input, ctx) => {
        const read = await ctx.service.variables.get(id);
        await ctx.service.variables.update(id, { ...read.variable, value: '2' }); // unconditional: moves the ETag
        try {
          await ctx.service.variables.update(id, { ...read.variable, value: '3' }, { ifMatch: read.etag });
          return { lost: false };
        } catch (error) {
          if (error instanceof PreconditionFailedError) return { lost: true };
          throw error;
        }
      },
    });
    const outcome = await runTaskLocally(racing, {}, { service });
    expect(outcome.output).toEqual({ lost: true });
    expect(emulator.variable(id)?.value).toBe('2');
  });

  it('refuses calls, saying what to pass, when no service is given', async () => {
    let refused: unknown;
    const handler = defineTask({
      key: 'no-service',
      handle: async (_input, ctx) => {
        refused = await ctx.service.files.get('f').catch((error: unknown) => error);
        return {};
      },
    });
    await runTaskLocally(handler, {});
    expect(refused).toBeInstanceOf(ServiceCallRefusedError);
    expect((refused as Error).message).toMatch(/pass `service`.*to runTaskLocally/);
  });
});
