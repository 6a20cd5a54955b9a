import crypto from 'node:crypto';
import os from 'node:os';
import { promisify } from 'node:util';

const scryptAsync = promisify(crypto.scrypt) as (pw: string, salt: Buffer, len: number, opts: crypto.ScryptOptions) => Promise<Buffer>;

/**
 * scrypt runs on libuv's thread pool (never on the event loop), a CPU-bound ~100 ms each. At
 * most one per core at a time, and one pool thread always left for the rest (file system, DNS
 * lookups of new database connections): more hashes at once would not finish sooner, they would
 * only hold those up. Per process: each replica hashes on its own cores.
 */
const HASH_SLOTS = Math.max(1, Math.min(os.availableParallelism(), Number(process.env.UV_THREADPOOL_SIZE ?? 4) - 1));
let hashing = 0;
const waiting: (() => void)[] = [];

async function scrypt(pw: string, salt: Buffer, len: number, opts: crypto.ScryptOptions): Promise<Buffer> {
  if (hashing >= HASH_SLOTS) await new Promise<void>((resolve) => waiting.push(resolve));
  else hashing++;
  try {
    return await scryptAsync(pw, salt, len, opts);
  } finally {
    // The slot passes straight to the next in line (or is freed).
    const next = waiting.shift();
    if (next) next();
    else hashing--;
  }
}

// scrypt parameters (N=2^15, r=8, p=1): about 32 MiB and tens of milliseconds a hash.
const N = 1 << 15;
const R = 8;
const P = 1;
const KEYLEN = 32;
const MAXMEM = 64 * 1024 * 1024;

/** Self-describing hash: scrypt$N$r$p$salt$hash (base64url). */
export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, KEYLEN, { N, r: R, p: P, maxmem: MAXMEM });
  return ['scrypt', N, R, P, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [n, r, p] = parts.slice(1, 4).map(Number);
  const salt = Buffer.from(parts[4], 'base64url');
  const expected = Buffer.from(parts[5], 'base64url');
  const actual = await scrypt(password, salt, expected.length, { N: n, r, p, maxmem: MAXMEM });
  return crypto.timingSafeEqual(actual, expected);
}
