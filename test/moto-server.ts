/**
 * A real S3-protocol server on loopback for the object-storage tests: moto in server mode
 * (`moto_server`, installed by scripts/install-tools.js into .tools/moto, or $MOTO_SERVER),
 * one per test file, on a free port, with a bucket of its own. Stopped by the file's afterAll.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from '../src/infra/temporal-server';

export const MOTO_MISSING = 'moto_server not found: run `node scripts/install-tools.js` (it installs moto[server] into .tools/moto) or set MOTO_SERVER.';

export interface MotoServer {
  endpoint: string;
  /** The env a test context needs for the s3 driver against this server and `bucket`. */
  env(bucket: string, prefix?: string): Record<string, string>;
  createBucket(bucket: string): Promise<void>;
  stop(): Promise<void>;
}

/** moto takes any credentials; these are the ones the tests send. */
const CREDENTIALS = { accessKeyId: 'hostflow-test', secretAccessKey: 'hostflow-test-secret' };

export function motoBinary(): string | null {
  const local = path.resolve(__dirname, '..', '.tools', 'moto', 'bin', 'moto_server');
  for (const c of [process.env.MOTO_SERVER, local]) if (c && fs.existsSync(c)) return c;
  return null;
}

export async function startMoto(): Promise<MotoServer> {
  const binary = motoBinary();
  if (!binary) throw new Error(MOTO_MISSING);
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  let output = '';
  const child: ChildProcess = spawn(binary, ['-H', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-4000)));
  child.stderr!.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto_server exited (${child.exitCode}):\n${output}`);
    const up = await fetch(`${endpoint}/`).then(
      (r) => r.status < 500,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto_server did not answer on ${endpoint} within 30 s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: CREDENTIALS });
  return {
    endpoint,
    env: (bucket, prefix) => ({
      STORAGE_DRIVER: 's3',
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
      S3_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
      ...(prefix ? { S3_PREFIX: prefix } : {}),
    }),
    createBucket: async (bucket) => {
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    },
    stop: async () => {
      client.destroy();
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(killer);
      }
    },
  };
}
