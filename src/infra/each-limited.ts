/**
 * Runs `fn` on every item, at most `limit` at once, and resolves when all are done (rejects
 * with the first error, after the others in flight have settled).
 */
export async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const failures: unknown[] = [];
  const lane = async () => {
    while (next < items.length && failures.length === 0) {
      const item = items[next++];
      try {
        await fn(item);
      } catch (error) {
        failures.push(error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failures.length > 0) throw failures[0];
}
