import { describe, expect, it } from 'vitest';
import { PreconditionFailedError, ServiceError } from '../../src/api/errors.ts';
import { failure, useEmulatorAndClients } from './emulator-fixture.ts';

const fx = useEmulatorAndClients({ maxUploadBytes: 2048 });

describe('ServiceClient operations for handlers', () => {
  it('reads a variable with its ETag and updates it only while the ETag is current', async () => {
    const { id } = fx.emu.createVariable({ key: 'cursor', value: '10' });
    const api = fx.client();
    const read = await api.getVariable(id);
    expect(read).toMatchObject({ etag: '"1"', variable: { id, key: 'cursor', value: '10' } });
    const updated = await api.updateVariable(id, { ...read.variable, value: '11' }, { ifMatch: read.etag });
    expect(updated).toMatchObject({ etag: '"2"', variable: { value: '11' } });
    const error = await failure(
      api.updateVariable(id, { ...read.variable, value: '12' }, { ifMatch: read.etag }),
      PreconditionFailedError,
    );
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).toMatchObject({ status: 412, code: 'PRECONDITION_FAILED', operation: 'variables.update' });
    expect(error.message).toMatch(/read it again for its new ETag/);
    expect(fx.emu.variable(id)?.value).toBe('11');
  });

  it('uploads a file and reads its record back; a too-large upload is a 413 ServiceError', async () => {
    const api = fx.client();
    const file = await api.uploadFile({ name: 'out.csv', data: new TextEncoder().encode('a,b\n') });
    expect(await api.getFile(file.id)).toMatchObject({ id: file.id, name: 'out.csv', size: 4 });
    const big = await failure(api.uploadFile({ name: 'big.bin', data: new Uint8Array(4096) }), ServiceError);
    expect(big.status).toBe(413);
    expect((await failure(api.getFile('missing'), ServiceError)).status).toBe(404);
  });

  it('creates a job execution and reads it back; reads a task execution', async () => {
    const api = fx.client();
    const created = await api.createJobExecution({ jobId: 'job-7' });
    expect(await api.getJobExecution(created.id)).toMatchObject({ id: created.id, jobId: 'job-7' });
    fx.emu.createTask({ key: 't' });
    const execution = fx.emu.enqueueExecution('t', { sku: 'A' });
    expect(await api.getExecution(execution.id)).toMatchObject({ id: execution.id, status: 'IN_PROGRESS' });
  });

  it('withGate sends through another gate on the same connections, and its close leaves them open', async () => {
    const api = fx.client();
    const seen: string[] = [];
    const sibling = api.withGate({
      acquire: (operation) => {
        seen.push(operation);
        return Promise.resolve();
      },
    });
    await sibling.createJobExecution({});
    await sibling.close();
    expect(seen).toEqual(['jobExecutions.create']);
    await expect(sibling.getJobExecution('x')).rejects.toThrow(/client is closed/);
    await api.createJobExecution({});
  });
});
