import { useMemo } from 'preact/hooks';
import type { Api } from '../api';
import { ErrorMessage, PageTitle, Progress, Table } from '../components';
import { useLoad } from '../hooks';
import { navigate, type Location } from '../router';
import { Chart, type Series } from './Chart';
import type { Report } from './types';

const DAY = 86_400_000;
/** At most this many points per chart: a longer range is cut into buckets of several days. */
const MAX_BUCKETS = 31;
const COLORS = ['#0b5cad', '#bf5a00', '#116329', '#8250df', '#a40e26', '#57606a'];

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const validDay = (s: string | null) => (s && /^\d{4}-\d\d-\d\d$/.test(s) && !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) ? s : null);
const seconds = (v: number | null) => (v === null ? '—' : v < 120 ? `${Math.round(v)} s` : `${(v / 60).toFixed(1)} min`);

/** Runs `fns` at most `n` at a time, answering their results in order. */
async function limited<T>(fns: (() => Promise<T>)[], n: number): Promise<T[]> {
  const out: T[] = new Array(fns.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, fns.length) }, async () => {
      while (next < fns.length) {
        const i = next++;
        out[i] = await fns[i]();
      }
    }),
  );
  return out;
}

/**
 * Reports over a range of days (UTC): waiting and first-response times, satisfaction and agent
 * time, drawn with uPlot, each chart with a table saying the same in text. The API reports over
 * one range at a time (GET /chat/agent/reports?from=&to=), so the chart asks once per day (or per
 * bucket of days on a long range) and once for the whole range.
 */
