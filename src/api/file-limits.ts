// The service's published limits on files, in one place: the client refuses a larger upload before sending
// it, the emulator answers 413 past it, and the docs beside `ctx.service.files` quote both.
import type { ErrorCode } from '../errors/catalogue.ts';
import { ServiceClientError } from './errors.ts';

/**
 * Largest file the service accepts, in bytes: "100 MB" in the service's material, read as 100 × 1024 × 1024
 * (the multipart limits of Java and Node servers count MB so). A file of more is refused before it is sent.
 */
export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;

/** The service deletes an uploaded file this many days after the upload; a job must consume it before. */
export const FILE_LIFETIME_DAYS = 90;

/** An upload larger than the service accepts: refused before a byte was sent (the service would answer 413). */
export class UploadTooLargeError extends ServiceClientError {
  override name = 'UploadTooLargeError';
  override readonly code: ErrorCode = 'DFW_API_UPLOAD_TOO_LARGE';
  readonly sizeBytes: number;

  constructor(fileName: string, sizeBytes: number) {
    super(
      `files.upload of "${fileName}" was not sent: ${sizeBytes} bytes is more than the service's 100 MB ` +
        `(${MAX_UPLOAD_BYTES} bytes); split or compress the file`,
    );
    this.sizeBytes = sizeBytes;
  }
}

/** Throws UploadTooLargeError when `sizeBytes` is past the service's limit. */
export function checkUploadSize(fileName: string, sizeBytes: number): void {
  if (sizeBytes > MAX_UPLOAD_BYTES) throw new UploadTooLargeError(fileName, sizeBytes);
}
