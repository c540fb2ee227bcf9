// Redis over TLS with its own authority and client certificates (tls-auth-clients yes): without
// DF_REDIS_TLS_CA_FILE the certificate is untrusted and the log and /readyz say so; with the CA and the
// client certificate and key, the replica starts and is ready. Certificates are made with openssl per run.
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../daemon/harness.ts';
import { ClusterRig } from './cluster-rig.ts';
import { clusteredTestsRun, RedisServer } from './redis-server.ts';
import { makeTlsFiles, type TlsFiles } from './tls-certificates.ts';

describe.runIf(clusteredTestsRun)('Redis over TLS (rediss://)', () => {
  let files: TlsFiles;
  let redis: RedisServer;
  let rig: ClusterRig;

  beforeAll(async () => {
    files = await makeTlsFiles();
    redis = await RedisServer.start({
      tls: { certFile: files.certFile, keyFile: files.keyFile, caFile: files.caFile, authClients: true },
    });
    rig = await ClusterRig.create({ redis, perSecond: 20, perMinute: 600 });
  });
  afterAll(async () => {
    await rig?.dispose();
    await redis?.dispose();
    await rm(files.dir, { recursive: true, force: true });
  });

  it('an untrusted certificate: the TLS error is logged and is the /readyz reason, naming DF_REDIS_TLS_CA_FILE', async () => {
    rig.launch('untrusted');
    const said = (l: Record<string, unknown>) =>
      typeof l.msg === 'string' && l.msg.startsWith('the TLS connection to Redis failed');
    await waitFor(() => rig.logsOf('untrusted').some(said), 'the TLS error in the log', 15_000);
    const line = rig.logsOf('untrusted').find(said)!;
    expect(line).toMatchObject({ level: 50, kind: 'tls' });
    expect(line.msg).toMatch(/certificate/);
    expect(line.msg).toContain('DF_REDIS_TLS_CA_FILE');
    let readiness = await rig.readiness('untrusted');
    await waitFor(() => readiness.reasons.redis !== undefined, '/readyz');
    for (let i = 0; i < 50 && !readiness.reasons.redis?.startsWith('the TLS'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      readiness = await rig.readiness('untrusted');
    }
    expect(readiness.status).toBe(503);
    expect(readiness.reasons.redis).toMatch(/^the TLS connection to Redis failed \(.*certificate/);
  }, 30_000);

  it('the CA file and a client certificate: the replica connects, starts and is ready', async () => {
    await rig.start('trusted', {
      DF_REDIS_TLS_CA_FILE: files.caFile,
      DF_REDIS_TLS_CERT_FILE: files.clientCertFile,
      DF_REDIS_TLS_KEY_FILE: files.clientKeyFile,
    });
    const deadline = Date.now() + 10_000;
    while ((await rig.readyStatus('trusted')) !== 200 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await rig.readyStatus('trusted')).toBe(200);
    rig.enqueue(3);
    await waitFor(() => rig.done(), 'the executions reported', 15_000);
    expect(rig.figures()).toMatchObject({ claimed: 3, reported: 3, lost: 0, rateLimited: 0 });
  }, 30_000);
});