export function ReportsPage({ api, loc }: { api: Api; loc: Location }) {
  const today = Date.parse(`${isoDay(Date.now())}T00:00:00Z`);
  const to = validDay(loc.query.get('to')) ?? isoDay(today);
  const from = validDay(loc.query.get('from')) ?? isoDay(today - 13 * DAY);
  const start = Date.parse(`${from}T00:00:00Z`);
  const end = Date.parse(`${to}T00:00:00Z`) + DAY;
  const wrongOrder = start >= end;
  const days = Math.max(1, Math.round((end - start) / DAY));
  const step = Math.ceil(days / MAX_BUCKETS) * DAY;
  const buckets = wrongOrder ? [] : Array.from({ length: Math.ceil((end - start) / step) }, (_, i) => start + i * step);

  const data = useLoad(
    async (signal) => {
      if (wrongOrder) return undefined;
      const get = (a: number, b: number) => api.chat<Report>(`/chat/agent/reports?from=${new Date(a).toISOString()}&to=${new Date(Math.min(b, end)).toISOString()}`, { signal });
      const [total, ...per] = await limited([() => get(start, end), ...buckets.map((b) => () => get(b, b + step))], 6);
      // The buckets go with their answers: while another range loads, these are still shown.
      return { total, per, buckets, step, end };
    },
    `${from}/${to}`,
  );

  const charts = useMemo(() => {
    if (!data.data) return null;
    const per = data.data.per;
    const xs = data.data.buckets.map((b) => b / 1000);
    const agents = data.data.total.agent_time;
    return {
      xs,
      times: [
        { label: 'Wait until an agent took it (average)', values: per.map((r) => r.wait.average_seconds), color: COLORS[0] },
        { label: 'First response (average)', values: per.map((r) => r.first_response.average_seconds), color: COLORS[1] },
      ] as Series[],
      satisfaction: [{ label: 'Average rating', values: per.map((r) => r.satisfaction.average), color: COLORS[2] }] as Series[],
      agentTime: agents.map((a, i) => ({
        label: a.agent_name,
        values: per.map((r) => r.agent_time.find((x) => x.agent_id === a.agent_id)?.minutes ?? 0),
        color: COLORS[i % COLORS.length],
        bars: agents.length === 1,
      })) as Series[],
    };
  }, [data.data]);

  const shown = data.data;
  const bucketLabel = (b: number) => (shown!.step === DAY ? isoDay(b) : `${isoDay(b)} – ${isoDay(Math.min(b + shown!.step, shown!.end) - DAY)}`);
  const total = wrongOrder ? undefined : data.data?.total;
  return (
    <section>
      <PageTitle>Reports</PageTitle>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          navigate('/reports', { from: String(f.get('from')), to: String(f.get('to')) });
        }}
      >
        <div class="field">
          <label class="field-label" for="report-from">
            From (day, UTC)
          </label>
          <input id="report-from" name="from" type="date" defaultValue={from} required />
        </div>
        <div class="field">
          <label class="field-label" for="report-to">
            To (day included)
          </label>
          <input id="report-to" name="to" type="date" defaultValue={to} required />
        </div>
        <button type="submit">Show</button>
      </form>
      {wrongOrder ? <ErrorMessage error="The first day must not be after the last day." title="Choose another range" /> : null}
      <ErrorMessage error={data.error} title="The reports could not be loaded" />
      {data.loading && !wrongOrder ? <Progress label={`Loading the reports (${buckets.length + 1} ranges)…`} /> : null}
      {total && charts ? (
        <>
          <ul class="figures">
            <li>
              <strong>{total.sessions.total}</strong> chats
            </li>
            <li>
              <strong>{seconds(total.wait.average_seconds)}</strong> average wait (p90 {seconds(total.wait.p90_seconds)})
            </li>
            <li>
              <strong>{seconds(total.first_response.average_seconds)}</strong> average first response (p90 {seconds(total.first_response.p90_seconds)})
            </li>
            <li>
              <strong>{total.satisfaction.average ?? '—'}</strong> satisfaction ({total.satisfaction.count} rating{total.satisfaction.count === 1 ? '' : 's'})
            </li>
            <li>
              <strong>{total.agent_time.reduce((a, r) => a + r.minutes, 0)}</strong> agent minutes
            </li>
          </ul>
          <div class="charts">
            <Chart title="Waiting times per day (seconds)" days={charts.xs} step={shown!.step / 1000} series={charts.times} yLabel="seconds" />
            <Chart title="Satisfaction per day (average rating, 1 to 5)" days={charts.xs} step={shown!.step / 1000} series={charts.satisfaction} yLabel="rating" />
            {charts.agentTime.length ? <Chart title="Agent time per day (minutes)" days={charts.xs} step={shown!.step / 1000} series={charts.agentTime} yLabel="minutes" /> : <p class="empty">No agent time was logged in this range.</p>}
          </div>
          <h2>The same in numbers</h2>
          <Table caption="Reports per day">
            <thead>
              <tr>
                <th>{shown!.step === DAY ? 'Day' : 'Days'}</th>
                <th class="num">Chats</th>
                <th class="num">Average wait</th>
                <th class="num">Average first response</th>
                <th class="num">Satisfaction</th>
                <th class="num">Agent minutes</th>
              </tr>
            </thead>
            <tbody>
              {shown!.per.map((r, i) => (
                <tr key={shown!.buckets[i]}>
                  <td class="nowrap">{bucketLabel(shown!.buckets[i])}</td>
                  <td class="num">{r.sessions.total}</td>
                  <td class="num">{seconds(r.wait.average_seconds)}</td>
                  <td class="num">{seconds(r.first_response.average_seconds)}</td>
                  <td class="num">{r.satisfaction.average === null ? '—' : `${r.satisfaction.average} (${r.satisfaction.count})`}</td>
                  <td class="num">{r.agent_time.reduce((a, x) => a + x.minutes, 0)}</td>
                </tr>
              ))}
            </tbody>
          </Table>
          <h2>Agent time over the range</h2>
          {total.agent_time.length ? (
            <Table caption="Agent time over the range">
              <thead>
                <tr>
                  <th>Agent</th>
                  <th class="num">Minutes</th>
                  <th class="num">Entries</th>
                  <th class="num">Chats</th>
                </tr>
              </thead>
              <tbody>
                {total.agent_time.map((a) => (
                  <tr key={a.agent_id}>
                    <td>{a.agent_name}</td>
                    <td class="num">{a.minutes}</td>
                    <td class="num">{a.entries}</td>
                    <td class="num">{a.sessions}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          ) : (
            <p class="empty">None.</p>
          )}
        </>
      ) : null}
    </section>
  );
}
