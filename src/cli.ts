/**
 * Admin CLI: `npm run cli -- <command>`.
 *   settings list
 *   settings get <key>
 *   settings set <key> <value>     (value as JSON when it parses, otherwise a string)
 *   credentials refresh            (prints the new API key and secret)
 *   agents create <name> <email> [--admin]   (support chat agent; prints its token once)
 *   agents list
 *   agents disable <id> | agents enable <id>
 *   agents token <id>              (replaces the agent's token; prints the new one)
 *   chat identity-hash <customer id>   (customer_hash for POST /chat/sessions with customer_id)
 *   registrations find <email>     (registrations of an e-mail address, with their workflow ids:
 *                                   Temporal holds no personal data to search by)
 * Uses DATABASE_URL, or the embedded database of `npm start` (started for the command if it
 * is not running).
 */
import { AgentStore } from './chat/agents';
import { ChatSecret } from './chat/tokens';
import { ConfigError, loadConfig, type Config } from './config';
import type { Db } from './db/knex';
import { migrateLatest } from './db/migrate';
import { asApiError } from './http/errors';
import { setLogLevel } from './logger';
import { RegistrationStore } from './register/store';
import { openDb, resolveDatabase } from './runtime';
import { validateSettings } from './settings/routes';
import { generateApiKey, generateApiSecret, SettingsStore } from './settings/store';

const USAGE = `Usage: npm run cli -- <command>
  settings list
  settings get <key>
  settings set <key> <value>
  credentials refresh
  agents create <name> <email> [--admin]
  agents list
  agents disable <id>
  agents enable <id>
  agents token <id>
  chat identity-hash <customer id>
  registrations find <email>`;

class UsageError extends Error {}

function parseValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function agentId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw)) throw new UsageError(`"${raw}" is not an agent id.`);
  return Number(raw);
}

/** Support chat agents: created by an admin; the token is shown once (only a digest is stored). */
async function runChatCli(argv: string[], deps: { db: Db; config: Config }, out: (s: string) => void): Promise<boolean> {
  const [group, command, ...rest] = argv;
  const agents = new AgentStore(deps.db);
  if (group === 'agents' && command === 'create' && (rest.length === 2 || (rest.length === 3 && rest[2] === '--admin'))) {
    const [name, email] = rest;
    if (!name.trim() || name.length > 200) throw new UsageError('The name must be 1-200 characters.');
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) throw new UsageError(`"${email}" is not an email address.`);
    const { agent, token } = await agents.create({ name: name.trim(), email, is_admin: rest[2] === '--admin' });
    out(`Agent ${agent.id} created (${agent.name} <${agent.email}>${agent.is_admin ? ', admin' : ''}).\nToken (shown only now): ${token}`);
  } else if (group === 'agents' && command === 'list' && rest.length === 0) {
    const list = await agents.list();
    out(list.length ? list.map((a) => `${a.id}\t${a.name}\t${a.email}\t${a.is_admin ? 'admin' : 'agent'}\t${a.active ? 'active' : 'disabled'}\t${a.presence}`).join('\n') : 'No agents.');
  } else if (group === 'agents' && (command === 'disable' || command === 'enable') && rest.length === 1) {
    const a = await agents.update(agentId(rest[0]), { active: command === 'enable' });
    out(`Agent ${a.id} ${a.active ? 'enabled' : 'disabled'}.`);
  } else if (group === 'agents' && command === 'token' && rest.length === 1) {
    const { agent, token } = await agents.rotateToken(agentId(rest[0]));
    out(`New token for agent ${agent.id} (the old one stops working now): ${token}`);
  } else if (group === 'chat' && command === 'identity-hash' && rest.length === 1) {
    if (!/^\d{1,15}$/.test(rest[0])) throw new UsageError(`"${rest[0]}" is not a customer id.`);
    out(await new ChatSecret(deps.db, deps.config).identityHash(Number(rest[0])));
  } else {
    return false;
  }
  return true;
}

export async function runCli(argv: string[], settings: SettingsStore, out: (s: string) => void, deps?: { db: Db; config: Config }): Promise<void> {
  const [group, command, ...rest] = argv;
  if ((group === 'agents' || group === 'chat') && deps) {
    if (await runChatCli(argv, deps, out)) return;
    throw new UsageError(USAGE);
  }
  if (group === 'registrations' && deps) {
    if (command !== 'find' || rest.length !== 1) throw new UsageError(USAGE);
    const rows = await new RegistrationStore(deps.db).findByEmail(rest[0]);
    out(
      rows.length
        ? rows
            .map((r) => `registration ${r.id}\t${r.status}${r.provisioning ? ` (provisioning ${r.provisioning})` : ''}\tcustomer ${r.customer_id ?? '-'}\tsite ${r.site_id ?? '-'}\t${r.date_created.toISOString()}\tTemporal UI: WorkflowId = '${r.workflow_id}'`)
            .join('\n')
        : `No registration for ${rest[0]}.`,
    );
  } else if (group === 'settings' && command === 'list' && rest.length === 0) {
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
    await runCli(process.argv.slice(2), new SettingsStore(db), (s) => process.stdout.write(`${s}\n`), { db, config });
  } finally {
    await db.destroy();
    await database.embedded?.stop();
  }
}

if (require.main === module) {
  main().catch((err) => {
    const answer = asApiError(err);
    if (answer) {
      const params = (answer.extra.params ?? {}) as Record<string, string>;
      process.stderr.write(`${Object.values(params).join('\n') || answer.message}\n`);
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
