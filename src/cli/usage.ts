import { commands } from './commands/index.ts';
import { cliCommand } from './invocation.ts';

export function printUsage(out: NodeJS.WritableStream): void {
  const width = Math.max(...[...commands.keys()].map((n) => n.length));
  const lines = [...commands.values()].map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  out.write(
    [
      'Usage: df-worker <command> [options]',
      '',
      'Commands:',
      ...lines,
      '',
      `Run \`${cliCommand('<command> --help')}\` for the options of a command. Settings come from DF_*`,
      'environment variables or a JSON file named by DF_CONFIG (see config/README.md).',
      '',
    ].join('\n'),
  );
}
