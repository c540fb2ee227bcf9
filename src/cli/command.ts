// What every CLI command provides: a name, a one-line summary for the usage text, and run(argv) -> exit code.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { EXIT_USAGE } from '../errors/exit-codes.ts';
import { cliCommand } from './invocation.ts';

export interface Command {
  name: string;
  summary: string;
  /** Full help text, printed for `df-worker <name> --help`. */
  help: string;
  run(argv: string[]): Promise<number>;
}

/** True when argv asks for help; the command then prints its help and exits 0. */
export function wantsHelp(argv: string[], command: Command): boolean {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${command.help.trim()}\n`);
    return true;
  }
  return false;
}

/** Prints a usage problem with the pointer to the command's help, and returns EXIT_USAGE. */
export function usageError(command: string, message: string): number {
  process.stderr.write(
    `df-worker ${command}: ${message}\nRun \`${cliCommand(`${command} --help`)}\` for the options.\n`,
  );
  return EXIT_USAGE;
}

/**
 * Parses a command's options strictly; on a bad option prints the usage problem and returns EXIT_USAGE,
 * which the caller returns as is: `if (typeof parsed === 'number') return parsed;`.
 */
export function parseCommandArgs<const T extends Omit<ParseArgsConfig, 'strict'>>(
  command: string,
  config: T,
): ReturnType<typeof parseArgs<T & { strict: true }>> | number {
  try {
    return parseArgs({ ...config, strict: true });
  } catch (error) {
    return usageError(command, (error as Error).message);
  }
}
