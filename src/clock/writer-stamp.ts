// Which process, on which boot, wrote saved instants (the budget's window sends): a restart on the same boot
// reads the writer's monotonic time against its own (CLOCK_MONOTONIC counts from the boot, whichever process
// reads it), so a wall clock stepped between the two runs does not move the sends; another boot, or no stamp
// (a file of the previous release), falls back to the wall clock.
import { readFileSync } from 'node:fs';

export interface WriterStamp {
  /** The kernel's id of the boot (/proc/sys/kernel/random/boot_id). */
  bootId: string;
  pid: number;
  /** Milliseconds since the boot on the monotonic clock, at the write. */
  sinceBootMs: number;
  /** The writer's wall clock at the write, in ms since the epoch: what the saved instants are on. */
  wallMs: number;
}

let bootId: string | null | undefined;

/** The system's stamp now; undefined where the boot cannot be named (not Linux, no /proc). */
export function systemWriterStamp(): WriterStamp | undefined {
  if (bootId === undefined) {
    try {
      bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
    } catch {
      bootId = null;
    }
  }
  if (bootId === null) return undefined;
  // process.hrtime reads CLOCK_MONOTONIC, which Linux counts from the boot.
  const sinceBootMs = Number(process.hrtime.bigint() / 1_000_000n);
  return { bootId, pid: process.pid, sinceBootMs, wallMs: Date.now() };
}

/**
 * `instants` (on the writer's wall clock, stamped `writer`) on the reader's wall clock, as its stamp `reader`
 * says: exact when both ran on the same boot (each send keeps its age on the monotonic clock), unchanged
 * otherwise (only the wall clocks are shared then).
 */
export function onReaderWallClock(
  instants: readonly number[],
  writer: WriterStamp | undefined,
  reader: WriterStamp | undefined,
): number[] {
  if (!writer || !reader || writer.bootId !== reader.bootId) return [...instants];
  const sinceWriteMs = reader.sinceBootMs - writer.sinceBootMs;
  return instants.map((at) => reader.wallMs - (sinceWriteMs + (writer.wallMs - at)));
}

/** True when `value` has a WriterStamp's shape (as read from a file). */
export function isWriterStamp(value: unknown): value is WriterStamp {
  if (typeof value !== 'object' || value === null) return false;
  const { bootId: id, pid, sinceBootMs, wallMs } = value as Partial<Record<keyof WriterStamp, unknown>>;
  return (
    typeof id === 'string' &&
    id !== '' &&
    Number.isSafeInteger(pid) &&
    [sinceBootMs, wallMs].every((n) => typeof n === 'number' && Number.isFinite(n))
  );
}
