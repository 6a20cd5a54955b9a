/** `npm run migrate`: bring the schema of DATABASE_URL up to date. */
import { ConfigError, loadConfig } from './config';
import { logger, setLogLevel } from './logger';
import { openDb, prepareDatabase } from './runtime';

async function main() {
  const config = loadConfig();
  setLogLevel(config.LOG_LEVEL);
  if (!config.DATABASE_URL) throw new ConfigError('migrate needs DATABASE_URL (npm start migrates the embedded database itself).');
  const db = openDb(config.DATABASE_URL, config);
  try {
    await prepareDatabase(db, config);
    logger.info('database is up to date');
  } finally {
    await db.destroy();
  }
}

main().catch((err) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else logger.fatal({ err }, 'migration failed');
  process.exit(1);
});
