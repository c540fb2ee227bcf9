// The client's messages name the DF_* settings a user changes: each name it uses is a setting of the schema,
// the one that fills the option it stands for.
import { describe, expect, it } from 'vitest';
import { TIMEOUT_SETTINGS, URL_SETTING } from '../../src/api/settings.ts';
import { listSettings } from '../../src/config/schema.ts';

const envOf = new Map(listSettings().map(({ setting, entry }) => [setting, entry.env]));

describe('the settings client errors name', () => {
  it('are the schema settings of the URL and of each time limit', () => {
    expect(URL_SETTING).toBe(envOf.get('api.url'));
    for (const [phase, env] of Object.entries(TIMEOUT_SETTINGS)) {
      expect(env, phase).toBe(envOf.get(`api.${phase}TimeoutMs`));
    }
  });
});
