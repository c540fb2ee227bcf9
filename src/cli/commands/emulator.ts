// `df-worker emulator`: the local stand-in for the service, for trying handlers without an account.
import { parseArgs } from 'node:util';
import { Emulator } from '../../emulator/index.ts';
import { wantsHelp, type Command } from '../command.ts';

export const emulatorCommand: Command = {
  name: 'emulator',
  summary: 'run the local service emulator (custom-task API, limits, admin surface)',
  help: `
Usage: df-worker emulator [--port N] [--host H] [--key KEY]... [--per-second N] [--per-minute N] [--per-month N]

Serves the service's custom-task API on http://HOST:PORT with the documented limits, plus an admin surface
under /__admin/ (create tasks, enqueue executions, read reports and the request log, inject faults).

Options:
  --port N         port to listen on (default 8080; 0 = any free port)
  --host H         address to bind (default 127.0.0.1)
  --key KEY        accepted API key, repeatable (default emulator-key)
  --per-second N   burst limit per key (default 5)
  --per-minute N   limit per key per minute (default 50)
  --per-month N    limit per key per month (default 40000)
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return 0;
    const { values } = parseArgs({
      args: argv,
      options: {
        port: { type: 'string', default: '8080' },
        host: { type: 'string', default: '127.0.0.1' },
        key: { type: 'string', multiple: true },
        'per-second': { type: 'string' },
        'per-minute': { type: 'string' },
        'per-month': { type: 'string' },
      },
      strict: true,
    });
    const limit = (name: string, raw: string | undefined) => {
      if (raw === undefined) return undefined;
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number, got "${raw}"`);
      return n;
    };
    const port = limit('port', values.port) ?? 8080;
    const limits: Record<string, number> = {};
    for (const [flag, field] of [
      ['per-second', 'perSecond'],
      ['per-minute', 'perMinute'],
      ['per-month', 'perMonth'],
    ] as const) {
      const v = limit(flag, values[flag]);
      if (v !== undefined) limits[field] = v;
    }
    const emulator = new Emulator({ apiKeys: values.key ?? ['emulator-key'], limits });
    const url = await emulator.listen(port, values.host);
    process.stdout.write(`emulator listening on ${url} (admin: ${url}/__admin/)\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
    await emulator.close();
    return 0;
  },
};
