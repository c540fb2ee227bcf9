// Small dependency-free SVG line charts for the pacing benchmark.

export interface Series {
  name: string;
  color: string;
  points: [number, number][];
  dashed?: boolean;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  width?: number;
  height?: number;
  /** Base-10 logarithmic y axis (values below `yMin` are drawn at it). */
  logY?: boolean;
  yMin?: number;
}

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function lineChart(o: ChartOptions): string {
  const width = o.width ?? 640;
  const height = o.height ?? 320;
  const pad = { left: 64, right: 16, top: 32, bottom: 44 };
  const all = o.series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]).filter(Number.isFinite);
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs);
  const yFloor = o.yMin ?? (o.logY ? 1 : 0);
  const yOf = (v: number) => (o.logY ? Math.log10(Math.max(yFloor, v)) : v);
  const yLow = o.logY ? Math.log10(yFloor) : Math.min(0, ...ys);
  const yHigh = Math.max(yLow + 1e-9, ...ys.map(yOf));
  const px = (x: number) => pad.left + ((x - xMin) / (xMax - xMin || 1)) * (width - pad.left - pad.right);
  const py = (y: number) =>
    height - pad.bottom - ((yOf(y) - yLow) / (yHigh - yLow)) * (height - pad.top - pad.bottom);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="18" text-anchor="middle" font-size="13">${escape(o.title)}</text>`,
    `<line x1="${pad.left}" y1="${height - pad.bottom}" x2="${width - pad.right}" y2="${height - pad.bottom}" stroke="black"/>`,
    `<line x1="${pad.left}" y1="${pad.top}" x2="${pad.left}" y2="${height - pad.bottom}" stroke="black"/>`,
    `<text x="${width / 2}" y="${height - 8}" text-anchor="middle">${escape(o.xLabel)}</text>`,
    `<text x="14" y="${height / 2}" text-anchor="middle" transform="rotate(-90 14 ${height / 2})">${escape(o.yLabel)}</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const x = xMin + ((xMax - xMin) * i) / 4;
    parts.push(
      `<text x="${px(x)}" y="${height - pad.bottom + 14}" text-anchor="middle">${x.toFixed(0)}</text>`,
    );
    const yv = yLow + ((yHigh - yLow) * i) / 4;
    const label = o.logY ? 10 ** yv : yv;
    const y = height - pad.bottom - ((yv - yLow) / (yHigh - yLow)) * (height - pad.top - pad.bottom);
    parts.push(
      `<text x="${pad.left - 6}" y="${y + 4}" text-anchor="end">${label >= 100 ? label.toFixed(0) : label.toPrecision(2)}</text>`,
      `<line x1="${pad.left}" y1="${y}" x2="${width - pad.right}" y2="${y}" stroke="#ddd"/>`,
    );
  }
  o.series.forEach((s, i) => {
    const d = s.points
      .filter((p) => Number.isFinite(p[1]))
      .map((p, j) => `${j === 0 ? 'M' : 'L'}${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`)
      .join('');
    parts.push(
      `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.5"${s.dashed ? ' stroke-dasharray="5,4"' : ''}/>`,
      `<rect x="${pad.left + 10}" y="${pad.top + 6 + i * 15}" width="12" height="3" fill="${s.color}"/>`,
      `<text x="${pad.left + 26}" y="${pad.top + 10 + i * 15}">${escape(s.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
