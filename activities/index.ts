import type { Db } from '../src/db/knex';

export interface ActivityDeps {
  db: Db;
}

/**
 * Activities (the side effects workflows ask for), built from their dependencies so the
 * worker and the tests share one wiring. Each capability adds its activities here.
 */
export function createActivities(_deps: ActivityDeps): Record<string, (...args: any[]) => Promise<unknown>> {
  return {};
}
