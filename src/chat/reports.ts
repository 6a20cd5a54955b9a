import type { Db } from '../db/knex';
import { invalidParams } from '../http/errors';

/**
 * Reports over the sessions created in [from, to): sessions by status; first response, wait
 * and resolution times (seconds: count, average, p90); satisfaction (average, count); agent
 * time per agent. All computed in SQL.
 */
export interface DurationStats {
  count: number;
  average_seconds: number | null;
  p90_seconds: number | null;
}

const round = (v: unknown): number | null => (v === null || v === undefined ? null : Math.round(Number(v) * 100) / 100);

export async function chatReport(db: Db, from: Date, to: Date) {
  const inRange = (alias = 's') => db.raw(`${alias}.date_created >= ? AND ${alias}.date_created < ?`, [from, to]);
  const duration = async (startCol: string, endCol: string): Promise<DurationStats> => {
    const result = await db.raw(
      `SELECT count(*)::int AS n,
              avg(extract(epoch FROM ${endCol} - ${startCol}))::float8 AS avg,
              percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM ${endCol} - ${startCol}))::float8 AS p90
       FROM chat_sessions s WHERE ${endCol} IS NOT NULL AND ?`,
      [inRange()],
    );
    const row = result.rows[0];
    return { count: row.n, average_seconds: round(row.avg), p90_seconds: round(row.p90) };
  };
  const [byStatus, firstResponse, wait, resolution, satisfaction, agentTime] = await Promise.all([
    db.raw(`SELECT status, count(*)::int AS n FROM chat_sessions s WHERE ? GROUP BY status`, [inRange()]),
    duration('s.date_created', 's.first_response_at'),
    duration('s.date_created', 's.assigned_at'),
    duration('s.date_created', 's.resolved_at'),
    db.raw(`SELECT count(*)::int AS n, avg(r.rating)::float8 AS avg FROM chat_satisfaction r JOIN chat_sessions s ON s.id = r.session_id WHERE ?`, [inRange()]),
    db.raw(
      `SELECT t.agent_id, a.name, sum(t.minutes)::int AS minutes, count(*)::int AS entries, count(DISTINCT t.session_id)::int AS sessions
       FROM chat_agent_time t JOIN chat_sessions s ON s.id = t.session_id JOIN chat_agents a ON a.id = t.agent_id
       WHERE ? GROUP BY t.agent_id, a.name ORDER BY t.agent_id`,
      [inRange()],
    ),
  ]);
  const statuses: Record<string, number> = { waiting: 0, assigned: 0, active: 0, resolved: 0, closed: 0 };
  for (const row of byStatus.rows as { status: string; n: number }[]) statuses[row.status] = row.n;
  const rated = satisfaction.rows[0];
  return {
    from: from.toISOString(),
    to: to.toISOString(),
    sessions: { total: Object.values(statuses).reduce((a, b) => a + b, 0), by_status: statuses },
    first_response: firstResponse,
    wait,
    resolution,
    satisfaction: { count: rated.n, average: round(rated.avg) },
    agent_time: (agentTime.rows as { agent_id: number; name: string; minutes: number; entries: number; sessions: number }[]).map((row) => ({
      agent_id: Number(row.agent_id),
      agent_name: row.name,
      minutes: row.minutes,
      entries: row.entries,
      sessions: row.sessions,
    })),
  };
}

/** The report over a range given as ISO 8601 dates or date-times: to defaults to now, from to 30 days before to. */
export class ChatReports {
  constructor(private readonly db: Db) {}

  async report(range: { from?: string; to?: string }) {
    const to = range.to ? new Date(range.to) : new Date();
    const from = range.from ? new Date(range.from) : new Date(to.getTime() - 30 * 86_400_000);
    if (from > to) throw invalidParams({ from: 'from must not be later than to.' });
    return chatReport(this.db, from, to);
  }
}
