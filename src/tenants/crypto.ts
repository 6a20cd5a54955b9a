import crypto from 'node:crypto';

/**
 * Tenant database credentials at rest: AES-256-GCM with a 32-byte key from the environment
 * (TENANT_CREDENTIALS_KEY). Stored as `v1:<iv>:<tag>:<ciphertext>` (base64 parts); the
 * tenant's uid is the associated data, so a value copied to another tenant does not decrypt.
 */
export function parseCredentialsKey(value: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error('TENANT_CREDENTIALS_KEY must be 32 bytes (64 hex digits or base64).');
  return key;
}

export function encryptSecret(key: Buffer, plaintext: string, aad: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join(':');
}

export function decryptSecret(key: Buffer, stored: string, aad: string): string {
  const [version, iv, tag, body] = stored.split(':');
  if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('unknown credentials format');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(Buffer.from(tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
}

/** SHA-256 digests compared in constant time. */
export function sameSecret(a: string, b: string): boolean {
  const da = crypto.createHash('sha256').update(a).digest();
  const db = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(da, db);
}
