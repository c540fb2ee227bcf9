// Clustered mode's settings: where Redis is (one server, or the master that Redis Sentinel names), how to
// authenticate and which certificates to trust. Part of the one schema (schema.ts mounts it as `cluster`).
import { FORMAT } from './formats.ts';
import { string, withDefault, type Setting } from './settings.ts';

export const clusterSchema = {
  redisUrl: {
    env: 'DF_REDIS_URL',
    default: '',
    format: FORMAT.redisUrl,
    doc: 'Redis server of clustered mode, e.g. redis://:password@redis:6379/0 (rediss:// for TLS); empty: standalone mode. Every replica given the same URL and key shares one budget, one poller and one queue of executions (see "Clustered mode (Redis)"). With DF_REDIS_SENTINELS, its host and port are not used (the sentinels name the master); its user, password, database and scheme still are. Its password is never logged. A redis:// or rediss:// URL, or empty. Default: "".',
  } satisfies Setting<string>,
  sentinels: {
    env: 'DF_REDIS_SENTINELS',
    default: '',
    format: FORMAT.hostPortList,
    doc: withDefault(
      'Redis Sentinel: the sentinels to ask for the master of DF_REDIS_SENTINEL_MASTER, e.g. sentinel-0:26379,sentinel-1:26379; on a failover every connection follows the master they promote. Empty: DF_REDIS_URL names the server itself. Needs DF_REDIS_URL (for the password and database).',
      'A comma-separated list of host:port (port 26379 when left out), or empty',
      '',
    ),
  } satisfies Setting<string>,
  sentinelMaster: string({
    env: 'DF_REDIS_SENTINEL_MASTER',
    default: 'mymaster',
    nonEmpty: true,
    doc: 'Name of the master group the sentinels watch (`sentinel monitor <name> ...` in sentinel.conf); used with DF_REDIS_SENTINELS.',
  }),
  sentinelPassword: string({
    env: 'DF_REDIS_SENTINEL_PASSWORD',
    default: '',
    sensitive: true,
    doc: "Password of the sentinels themselves (their requirepass), when they have one; the master's password goes in DF_REDIS_URL. Never logged.",
  }),
  tlsCaFile: string({
    env: 'DF_REDIS_TLS_CA_FILE',
    default: '',
    doc: "Path of a PEM file of the certificate authorities that sign Redis's certificate (rediss:// only), relative to the working directory; empty: Node's usual authorities (and NODE_EXTRA_CA_CERTS).",
  }),
  tlsCertFile: string({
    env: 'DF_REDIS_TLS_CERT_FILE',
    default: '',
    doc: "Path of this worker's client certificate (PEM) for a Redis that asks for one (tls-auth-clients), relative to the working directory; set with DF_REDIS_TLS_KEY_FILE (rediss:// only).",
  }),
  tlsKeyFile: string({
    env: 'DF_REDIS_TLS_KEY_FILE',
    default: '',
    doc: 'Path of the private key (PEM) of DF_REDIS_TLS_CERT_FILE, relative to the working directory.',
  }),
  replicaId: string({
    env: 'DF_REPLICA_ID',
    default: '',
    doc: "This replica's name in clustered mode's logs and metrics (label `replica`); empty: the host name and process id.",
  }),
};
