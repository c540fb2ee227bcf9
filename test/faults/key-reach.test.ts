// Issue 26, item 8: what handler code can still reach of the API key, as helm/README.md's guarantees say it
// (see key-reach-scenarios.ts). Run as the chart's user (uid 1000, no capabilities) when the tests run as root.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { keyReach } from './key-reach-scenarios.ts';

const user = process.getuid?.() === 0 ? 1000 : undefined;
/** With Yama's ptrace_scope at 1 or more, a process cannot read its parent's memory, even as the same user. */
const ptraceOfParent = existsSync('/proc/sys/kernel/yama/ptrace_scope')
  ? readFileSync('/proc/sys/kernel/yama/ptrace_scope', 'utf8').trim() === '0'
  : true;

describe("what handler code can reach of the daemon's API key", () => {
  it.each(['env', 'file'] as const)(
    'in a thread (key from %s): never process.env, but the process it shares through /proc/self',
    async (keyFrom) => {
      const r = await keyReach({ isolation: 'thread', keyFrom, user });
      expect(r.processEnv).toBe('no key');
      // /proc/self/environ is the environment the daemon started with, whatever process.env now holds.
      expect(r.selfEnviron).toBe(keyFrom === 'env' ? 'KEY' : 'key file path');
      expect(r.selfMem).toBe('KEY');
      expect(r.keyFile).toBe(keyFrom === 'env' ? 'path not found' : 'KEY');
    },
    60_000,
  );

  it.each(['env', 'file'] as const)(
    'in a process (key from %s): nothing of its own, but its parent, the daemon, through /proc/<ppid>',
    async (keyFrom) => {
      const r = await keyReach({ isolation: 'process', keyFrom, user });
      expect(r.processEnv).toBe('no key');
      expect(r.selfEnviron).toBe('no key');
      expect(r.selfMem).toBe('no key');
      expect(r.parentEnviron).toBe(keyFrom === 'env' ? 'KEY' : 'key file path');
      expect(r.parentCmdline).toBe('no key');
      expect(r.parentMem).toMatch(ptraceOfParent ? /^KEY$/ : /^refused/);
      expect(r.keyFile).toBe(keyFrom === 'env' ? 'path not found' : 'KEY');
    },
    60_000,
  );
});
