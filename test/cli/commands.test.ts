// The command table: the handler tools are listed after start, demo and emulator, each with its own help.
import { describe, expect, it } from 'vitest';
import { commands } from '../../src/cli/commands/index.ts';
import { printUsage } from '../../src/cli/usage.ts';

describe('the command table', () => {
  it('lists start, demo, emulator and dev first, then the handler tools', () => {
    expect([...commands.keys()]).toEqual([
      'start',
      'demo',
      'emulator',
      'dev',
      'init',
      'new',
      'run',
      'tasks',
      'check',
      'journal',
    ]);
    let usage = '';
    printUsage({ write: (text: string) => (usage += text) } as unknown as NodeJS.WritableStream);
    expect(usage).toMatch(/^ {2}journal +show the executions the state folder still owes the service/m);
  });

  it.each(['dev', 'init', 'new', 'run', 'tasks', 'check', 'journal'])(
    'gives %s a help text starting with its usage',
    (name) => {
      expect(commands.get(name)!.help.trim()).toMatch(new RegExp(`^Usage: df-worker ${name}\\b`));
    },
  );
});
