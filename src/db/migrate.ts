import type { Db } from './knex';
import { migrationSource } from '../../migrations';

/** Bring the schema up to date. Safe to run from several processes: knex takes a lock table row. */
export async function migrateLatest(db: Db): Promise<string[]> {
  const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
  return applied;
}
