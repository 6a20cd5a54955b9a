import type { Router } from 'express';
import { z } from 'zod';
import { ApiError, invalidParams } from '../http/errors';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, codePointLength } from '../http/validation';
import { humanList } from '../infra/text';
import { isSensitiveSetting, SENSITIVE_SETTING, SETTING_KEY_PATTERN, type SettingsStore } from './store';

/** Typed settings: a value of the wrong type is refused, loose booleans are accepted. */
const SETTING_TYPES: Record<string, 'boolean' | 'string'> = {
  enable_api: 'boolean',
  network_name: 'string',
  enable_registration: 'boolean',
  site_mode: 'string',
  network_domain: 'string',
};

const MAX_JSON = 65_536;

function coerce(key: string, value: unknown): { value?: unknown; error?: string } {
  if (value === undefined) return { error: `${key} needs a value.` };
  const type = SETTING_TYPES[key];
  if (type === 'boolean') {
    if (typeof value === 'boolean') return { value };
    if (value === 1 || value === '1' || value === 'true') return { value: true };
    if (value === 0 || value === '0' || value === 'false') return { value: false };
    return { error: `${key} is not of type boolean.` };
  }
  if (type === 'string') {
    if (typeof value !== 'string') return { error: `${key} is not of type string.` };
    if (codePointLength(value) > 1000) return { error: `${key} must be at most 1000 characters long.` };
    return { value };
  }
  if (JSON.stringify(value).length > MAX_JSON) return { error: `${key} is too large (64 KiB at most).` };
  return { value };
}

const LOOSE_BOOLEANS = [true, false, 1, 0, '1', '0', 'true', 'false'];
/** What coerce() takes for each typed setting, for the document. */
const TYPED_VALUES = Object.fromEntries(
  Object.entries(SETTING_TYPES).map(([key, type]) => [key, type === 'boolean' ? { enum: LOOSE_BOOLEANS } : { type: 'string', maxLength: 1000 }]),
);
const VALUE_RULES =
  `${humanList(Object.keys(SETTING_TYPES).filter((k) => SETTING_TYPES[k] === 'boolean'))} take a boolean (or 1, 0, "1", "0", "true", "false"); ` +
  `${humanList(Object.keys(SETTING_TYPES).filter((k) => SETTING_TYPES[k] === 'string'))} a string of at most 1000 characters; any other key any JSON value of at most 64 KiB (as JSON text).`;
/** A key that may be written (checkKey, validateSettings). */
const KEY_SCHEMA = { type: 'string', pattern: SETTING_KEY_PATTERN.source, not: { pattern: SENSITIVE_SETTING.source } };
const settingsMap = { type: 'object', minProperties: 1, propertyNames: KEY_SCHEMA, properties: TYPED_VALUES, additionalProperties: {} };

function checkKey(key: string): void {
  if (!SETTING_KEY_PATTERN.test(key)) {
    throw invalidParams({ setting_key: 'setting_key may contain only lower-case letters, digits, _ and - (1 to 100 characters).' });
  }
  if (isSensitiveSetting(key)) {
    throw new ApiError(403, 'setting_protected', `Setting "${key}" is protected and cannot be read or changed through the API. Use \`npm run cli -- credentials refresh\` for the API credentials.`);
  }
}

/** Validate a batch: every bad key or value is reported, nothing is written unless all are good. */
export function validateSettings(input: Record<string, unknown>): Record<string, unknown> {
  const errors: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(input)) {
    if (!SETTING_KEY_PATTERN.test(key)) errors[key] = `${key} is not a valid setting key (lower-case letters, digits, _ and -).`;
    else if (isSensitiveSetting(key)) errors[key] = `${key} is protected and cannot be changed through the API.`;
    else {
      const c = coerce(key, raw);
      if (c.error) errors[key] = c.error;
      else values[key] = c.value;
    }
  }
  if (Object.keys(errors).length) throw invalidParams(errors);
  return values;
}

