// Issue 26, item 8: what handler code can still reach of the API key. The real `df-worker start` runs one
// execution of a handler that looks for the key everywhere a process of the daemon's user can look: its own
// process.env, /proc/self/environ and /proc/self/mem, its parent's /proc/<ppid>/environ, cmdline and mem, and
// the key file (at the path it finds in an environ). The handler knows only the key's SHA-256, length and
// first characters (its input), and reports what it found per place, so the key never travels in its output.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, chown, mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { REPO_ROOT } from '../cli/process.ts';
import { withRig, type FaultRig } from './rig.ts';

export const REACH_TASK = 'reach-for-the-key';
/** What the handler reports per place, e.g. `KEY`, `key file path`, `no key`, `refused (EACCES)`. */
export const PLACES = [
  'processEnv',
  'selfEnviron',
  'selfMem',
  'parentEnviron',
  'parentCmdline',
  'parentMem',
  'keyFile',
] as const;
export type Place = (typeof PLACES)[number];

/** The handler: plain JavaScript in a .ts file, so that it runs the same in a thread or a process. */
const REACH_HANDLER = `
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { defineTask } from 'df-worker';

const sha = (text) => createHash('sha256').update(text).digest('hex');

function holdsKey(text, hint) {
  for (let at = text.indexOf(hint.keyPrefix); at >= 0; at = text.indexOf(hint.keyPrefix, at + 1)) {
    if (sha(text.slice(at, at + hint.keyLength)) === hint.keySha256) return true;
  }
  return false;
}

function read(path) {
  try {
    return { text: readFileSync(path, 'latin1') };
  } catch (error) {
    return { error: error.code ?? String(error) };
  }
}

function judge(result, hint) {
  if (result.error) return 'refused (' + result.error + ')';
  if (holdsKey(result.text, hint)) return 'KEY';
  if (result.text.includes('DF_API_KEY_FILE=')) return 'key file path';
  return 'no key';
}

/** Reads every readable mapping of pid's memory through /proc/pid/mem, looking for the key. */
function scanMemory(pid, hint) {
  let maps;
  let fd;
  try {
    maps = readFileSync('/proc/' + pid + '/maps', 'latin1');
    fd = openSync('/proc/' + pid + '/mem', 'r');
  } catch (error) {
    return 'refused (' + (error.code ?? error) + ')';
  }
  const chunk = Buffer.alloc(1 << 20);
  let readAny = false;
  let lastError = '';
  try {
    for (const line of maps.split('\\n')) {
      const range = /^([0-9a-f]+)-([0-9a-f]+) r/.exec(line);
      if (!range || line.includes('[vvar]') || line.includes('[vsyscall]')) continue;
      const end = BigInt('0x' + range[2]);
      for (let at = BigInt('0x' + range[1]); at < end; ) {
        const length = Number(end - at < BigInt(chunk.length) ? end - at : BigInt(chunk.length));
        let count;
        try {
          count = readSync(fd, chunk, 0, length, at);
        } catch (error) {
          lastError = error.code ?? String(error);
          break;
        }
        if (count <= 0) break;
        readAny = true;
        if (holdsKey(chunk.subarray(0, count).toString('latin1'), hint)) return 'KEY';
        // Overlap by the key's length, so a key across two chunks is seen.
        at += BigInt(Math.max(1, count - hint.keyLength));
      }
    }
  } finally {
    closeSync(fd);
  }
  return readAny ? 'no key' : 'refused (' + lastError + ')';
}

function keyFileOf(environs) {
  for (const text of environs) {
    const path = /(?:^|\\0)DF_API_KEY_FILE=([^\\0]*)/.exec(text ?? '')?.[1];
    if (path) return path;
  }
  return undefined;
}

export default defineTask({
  key: ${JSON.stringify(REACH_TASK)},
  inputKeys: ['keySha256', 'keyLength', 'keyPrefix'],
  outputKeys: ${JSON.stringify(PLACES)},
  handle(hint) {
    // Its own memory first, before it reads anything that may hold the key.
    const selfMem = scanMemory('self', hint);
    const self = read('/proc/self/environ');
    const parent = read('/proc/' + process.ppid + '/environ');
    const envText = Object.entries(process.env).map(([k, v]) => k + '=' + v).join('\\0');
    const path = keyFileOf([self.text, parent.text, envText]);
    return {
      processEnv: judge({ text: envText }, hint),
      selfEnviron: judge(self, hint),
      selfMem,
      parentEnviron: judge(parent, hint),
      parentCmdline: judge(read('/proc/' + process.ppid + '/cmdline'), hint),
      parentMem: scanMemory(process.ppid, hint),
      keyFile: path === undefined ? 'path not found' : judge(read(path), hint),
    };
  },
});
`;

