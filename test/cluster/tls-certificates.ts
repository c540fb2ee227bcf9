// Certificates for the TLS tests, made with openssl in a temporary folder: an authority, a server certificate
// for 127.0.0.1 and localhost that it signs, and a client certificate it signs (for tls-auth-clients).
import { execFileSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface TlsFiles {
  dir: string;
  caFile: string;
  certFile: string;
  keyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

function signed(dir: string, name: string, subject: string, extensions: string): void {
  openssl(dir, [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    subject,
  ]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-extfile',
    extensions,
  ]);
}

export async function makeTlsFiles(): Promise<TlsFiles> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'df-worker-tls-'));
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=df-worker test CA',
  ]);
  await writeFile(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  await writeFile(path.join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  signed(dir, 'server', '/CN=localhost', 'server.ext');
  signed(dir, 'client', '/CN=df-worker', 'client.ext');
  return {
    dir,
    caFile: path.join(dir, 'ca.crt'),
    certFile: path.join(dir, 'server.crt'),
    keyFile: path.join(dir, 'server.key'),
    clientCertFile: path.join(dir, 'client.crt'),
    clientKeyFile: path.join(dir, 'client.key'),
  };
}
