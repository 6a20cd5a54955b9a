import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yauzl from 'yauzl';
import { BASE, createTestContext, type TestContext } from './helpers';
import { startFakeAi, type FakeAi } from './translation-servers';

/** Polls GET /translations/jobs/{id} until `pred` holds (or times out with the last job). */
export async function waitForJob(ctx: TestContext, id: number, pred: (job: any) => boolean, ms = 60_000): Promise<any> {
  const end = Date.now() + ms;
  let last: any;
  for (;;) {
    const res = await ctx.http.get(`${BASE}/translations/jobs/${id}`).set('Authorization', ctx.basic);
    last = res.body;
    if (res.status === 200 && pred(last)) return last;
    if (Date.now() > end) throw new Error(`timed out waiting for job ${id}; last: ${JSON.stringify(last).slice(0, 2000)}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

export const status = (s: string) => (job: any) => job.status === s;

/** The files of a zip, by name. */
export function unzip(buf: Buffer): Promise<Record<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const out: Record<string, Buffer> = {};
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return reject(e);
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            out[entry.fileName] = Buffer.concat(chunks);
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(out));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

/** supertest: the body as a Buffer (for application/zip). */
export function binaryParser(res: any, cb: (err: Error | null, body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => cb(null, Buffer.concat(chunks)));
}

/** A test context whose translations ask a fake AI provider, and the folder it keeps its files in. */
export interface AiContext {
  ctx: TestContext;
  ai: FakeAi;
  /** Stops the context and the fake AI, and removes the folder. */
  close(): Promise<void>;
}

/** createTestContext with a DATA_DIR of its own and the fake AI (answering `key`) configured; `env` on top. */
export async function startAiContext(key: string, env: Record<string, string> = {}): Promise<AiContext> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-ai-'));
  const ai = await startFakeAi(key);
  const ctx = await createTestContext({
    DATA_DIR: dataDir,
    TRANSLATION_AI_BASE_URL: ai.baseUrl,
    TRANSLATION_AI_MODEL: 'fake-gpt',
    TRANSLATION_AI_API_KEY: key,
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    ...env,
  });
  return {
    ctx,
    ai,
    async close() {
      await ctx.close();
      await ai.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
