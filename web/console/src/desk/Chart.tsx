import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Series {
  label: string;
  values: (number | null)[];
  color: string;
  /** Draw as bars (counts) rather than a line. */
  bars?: boolean;
}

const bars = uPlot.paths.bars!({ size: [0.6, 40] });

/**
 * A uPlot chart over days (x: the start of each day or bucket of `step` seconds, in seconds). The chart is a picture for
 * those who can see it (aria-hidden); the table next to it says the same in text.
 */
export function Chart({ title, days, step, series, yLabel }: { title: string; days: number[]; step: number; series: Series[]; yLabel: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(280, el.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 240,
        scales: {
          // The whole range, each point at the start of its bucket (uPlot's own range would span years around one point).
          x: { time: true, range: () => [days[0] - step / 2, days[days.length - 1] + step / 2] },
          y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(1, (max ?? 0) * 1.1)] } },
        axes: [{}, { label: yLabel, size: 60 }],
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: s.bars ? `${s.color}55` : undefined, paths: s.bars ? bars : undefined, spanGaps: false, points: { show: !s.bars } }))],
        legend: { live: false },
        // The days are UTC days (as the report's ranges): the axis says their dates, not the reader's local hours.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      },
      [days, ...series.map((s) => s.values)],
      el,
    );
    const resize = () => plot.setSize({ width: width(), height: 240 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [days, step, series, yLabel]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} aria-hidden="true" />
    </figure>
  );
}
