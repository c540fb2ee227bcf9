// Every command of the CLI, in the order the usage text lists them.
import type { Command } from '../command.ts';
import { checkCommand } from './check.ts';
import { demoCommand } from './demo.ts';
import { devCommand } from './dev.ts';
import { emulatorCommand } from './emulator.ts';
import { initCommand } from './init.ts';
import { journalCommand } from './journal.ts';
import { newCommand } from './new.ts';
import { runCommand } from './run.ts';
import { startCommand } from './start.ts';
import { tasksCommand } from './tasks.ts';

export const commands = new Map<string, Command>(
  [
    startCommand,
    demoCommand,
    emulatorCommand,
    devCommand,
    initCommand,
    newCommand,
    runCommand,
    tasksCommand,
    checkCommand,
    journalCommand,
  ].map((c) => [c.name, c]),
);
