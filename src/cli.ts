/**
 * Admin CLI: `npm run cli -- <command>`.
 *   settings list
 *   settings get <key>
 *   settings set <key> <value>     (value as JSON when it parses, otherwise a string)
 *   credentials refresh            (prints the new API key and secret)
 * Uses DATABASE_URL, or the embedded database of `npm start` (started for the command if it
 * is not running).
 */
import { ConfigError, loadConfig } from './config';
import { migrateLatest } from './db/migrate';
import { ApiError } from './http/errors';
import { setLogLevel } from './logger';
import { openDb, resolveDatabase } from './runtime';
import { validateSettings } from './settings/routes';
import { generateApiKey, generateApiSecret, SettingsStore } from './settings/store';

const USAGE = `Usage: npm run cli -- <command>
  settings list
  settings get <key>
  settings set <key> <value>
  credentials refresh`;

class UsageError extends Error {}

function parseValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

export async function runCli(argv: string[], settings: SettingsStore, out: (s: string) => void): Promise<void> {
  const [group, command, ...rest] = argv;
  if (group === 'settings' && command === 'list' && rest.length === 0) {
    out(JSON.stringify(await settings.publicSettings(), null, 2));
  } else if (group === 'settings' && command === 'get' && rest.length === 1) {
    const key = rest[0];
    if (key === 'api_secret') throw new UsageError('api_secret is stored only as a hash and cannot be shown; use `credentials refresh` for a new one.');
    if (!(await settings.has(key))) throw new UsageError(`Setting "${key}" not found.`);
    out(JSON.stringify(await settings.get(key)));
  } else if (group === 'settings' && command === 'set' && rest.length === 2) {
    const [key, raw] = rest;
    const values = validateSettings({ [key]: parseValue(raw) });
    await settings.setMany(values);
    out(`${key} = ${JSON.stringify(values[key])}`);
  } else if (group === 'credentials' && command === 'refresh' && rest.length === 0) {
    const key = generateApiKey();
    const secret = generateApiSecret();
    await settings.writeCredentials(key, secret);
    out(`New API credentials (the old ones stop working now):\n  API key:    ${key}\n  API secret: ${secret}`);
  } else {
    throw new UsageError(USAGE);
  }
}

async function main() {
  const config = loadConfig();
  setLogLevel(process.env.LOG_LEVEL ?? 'warn');
  const database = await resolveDatabase(config, true);
  const db = openDb(database.url, config);
  try {
    await migrateLatest(db);
    await runCli(process.argv.slice(2), new SettingsStore(db), (s) => process.stdout.write(`${s}\n`));
  } finally {
    await db.destroy();
    await database.embedded?.stop();
  }
}

if (require.main === module) {
  main().catch((err) => {
    if (err instanceof ApiError) {
      const params = (err.extra.params ?? {}) as Record<string, string>;
      process.stderr.write(`${Object.values(params).join('\n') || err.message}\n`);
      process.exit(2);
    }
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(1);
  });
}
