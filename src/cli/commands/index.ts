// Every command of the CLI, in the order the usage text lists them.
import type { Command } from '../command.ts';
import { demoCommand } from './demo.ts';
import { emulatorCommand } from './emulator.ts';
import { startCommand } from './start.ts';

export const commands = new Map<string, Command>(
  [startCommand, demoCommand, emulatorCommand].map((c) => [c.name, c]),
);
