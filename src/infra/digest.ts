import crypto from 'node:crypto';

/** SHA-256 of a UTF-8 string, as lower-case hex: how secrets are stored and compared. */
export function sha256(value: string): string {
  return crypto.createHash('sha256').update(value, 'utf8').digest('hex');
}
