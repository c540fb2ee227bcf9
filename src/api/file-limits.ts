// The service's published limits on files, in one place: the client refuses a larger upload before sending
// it, the emulator answers 413 past it, and the docs beside `ctx.service.files` quote both.

/**
 * Largest file the service accepts, in bytes: "100 MB" in the service's material, read as 100 × 1024 × 1024
 * (the multipart limits of Java and Node servers count MB so). A file of more is refused before it is sent.
 */
export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;

/** The service deletes an uploaded file this many days after the upload; a job must consume it before. */
export const FILE_LIFETIME_DAYS = 90;
