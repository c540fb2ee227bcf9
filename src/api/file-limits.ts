// The upload check: the client refuses a file past the service's limit (service-limits.ts) before sending it,
// as the emulator answers 413 past the same limit.
import type { ErrorCode } from '../errors/catalogue.ts';
import { ServiceClientError } from './errors.ts';
import { MAX_UPLOAD_BYTES } from './service-limits.ts';

/** An upload larger than the service accepts: refused before a byte was sent (the service would answer 413). */
export class UploadTooLargeError extends ServiceClientError {
  override name = 'UploadTooLargeError';
  override readonly code: ErrorCode = 'DFW_API_UPLOAD_TOO_LARGE';
  readonly sizeBytes: number;

  constructor(fileName: string, sizeBytes: number) {
    super(
      `files.upload of "${fileName}" was not sent: ${sizeBytes} bytes is more than the service's ${MAX_UPLOAD_BYTES / 1024 / 1024} MB ` +
        `(${MAX_UPLOAD_BYTES} bytes); split or compress the file`,
    );
    this.sizeBytes = sizeBytes;
  }
}

/** Throws UploadTooLargeError when `sizeBytes` is past the service's limit. */
export function checkUploadSize(fileName: string, sizeBytes: number): void {
  if (sizeBytes > MAX_UPLOAD_BYTES) throw new UploadTooLargeError(fileName, sizeBytes);
}