export function mountSettings(router: Router, registry: RouteRegistry, namespace: string, settings: SettingsStore): void {
  const tags = ['settings'];
  const settingsObject = { type: 'object', additionalProperties: true, description: 'Every setting, defaults included, without the sensitive ones.' };
  const one = {
    type: 'object',
    required: ['success', 'setting_key', 'value'],
    properties: { success: { const: true }, setting_key: { type: 'string' }, value: {} },
    additionalProperties: false,
  };
  registry.operation(namespace, 'GET', '/settings', {
    summary: 'All settings (api_key, api_secret and other secrets are never included)',
    tags,
    responses: { 200: { description: 'The settings.', schema: { type: 'object', required: ['success', 'settings'], properties: { success: { const: true }, settings: settingsObject } } } },
  });
  registry.operation(namespace, 'POST', '/settings', {
    summary: 'Update several settings: {"settings":{key:value,...}} (or the pairs at the top level)',
    description:
      'At least one pair; with a settings object, the other top-level fields are ignored. Keys: lower-case letters, digits, _ and - (1 to 100); ' +
      `protected keys (api_key, api_secret, secrets, tokens, passwords) are refused. ${VALUE_RULES}`,
    tags,
    // Both shapes in one object schema (a generator or a form handles one better than an anyOf).
    body: { ...settingsMap, properties: { ...TYPED_VALUES, settings: settingsMap } },
    responses: {
      200: {
        description: 'Updated; all or nothing.',
        schema: {
          type: 'object',
          required: ['success', 'updated', 'settings'],
          properties: { success: { const: true }, updated: { type: 'array', items: { type: 'string' } }, settings: settingsObject },
        },
      },
    },
  });
  // Protected keys answer 403 (setting_protected) rather than 400: the pattern says which.
  const pathParams = { key: { ...KEY_SCHEMA, description: 'The setting key.' } };
  registry.operation(namespace, 'GET', '/settings/:key', { summary: 'One setting', tags, pathParams, responses: { 200: { description: 'The setting.', schema: one } } });
  for (const method of ['POST', 'PUT', 'PATCH'] as const) {
    registry.operation(namespace, method, '/settings/:key', {
      summary: 'Set one setting: {"value": ...}',
      description: `value is required. ${VALUE_RULES}`,
      tags,
      pathParams,
      body: z.object({ value: z.unknown() }),
      responses: { 200: { description: 'The new value.', schema: one } },
    });
  }

  router.get('/settings', async (_req, res) => {
    res.json({ success: true, settings: await settings.publicSettings() });
  });

  router.post('/settings', async (req, res) => {
    const body = bodyObject(req.body);
    const input = 'settings' in body ? body.settings : body;
    if (!input || typeof input !== 'object' || Array.isArray(input) || Object.keys(input).length === 0) {
      throw invalidParams({ settings: 'settings must be an object of key-value pairs to update, e.g. {"settings":{"network_name":"My Network"}}.' });
    }
    const values = validateSettings(input as Record<string, unknown>);
    await settings.setMany(values);
    res.json({ success: true, updated: Object.keys(values), settings: await settings.publicSettings() });
  });

  router.get('/settings/:key', async (req, res) => {
    const key = String(req.params.key);
    checkKey(key);
    if (!(await settings.has(key))) throw new ApiError(404, 'setting_not_found', `Setting "${key}" not found.`);
    res.json({ success: true, setting_key: key, value: await settings.get(key) });
  });

  const updateOne = async (req: import('express').Request, res: import('express').Response) => {
    const key = String(req.params.key);
    checkKey(key);
    const body = bodyObject(req.body);
    if (!('value' in body)) throw invalidParams({ value: 'value is required.' });
    const c = coerce(key, body.value);
    if (c.error) throw invalidParams({ value: c.error });
    await settings.set(key, c.value);
    res.json({ success: true, setting_key: key, value: await settings.get(key) });
  };
  router.post('/settings/:key', updateOne);
  router.put('/settings/:key', updateOne);
  router.patch('/settings/:key', updateOne);
}
