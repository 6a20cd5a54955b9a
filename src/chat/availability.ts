import type { Db } from '../db/knex';
import { isoDate } from '../db/timestamps';
import { invalidParams } from '../http/errors';
import { agentRecord, type AgentStore, type Presence } from './agents';
import { forbidden, type AgentCaller } from './auth';

/**
 * Business hours (time zone, weekly schedule, holidays) and agent presence decide whether
 * support is online. Schedule: {"mon": [["09:00","17:00"]], ...} in the given time zone;
 * holidays: local dates "YYYY-MM-DD". With business hours disabled, support is online
 * whenever an agent is.
 */
export const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
export type Day = (typeof DAYS)[number];
export type Schedule = Partial<Record<Day, [string, string][]>>;

export interface BusinessHours {
  enabled: boolean;
  timezone: string;
  schedule: Schedule;
  holidays: string[];
  offline_message: string;
}

export type OfflineReason = 'agents_available' | 'holiday' | 'outside_business_hours' | 'no_agent_online';

/** The canonical IANA names the runtime knows, and UTC (the default, which Intl lists as an alias). */
export const TIME_ZONES: readonly string[] = [...new Set(['UTC', ...Intl.supportedValuesOf('timeZone')])];

export function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Local weekday, date and minute of the day of `now` in `tz`. */
export function localTime(now: Date, tz: string): { day: Day; date: string; minutes: number } {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone: tz, weekday: 'short', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
      .formatToParts(now)
      .map((p) => [p.type, p.value]),
  );
  return {
    day: parts.weekday.toLowerCase().slice(0, 3) as Day,
    date: `${parts.year}-${parts.month}-${parts.day}`,
    minutes: Number(parts.hour) * 60 + Number(parts.minute),
  };
}

const toMinutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/** Whether the business is open at `now` (always, when the hours are not enforced). Intervals are [from, to). */
export function hoursState(hours: BusinessHours, now: Date): { open: boolean; reason?: 'holiday' | 'outside_business_hours' } {
  if (!hours.enabled) return { open: true };
  const local = localTime(now, hours.timezone);
  if (hours.holidays.includes(local.date)) return { open: false, reason: 'holiday' };
  const open = (hours.schedule[local.day] ?? []).some(([from, to]) => local.minutes >= toMinutes(from) && local.minutes < toMinutes(to));
  return open ? { open: true } : { open: false, reason: 'outside_business_hours' };
}

export class Availability {
  constructor(
    private readonly db: Db,
    private readonly realtimeAvailable: () => boolean,
    private readonly pollIntervalSeconds: number,
  ) {}

  async hours(): Promise<BusinessHours & { date_modified: string | null }> {
    const row = await this.db('chat_business_hours').where({ id: 1 }).first();
    return {
      enabled: row.enabled,
      timezone: row.timezone,
      schedule: row.schedule,
      holidays: row.holidays,
      offline_message: row.offline_message,
      date_modified: isoDate(row.date_modified),
    };
  }

  async setHours(patch: Partial<BusinessHours>): Promise<void> {
    const changes: Record<string, unknown> = { date_modified: this.db.fn.now() };
    if (patch.enabled !== undefined) changes.enabled = patch.enabled;
    if (patch.timezone !== undefined) changes.timezone = patch.timezone;
    if (patch.schedule !== undefined) changes.schedule = JSON.stringify(patch.schedule);
    if (patch.holidays !== undefined) changes.holidays = JSON.stringify(patch.holidays);
    if (patch.offline_message !== undefined) changes.offline_message = patch.offline_message;
    await this.db('chat_business_hours').where({ id: 1 }).update(changes);
  }

  /** Online or not, why, and the expected wait (null when offline). */
  async status(now = new Date()) {
    const [hours, agentRow, waitingRow, waitRow] = await Promise.all([
      this.hours(),
      this.db('chat_agents').where({ active: true, presence: 'online' }).count({ n: '*' }).first(),
      // Waiting for an agent: a session that became a ticket (fallback_reason) waits for an e-mail instead.
      this.db('chat_sessions').where({ status: 'waiting' }).whereNull('assigned_agent_id').whereNull('fallback_reason').count({ n: '*' }).first(),
      // Average wait of the live chats assigned in the last 7 days (not of sessions that fell back
      // to a ticket first: their wait until an agent came is not a chat wait).
      this.db('chat_sessions')
        .whereNotNull('assigned_at')
        .where((w) => {
          void w.whereNull('fallback_reason').orWhereIn('fallback_reason', ['converted', 'linked']);
        })
        .where('assigned_at', '>=', this.db.raw("now() - interval '7 days'"))
        .first(this.db.raw('avg(extract(epoch from assigned_at - date_created))::float8 as avg')),
    ]);
    const agentsOnline = Number(agentRow?.n ?? 0);
    const waiting = Number(waitingRow?.n ?? 0);
    const state = hoursState(hours, now);
    let reason: OfflineReason = 'agents_available';
    if (!state.open) reason = state.reason!;
    else if (agentsOnline === 0) reason = 'no_agent_online';
    const online = reason === 'agents_available';
    const avgWait = waitRow?.avg == null ? 60 : Number(waitRow.avg);
    const expected = online ? Math.round(avgWait * Math.max(1, Math.ceil((waiting + 1) / agentsOnline))) : null;
    return {
      online,
      status: online ? ('online' as const) : ('offline' as const),
      reason,
      message: online ? 'An agent is available.' : hours.offline_message,
      agents_online: agentsOnline,
      waiting_sessions: waiting,
      expected_wait_seconds: expected,
      realtime_available: this.realtimeAvailable(),
      poll_interval_seconds: this.pollIntervalSeconds,
      business_hours: {
        enabled: hours.enabled,
        timezone: hours.timezone,
        schedule: hours.schedule,
        holidays: hours.holidays,
        open_now: state.open,
      },
    };
  }
}

/** Business hours as the request gives them (intervals as arrays). */
type BusinessHoursPatch = Omit<Partial<BusinessHours>, 'schedule'> & { schedule?: Partial<Record<Day, string[][]>> };

/** What the agent console sees of availability and may change: presence, and (administrators) business hours. */
export class AgentAvailability {
  constructor(
    private readonly availability: Availability,
    private readonly agents: AgentStore,
  ) {}

  async overview() {
    const [status, hours, list] = await Promise.all([this.availability.status(), this.availability.hours(), this.agents.list()]);
    return { status, business_hours: { ...hours, open_now: status.business_hours.open_now }, agents: list.map(agentRecord) };
  }

  /** An agent sets its own presence; administrators any agent's, and the business hours. */
  async update(caller: AgentCaller, input: { agent_id?: number; presence?: Presence; business_hours?: BusinessHoursPatch }) {
    if (input.business_hours !== undefined && !caller.admin) throw forbidden('Only administrators change the business hours.');
    if (input.agent_id !== undefined && input.agent_id !== caller.agentId && !caller.admin) throw forbidden('Only administrators set the presence of another agent.');
    if (input.presence !== undefined) {
      const target = input.agent_id ?? caller.agentId;
      if (target === null) throw invalidParams({ agent_id: 'agent_id is required with the API credentials.' });
      if (!(await this.agents.get(target))) throw invalidParams({ agent_id: 'agent_id is not an existing agent.' });
      await this.agents.setPresence(target, input.presence);
    }
    // The schema checked that each interval is a pair.
    if (input.business_hours) await this.availability.setHours(input.business_hours as Partial<BusinessHours>);
    return this.overview();
  }
}
