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
 * A uPlot chart over days (x: the start of each day, in seconds). The chart is a picture for
 * those who can see it (aria-hidden); the table next to it says the same in text.
 */
export function Chart({ title, days, series, yLabel }: { title: string; days: number[]; series: Series[]; yLabel: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = () => Math.max(280, el.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 240,
        scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(1, (max ?? 0) * 1.1)] } },
        axes: [{}, { label: yLabel, size: 60 }],
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: s.bars ? `${s.color}55` : undefined, paths: s.bars ? bars : undefined, spanGaps: false, points: { show: !s.bars } }))],
        legend: { live: false },
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
  }, [days, series, yLabel]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} aria-hidden="true" />
    </figure>
  );
}
