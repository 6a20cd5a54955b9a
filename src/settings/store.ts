import crypto from 'node:crypto';
import type { Db } from '../db/knex';
import { sha256 } from '../infra/digest';

/**
 * Settings live in the `settings` table as JSON values. Reads are cached per process for a
 * short time (auth reads them on every request); writes through this store refresh the
 * cache at once, writes from other processes (the CLI, other API replicas) are seen within
 * CACHE_MS.
 */
const CACHE_MS = 2000;

export const SETTING_DEFAULTS: Record<string, unknown> = {
  enable_api: true,
  network_name: 'hostflow',
  // /register
  enable_registration: true,
  site_mode: 'subdirectory',
  network_domain: 'localhost',
};

/** api_key, api_secret, and any key naming a token, a secret or a password (the document says it with this pattern). */
export const SENSITIVE_SETTING = /^api_key$|^api_secret$|_access_token|_refresh_token|_sk_key|_secret|password|_api_key/;

/** Keys that are never returned by, nor written through, the settings API. */
export function isSensitiveSetting(key: string): boolean {
  return SENSITIVE_SETTING.test(key);
}

export const SETTING_KEY_PATTERN = /^[a-z0-9_-]{1,100}$/;

export interface Credentials {
  key: string;
  secretSha256: string;
}


export class SettingsStore {
  /** `credentials`: the stored key pair as read from `values` (auth asks on every request), made once per refresh. */
  private cache: { at: number; values: Map<string, unknown>; credentials?: Credentials | null } | null = null;

  constructor(private readonly db: Db) {}

  invalidate(): void {
    this.cache = null;
  }

  private async load(): Promise<Map<string, unknown>> {
    if (this.cache && Date.now() - this.cache.at < CACHE_MS) return this.cache.values;
    const rows: { key: string; value: unknown }[] = await this.db('settings').select('key', 'value');
    const values = new Map(rows.map((r) => [r.key, r.value]));
    this.cache = { at: Date.now(), values };
    return values;
  }

  async get<T = unknown>(key: string): Promise<T | undefined> {
    const values = await this.load();
    if (values.has(key)) return values.get(key) as T;
    return SETTING_DEFAULTS[key] as T | undefined;
  }

  async has(key: string): Promise<boolean> {
    return (await this.load()).has(key) || key in SETTING_DEFAULTS;
  }

  /** Every setting, defaults included, without the sensitive ones. */
  async publicSettings(): Promise<Record<string, unknown>> {
    const values = await this.load();
    const out: Record<string, unknown> = { ...SETTING_DEFAULTS };
    for (const [k, v] of values) out[k] = v;
    for (const k of Object.keys(out)) if (isSensitiveSetting(k)) delete out[k];
    return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
  }

  async setMany(values: Record<string, unknown>): Promise<void> {
    const rows = Object.entries(values).map(([key, value]) => ({ key, value: JSON.stringify(value), date_modified: this.db.fn.now() }));
    if (rows.length === 0) return;
    await this.db('settings').insert(rows).onConflict('key').merge(['value', 'date_modified']);
    this.invalidate();
  }

  async set(key: string, value: unknown): Promise<void> {
    await this.setMany({ [key]: value });
  }

  async credentials(): Promise<Credentials | null> {
    const values = await this.load();
    const cache = this.cache;
    if (cache?.values === values && cache.credentials !== undefined) return cache.credentials;
    const pick = (key: string) => (values.has(key) ? values.get(key) : SETTING_DEFAULTS[key]);
    const key = pick('api_key');
    const secret = pick('api_secret') as { sha256?: unknown } | null | undefined;
    const credentials = typeof key !== 'string' || !secret || typeof secret.sha256 !== 'string' ? null : Object.freeze({ key, secretSha256: secret.sha256 });
    if (cache?.values === values) cache.credentials = credentials;
    return credentials;
  }

  /** Store a new key/secret pair. Only a SHA-256 of the secret is kept. */
  async writeCredentials(key: string, secret: string): Promise<void> {
    await this.setMany({ api_key: key, api_secret: { sha256: sha256(secret) } });
  }

  /**
   * First start: take WU_API_KEY/WU_API_SECRET when given, otherwise generate strong random
   * values. Returns the pair only when this call created it (so it is printed once).
   */
  async ensureCredentials(fromEnv: { key?: string; secret?: string }): Promise<{ key: string; secret: string; generated: boolean } | null> {
    const key = fromEnv.key ?? generateApiKey();
    const secret = fromEnv.secret ?? generateApiSecret();
    const inserted = await this.db.transaction(async (trx) => {
      const rows = await trx('settings')
        .insert({ key: 'api_key', value: JSON.stringify(key) })
        .onConflict('key')
        .ignore()
        .returning('key');
      if (rows.length === 0) return false;
      await trx('settings').insert({ key: 'api_secret', value: JSON.stringify({ sha256: sha256(secret) }) }).onConflict('key').merge();
      return true;
    });
    this.invalidate();
    if (!inserted) return null;
    return { key, secret, generated: fromEnv.key === undefined || fromEnv.secret === undefined };
  }
}

export function generateApiKey(): string {
  return `hf_${crypto.randomBytes(16).toString('hex')}`;
}

export function generateApiSecret(): string {
  return crypto.randomBytes(32).toString('base64url');
}

/**
 * A server-side secret: `configured` (from the environment) when given, else a random one kept
 * in the settings table under `key` (a sensitive name, so never shown), created by whichever
 * process asks first and read by every API replica and worker alike. Loaded once per process;
 * a failed load is tried again on the next call.
 */
export class StoredSecret {
  private value: Promise<Buffer> | undefined;

  constructor(
    private readonly db: Db,
    private readonly key: string,
    private readonly configured?: string,
  ) {}

  get(): Promise<Buffer> {
    this.value ??= this.load().catch((err) => {
      this.value = undefined;
      throw err;
    });
    return this.value;
  }

  private async load(): Promise<Buffer> {
    if (this.configured) return Buffer.from(this.configured, 'utf8');
    await this.db('settings')
      .insert({ key: this.key, value: JSON.stringify(crypto.randomBytes(32).toString('hex')) })
      .onConflict('key')
      .ignore();
    const row = await this.db('settings').where({ key: this.key }).first('value');
    return Buffer.from(String(row.value), 'utf8');
  }
}
