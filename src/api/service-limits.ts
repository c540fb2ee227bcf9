// The service's published limits, in one place (its API material, part 8 "Limits", and the file rules): the
// settings' defaults, the emulator, the month replay, the upload check and the CLI's help texts read them here.
// Imports nothing, so any module may use it; a change of the service's limits is a change of this file alone.

/** Requests the service accepts per API key: its burst, its default rate and its monthly quota. */
export interface RequestLimits {
  /** In any sliding 1 s window ("Burst: 5 requests per second"). */
  perSecond: number;
  /** In any sliding 60 s window ("Default rate: 50 requests per minute, counted per API key"). */
  perMinute: number;
  /** In one calendar month ("Monthly: 40,000 requests per month"). */
  perMonth: number;
}

export const SERVICE_REQUEST_LIMITS: Readonly<RequestLimits> = Object.freeze({
  perSecond: 5,
  perMinute: 50,
  perMonth: 40_000,
});

/** The limits as the docs and help texts quote them: `5/s, 50/min, 40,000/month`. */
export const SERVICE_REQUEST_LIMITS_TEXT =
  `${SERVICE_REQUEST_LIMITS.perSecond}/s, ${SERVICE_REQUEST_LIMITS.perMinute}/min, ` +
  `${withThousands(SERVICE_REQUEST_LIMITS.perMonth)}/month`;

/**
 * `40000` as `40,000`. Not toLocaleString: this module loads with the daemon, and Intl's first use pages in
 * its locale data, ~8 MB of resident memory for the daemon's whole life.
 */
function withThousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Largest page a list or find answers ("Page size: maximum 1000"). */
export const MAX_PAGE_SIZE = 1000;

/**
 * Largest file the service accepts, in bytes: "100 MB" in the service's material, read as 100 × 1024 × 1024
 * (the multipart limits of Java and Node servers count MB so). A file of more is refused before it is sent.
 */
export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;

/** The service deletes an uploaded file this many days after the upload; a job must consume it before. */
export const FILE_LIFETIME_DAYS = 90;
