// Issue 36, item 4: the API key revoked on the service while `df-worker start` runs with DF_API_KEY_FILE, then
// a new key written to the file (renamed over it, as an operator or a Secret's swap does). Measured: the 401s
// while the key is refused (with a POST /wake every 250 ms meanwhile), what /readyz and /metrics say, and how
// long after the new key was written requests are accepted again, without a restart.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  budgetFigures,
  figuresOf,
  withRig,
  type BudgetFigures,
  type ScenarioFigures,
  type Tally,
} from './rig.ts';

/** The back-off cap: while the key is refused, one poll per this step at most. */
export const KEY_BACKOFF_MS = 2_000;
/** How long the key stays refused, in ms: wakes and back-off steps in that time are what is counted. */
export const REFUSED_FOR_MS = 6_000;
const WAKE_EVERY_MS = 250;

export interface KeyRotationResult {
  /** Every execution reported once, none lost, requests accepted again after the new key without a restart. */
  completed: boolean;
  figures: ScenarioFigures;
  tally: Tally;
  budget: BudgetFigures;
  /** 401 answers while the key was refused, and POST /wake calls made meanwhile. */
  unauthorized: number;
  wakes: number;
  /** /readyz while refused: its status and the service check's reason. */
  readyz: { status: number; reason: string };
  /** dfworker_api_key_refused while refused, and dfworker_service_unauthorized_total once resumed. */
  refusedGauge: number | undefined;
  unauthorizedCounted: number;
  /** From writing the new key to the service's first accepted request, in ms. */
  resumedAfterMs: number | undefined;
  daemonRestarted: boolean;
  detail: string;
}

export function keyRotation(): Promise<KeyRotationResult> {
  return withRig(
    {
      env: {
        DF_ERROR_BACKOFF_MAX_MS: String(KEY_BACKOFF_MS),
        DF_API_KEY_FILE_CHECK_MS: '1000',
        DF_HTTP_WAKE: 'open',
      },
    },
    async (rig) => {
      const secretDir = join(rig.dir, 'secret');
      const keyFile = join(secretDir, 'api-key');
      await mkdir(secretDir);
      await writeFile(keyFile, `${rig.apiKey}\n`);
      const first = rig.enqueue(3);
      const daemon = rig.start({ DF_API_KEY: '', DF_API_KEY_FILE: keyFile });
      await rig.started(daemon);
      const pid = daemon.cli.child.pid;
      await rig.waitFor(() => first.every((id) => rig.reportsOf(id).length > 0), 'the first reports');

      // The key is revoked; another is issued.
      const newKey = `${rig.apiKey}-rotated`;
      rig.emulator.setApiKeys([newKey]);
      const revokedAt = Date.now();
      const second = rig.enqueue(3);
      const health = daemon.healthUrl();
      let wakes = 0;
      while (Date.now() - revokedAt < REFUSED_FOR_MS) {
        await fetch(`${health}/wake`, { method: 'POST' }).catch(() => undefined);
        wakes++;
        await new Promise((resolve) => setTimeout(resolve, WAKE_EVERY_MS));
      }
      const ready = await fetch(`${health}/readyz`);
      const readyBody = (await ready.json()) as { checks: { service?: { reason?: string } } };
      const refusedGauge = metricValue(
        await (await fetch(`${health}/metrics`)).text(),
        'dfworker_api_key_refused',
      );
      const unauthorized = rig.emulator.requests().filter((r) => r.at >= revokedAt && !r.apiKeyValid).length;

      // The new key, renamed over the old file.
      await writeFile(`${keyFile}.new`, `${newKey}\n`);
      const writtenAt = Date.now();
      await rename(`${keyFile}.new`, keyFile);
      const resumed = await rig.waitUntil(() => second.every((id) => rig.reportsOf(id).length > 0), 10_000);
      const accepted = rig.emulator.requests().find((r) => r.at >= writtenAt && r.apiKeyValid);
      const metrics = await (await fetch(`${health}/metrics`)).text();
      const unauthorizedCounted = sumOf(metrics, 'dfworker_service_unauthorized_total');
      const tally = rig.tally();
      const daemonRestarted = !daemon.running || daemon.cli.child.pid !== pid;
      const resumedAfterMs = accepted ? accepted.at - writtenAt : undefined;
      return {
        completed: resumed && tally.lost === 0 && tally.duplicated === 0 && !daemonRestarted,
        figures: figuresOf(tally),
        tally,
        budget: budgetFigures(rig),
        unauthorized,
        wakes,
        readyz: { status: ready.status, reason: readyBody.checks.service?.reason ?? '' },
        refusedGauge,
        unauthorizedCounted,
        resumedAfterMs,
        daemonRestarted,
        detail:
          `${unauthorized} × 401 in ${REFUSED_FOR_MS / 1000} s refused (${wakes} wakes meanwhile), ` +
          `requests accepted ${resumedAfterMs ?? 'never'} ms after the new key was written`,
      };
    },
  );
}

function metricValue(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

function sumOf(text: string, name: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}
