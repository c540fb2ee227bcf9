// `df-worker emulator`: the local stand-in for the service, for trying handlers without an account.
import { randomBytes } from 'node:crypto';
import { SERVICE_REQUEST_LIMITS } from '../../api/service-limits.ts';
import { Emulator } from '../../emulator/index.ts';
import { SERVED_SPELLINGS } from '../../emulator/path-spelling.ts';
import { EXIT_OK } from '../../errors/exit-codes.ts';
import { parseCommandArgs, usageError, wantsHelp, type Command } from '../command.ts';
import { parseVariableOptions } from '../variable-option.ts';

export const emulatorCommand: Command = {
  name: 'emulator',
  summary: 'run the local service emulator (custom-task API, limits, admin surface)',
  help: `
Usage: df-worker emulator [--port N] [--host H] [--key KEY]... [--per-second N] [--per-minute N] [--per-month N]
                          [--variable ID=VALUE]... [--path-style both|underscore|hyphen]
                          [--allowed-host NAME]...

Serves the service's custom-task API on http://HOST:PORT with the documented limits (variables included),
plus an admin surface under /__admin/ (create tasks and variables, enqueue executions, read reports and the
request log, inject faults: handlers/README.md#fault-rules gives the rules' format), and a web console under
/console (tasks, executions, variables, files, the keys' use of the limits).

Options:
  --port N         port to listen on (default 8080; 0 = any free port)
  --host H         address to bind (default 127.0.0.1)
  --key KEY        accepted API key, repeatable (default: a random key of this run, printed at start)
  --per-second N   burst limit per key (default ${SERVICE_REQUEST_LIMITS.perSecond}; 0 = no limit)
  --per-minute N   limit per key per minute (default ${SERVICE_REQUEST_LIMITS.perMinute}; 0 = no limit)
  --per-month N    limit per key per month (default ${SERVICE_REQUEST_LIMITS.perMonth}; 0 = no limit)
  --variable ID=VALUE
                   a variable it holds from the start, for ctx.service.variables.get(ID); repeatable
  --path-style S   which spelling of /v1/data_factory/... (underscore) and /v1/data-factory/... (hyphen) it
                   serves: both (default), underscore or hyphen; the other answers 404 as an unknown route
  --allowed-host NAME
                   a host name it answers for besides localhost and IP addresses (e.g. a container's
                   service name), repeatable; any other Host is refused (421), as a page of another
                   site that resolves its own name to this address would send
  -h, --help       this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('emulator', {
      args: argv,
      options: {
        port: { type: 'string', default: '8080' },
        host: { type: 'string', default: '127.0.0.1' },
        key: { type: 'string', multiple: true },
        'per-second': { type: 'string' },
        'per-minute': { type: 'string' },
        'per-month': { type: 'string' },
        variable: { type: 'string', multiple: true },
        'path-style': { type: 'string', default: 'both' },
        'allowed-host': { type: 'string', multiple: true },
      },
    });
    if (typeof parsed === 'number') return parsed;
    const { values } = parsed;
    if (!/^\d+$/.test(values.port) || Number(values.port) > 65_535) {
      return usageError('emulator', `--port must be a whole number from 0 to 65535, got "${values.port}"`);
    }
    // 0 is meaningful for a limit: the emulator then does not enforce that window (see EmulatorLimits).
    const limits: Record<string, number> = {};
    for (const [flag, field] of [
      ['per-second', 'perSecond'],
      ['per-minute', 'perMinute'],
      ['per-month', 'perMonth'],
    ] as const) {
      const raw = values[flag];
      if (raw === undefined) continue;
      if (!/^\d+$/.test(raw)) {
        return usageError('emulator', `--${flag} must be a whole number >= 0 (0: no limit), got "${raw}"`);
      }
      limits[field] = Number(raw);
    }
    const pathStyle = SERVED_SPELLINGS.find((spelling) => spelling === values['path-style']);
    if (pathStyle === undefined) {
      return usageError(
        'emulator',
        `--path-style must be one of ${SERVED_SPELLINGS.join(', ')}, got "${values['path-style']}"`,
      );
    }
    const variables = parseVariableOptions(values.variable);
    if (typeof variables === 'string') return usageError('emulator', variables);
    // A fixed default key would be known to every web page: a random one, printed beside the console's URL.
    const apiKeys = values.key ?? [randomBytes(16).toString('hex')];
    const emulator = new Emulator({
      apiKeys,
      limits,
      pathStyle,
      allowedHosts: values['allowed-host'] ?? [],
    });
    for (const variable of variables) emulator.createVariable(variable);
    const { mountConsole } = await import('../../console/index.ts');
    const local = mountConsole(emulator, { mode: 'emulator' });
    const url = await emulator.listen(Number(values.port), values.host);
    process.stdout.write(`emulator listening on ${url} (admin: ${url}/__admin/)\n`);
    process.stdout.write(`API key: ${apiKeys.join(', ')}\n`);
    process.stdout.write(`console: ${local.url(url, undefined)}\n`);
    if (variables.length > 0) {
      process.stdout.write(`variables: ${variables.map((variable) => variable.id).join(', ')}\n`);
    }
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
    await emulator.close();
    return EXIT_OK;
  },
};
