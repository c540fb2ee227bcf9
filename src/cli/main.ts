#!/usr/bin/env node
// df-worker's command line: one file per command under commands/, dispatched by name.
import { commands } from './commands/index.ts';
import { printUsage } from './usage.ts';

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    printUsage(process.stdout);
    return name === undefined ? 1 : 0;
  }
  if (name === '--version' || name === '-v') {
    const { version } = await import('./version.ts');
    process.stdout.write(`${version}\n`);
    return 0;
  }
  const command = commands.get(name);
  if (!command) {
    process.stderr.write(`df-worker: unknown command "${name}"\n\n`);
    printUsage(process.stderr);
    return 2;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`df-worker: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
