// What a failed connection means for the user, by the error's code: a host that does not resolve, a port where
// nothing listens, a scheme that does not match the server. Each names the setting holding the URL (DF_API_URL
// in the daemon) and what to change there; the transport puts it in its NetworkError.

/** The cause in plain words and what to do about it. */
export interface NetworkFailureAdvice {
  /** E.g. `nothing accepts connections at 127.0.0.1:8080 (ECONNREFUSED)`. */
  cause: string;
  /** E.g. `Check the host and port in DF_API_URL, and that the service is running there`. */
  advice: string;
}

/** Codes of a TLS handshake with a server that answered in plain HTTP (OpenSSL's record-layer errors). */
const NOT_TLS = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'EPROTO']);

/** Codes of a certificate Node does not trust for the host. */
const UNTRUSTED_CERTIFICATE = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * Advice for a request to `origin` that failed with `code` before an answer came, or undefined when the code
 * says nothing about the URL (the caller then keeps the error's own text). `urlSetting` names where the URL
 * was set, e.g. `DF_API_URL`.
 */
export function adviseNetworkFailure(
  code: string | undefined,
  origin: string,
  urlSetting: string,
  sent: boolean,
): NetworkFailureAdvice | undefined {
  const url = new URL(origin);
  const hostPort = url.host;
  switch (code) {
    case 'ENOTFOUND':
      return {
        cause: `the host name ${url.hostname} does not resolve (ENOTFOUND)`,
        advice: `Check the host in ${urlSetting} (a typo?) and that this machine's DNS knows it`,
      };
    case 'EAI_AGAIN':
      return {
        cause: `DNS gave no answer for ${url.hostname} (EAI_AGAIN)`,
        advice: `Retry; if it persists, check this machine's DNS and the host in ${urlSetting}`,
      };
    case 'ECONNREFUSED':
      return {
        cause: `nothing accepts connections at ${hostPort} (ECONNREFUSED)`,
        advice: `Check the host and port in ${urlSetting}, and that the service (or the emulator) runs there`,
      };
  }
  if (code !== undefined && NOT_TLS.has(code) && url.protocol === 'https:') {
    const plain = new URL(origin);
    plain.protocol = 'http:';
    return {
      cause: `the server at ${hostPort} does not speak TLS (${code})`,
      advice: `The scheme is likely wrong: ${urlSetting} should start with http:// (${plain.origin}), or point at the service's https port`,
    };
  }
  if (code !== undefined && UNTRUSTED_CERTIFICATE.has(code)) {
    return {
      cause: `the TLS certificate of ${url.hostname} is not trusted (${code})`,
      advice:
        `Check the host in ${urlSetting}; for a certificate of a private authority, ` +
        'set NODE_EXTRA_CA_CERTS to its PEM file',
    };
  }
  if (sent && url.protocol === 'http:' && (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET')) {
    const secure = new URL(origin);
    secure.protocol = 'https:';
    return {
      cause: `the server at ${hostPort} closed the connection without an answer (${code})`,
      advice:
        `Retry; if every request ends so, the server may expect TLS: ${urlSetting} should then start with ` +
        `https:// (${secure.origin})`,
    };
  }
  return undefined;
}
