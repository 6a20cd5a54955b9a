import fs from 'node:fs';
import pg from 'pg';

export default async function globalTeardown(): Promise<void> {
  const g = globalThis as unknown as Record<string, { stop(): Promise<void> } | undefined>;
  const external = !g.__HF_PG__ && process.env.HF_TEST_ADMIN_DB_URL;
  if (external) {
    // On a shared server, leave nothing of this run behind, and touch nothing of other runs.
    const admin = new pg.Client({ connectionString: process.env.HF_TEST_ADMIN_DB_URL });
    await admin.connect();
    const { rows } = await admin.query("SELECT datname FROM pg_database WHERE datname LIKE $1 OR datname = $2", [
      `hft\\_${process.env.HF_TEST_RUN_ID}\\_%`,
      process.env.HF_TEST_TEMPLATE_DB,
    ]);
    for (const r of rows) await admin.query(`DROP DATABASE IF EXISTS "${r.datname}" WITH (FORCE)`);
    await admin.end();
  }
  await g.__HF_TEMPORAL__?.stop();
  await g.__HF_PG__?.stop();
  const dir = (globalThis as unknown as { __HF_PG_DIR__?: string }).__HF_PG_DIR__;
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}