export interface KeyReachOptions {
  isolation: 'thread' | 'process';
  /** How the daemon is given the key: DF_API_KEY, or DF_API_KEY_FILE (a file of mode 0600 owned by its user). */
  keyFrom: 'env' | 'file';
  /** Runs the daemon as this uid/gid (as the chart does, 1000, no capabilities); default the test's own user. */
  user?: number;
}

export type KeyReach = Record<Place, string>;

/** Makes the rig's folders usable by `user`: the daemon reads handlers, writes state, reads its key file. */
async function handOver(rig: FaultRig, user: number): Promise<void> {
  await chmod(rig.dir, 0o755);
  await chmod(join(rig.dir, 'handlers'), 0o755);
  await chown(rig.stateDir, user, user);
}

/**
 * Lets any user pass through (o+x, not list) the folders above the checkout and node, as a checkout below a
 * `mktemp -d` folder (mode 0700) would otherwise refuse the daemon's user; returns what puts the modes back.
 */
async function letThrough(paths: string[]): Promise<() => Promise<void>> {
  const changed: { folder: string; mode: number }[] = [];
  const seen = new Set<string>();
  for (const path of paths) {
    for (let folder = dirname(path); !seen.has(folder); folder = dirname(folder)) {
      seen.add(folder);
      const mode = (await stat(folder)).mode & 0o7777;
      if ((mode & 0o001) === 0) {
        await chmod(folder, mode | 0o001);
        changed.push({ folder, mode });
      }
      if (dirname(folder) === folder) break;
    }
  }
  return async () => {
    for (const { folder, mode } of changed.reverse()) await chmod(folder, mode);
  };
}

export async function keyReach(options: KeyReachOptions): Promise<KeyReach> {
  const restore =
    options.user === undefined ? () => Promise.resolve() : await letThrough([REPO_ROOT, process.execPath]);
  try {
    return await reachAs(options);
  } finally {
    await restore();
  }
}

function reachAs(options: KeyReachOptions): Promise<KeyReach> {
  return withRig({}, async (rig) => {
    const taskId = await rig.addTask(
      { key: REACH_TASK, inputKeys: ['keySha256', 'keyLength', 'keyPrefix'], outputKeys: [...PLACES] },
      REACH_HANDLER,
    );
    await mkdir(rig.stateDir, { recursive: true });
    const env: Record<string, string> = {
      ...rig.env({ DF_HANDLER_ISOLATION: options.isolation }),
      PATH: process.env.PATH ?? '',
      HOME: '/tmp',
    };
    if (options.keyFrom === 'file') {
      const keyFile = join(rig.dir, 'api-key');
      await writeFile(keyFile, rig.apiKey, { mode: 0o600 });
      if (options.user !== undefined) await chown(keyFile, options.user, options.user);
      delete env.DF_API_KEY;
      env.DF_API_KEY_FILE = keyFile;
    }
    if (options.user !== undefined) await handOver(rig, options.user);
    const execution = rig.emulator.enqueueExecution(REACH_TASK, {
      keySha256: createHash('sha256').update(rig.apiKey).digest('hex'),
      keyLength: rig.apiKey.length,
      keyPrefix: rig.apiKey.slice(0, 6),
    });
    const child = spawn(
      process.execPath,
      ['--conditions=df-worker-source', `${REPO_ROOT}src/cli/main.ts`, 'start'],
      {
        cwd: REPO_ROOT,
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
        ...(options.user === undefined ? {} : { uid: options.user, gid: options.user }),
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    // A daemon that cannot start as `user` (e.g. the checkout, or node, below a folder of mode 0700) says so.
    child.on('error', (error) => {
      stderr +=
        `could not start the daemon as uid ${options.user ?? 'self'}: ${error.message}; node (${process.execPath}) ` +
        `and the checkout (${REPO_ROOT}) must be reachable by that user (each parent folder o+x)`;
    });
    try {
      await rig.waitUntil(() => rig.reportsOf(execution.id).length > 0 || child.exitCode !== null, 30_000);
      const report = rig.reportsOf(execution.id)[0];
      if (report?.status !== 'COMPLETED') {
        throw new Error(
          `the reach handler did not complete (task ${taskId}): ${JSON.stringify(report)}; stderr: ${stderr.slice(-2_000)}`,
        );
      }
      return report.output as KeyReach;
    } finally {
      child.kill('SIGKILL');
    }
  });
}
