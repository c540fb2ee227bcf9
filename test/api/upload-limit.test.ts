// The service's 100 MB upload limit, kept by the client: a larger file is refused before a byte is sent.
import { describe, expect, it } from 'vitest';
import { UploadTooLargeError } from '../../src/api/file-limits.ts';
import { MAX_UPLOAD_BYTES } from '../../src/api/service-limits.ts';
import { failure, useEmulatorAndClients } from './emulator-fixture.ts';

const fx = useEmulatorAndClients();

describe('uploadFile and the 100 MB limit', () => {
  it('refuses a file over 100 MB with DFW_API_UPLOAD_TOO_LARGE and sends nothing', async () => {
    const data = new Blob([new Uint8Array(MAX_UPLOAD_BYTES + 1)]);
    const error = await failure(fx.client().uploadFile({ name: 'big.bin', data }), UploadTooLargeError);
    expect(error.code).toBe('DFW_API_UPLOAD_TOO_LARGE');
    expect(error.sizeBytes).toBe(MAX_UPLOAD_BYTES + 1);
    expect(error.message).toContain('big.bin');
    expect(fx.emu.requests()).toEqual([]);
  });
});
