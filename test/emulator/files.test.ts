import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Emulator } from '../../src/emulator/index.ts';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { anyString, call, KEY, startEmulator } from './helpers.ts';

const FILES = '/v2/data-factory/files';
let emulator: Emulator;

beforeEach(async () => {
  emulator = await startEmulator({ clock: new ManualClock(Date.UTC(2026, 4, 1)), maxUploadBytes: 1024 });
});
afterEach(() => emulator.close());

function upload(form: FormData): Promise<Response> {
  return fetch(emulator.url + FILES, { method: 'POST', headers: { 'x-api-key': KEY }, body: form });
}

describe('v2 file upload', () => {
  it('answers 201 with the file record of the first file part', async () => {
    const form = new FormData();
    form.set('note', 'not a file');
    form.set('file', new Blob(['a,b\n1,2\n'], { type: 'text/csv' }), 'rows.csv');
    const response = await upload(form);
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({
      object: 'file',
      id: anyString,
      name: 'rows.csv',
      size: 8,
      contentType: 'text/csv',
      createdAt: '2026-05-01T00:00:00.000Z',
    });
    expect(emulator.requests()[0]).toMatchObject({ operation: 'files.upload', status: 201 });
  });

  it('answers 413 with only a message when the body exceeds maxUploadBytes', async () => {
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(2048)]), 'big.bin');
    const response = await upload(form);
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({ message: anyString });
  });

  it('answers 400 with only a message when the body is not multipart or has no file part', async () => {
    const json = await call(emulator, 'POST', FILES, { body: { file: 'inline' } });
    expect(json.status).toBe(400);
    expect(json.json).toEqual({ message: anyString });
    const form = new FormData();
    form.set('note', 'no file here');
    const noFile = await upload(form);
    expect(noFile.status).toBe(400);
    expect(await noFile.json()).toEqual({ message: anyString });
  });
});
