// Charts as inline SVG: sparklines for the overview's last hour and the
// model page's duration histogram with the poll plan drawn over it.

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const finite = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/**
 * A sparkline of one or more series over the same minutes.
 * series: [{values: number[], kind: 'bar'|'line', cls}], opts: {width, height, label, fmt, times}
 */
export function sparkline(series, opts = {}) {
  const w = opts.width || 220;
  const hgt = opts.height || 58;
  const n = Math.max(1, ...series.map((x) => x.values.length));
  const top = Math.max(opts.min || 0, ...series.flatMap((x) => x.values.map(finite)));
  const y = (v) => hgt - 2 - (top > 0 ? (finite(v) / top) * (hgt - 6) : 0);
  const bw = w / n;
  const svg = s('svg', { class: 'spark', viewBox: `0 0 ${w} ${hgt}`, width: w, height: hgt, role: 'img', 'aria-label': opts.label || 'chart', preserveAspectRatio: 'none' });
  svg.append(s('line', { x1: 0, x2: w, y1: hgt - 1.5, y2: hgt - 1.5, class: 'axis' }));
  for (const ser of series) {
    if (ser.kind === 'bar') {
      ser.values.forEach((v, i) => {
        if (!finite(v)) return;
        const yy = y(v);
        const r = s('rect', { x: (i * bw + 0.5).toFixed(1), y: yy.toFixed(1), width: Math.max(1, bw - 1).toFixed(1), height: Math.max(1, hgt - 2 - yy).toFixed(1), class: ser.cls || 'bar' });
        if (opts.times && opts.times[i]) r.append(s('title', {}, `${opts.times[i]}: ${opts.fmt ? opts.fmt(v) : v}`));
        svg.append(r);
      });
    } else {
      let d = '';
      let pen = false;
      ser.values.forEach((v, i) => {
        if (v === null || v === undefined || !Number.isFinite(v) || (ser.gaps && v === 0)) { pen = false; return; }
        d += `${pen ? 'L' : 'M'}${(i * bw + bw / 2).toFixed(1)} ${y(v).toFixed(1)}`;
        pen = true;
      });
      if (d) svg.append(s('path', { d, class: ser.cls || 'line', fill: 'none' }));
      // A point with no neighbour draws no line: mark it.
      const ok = (v) => v !== null && v !== undefined && Number.isFinite(v) && !(ser.gaps && v === 0);
      ser.values.forEach((v, i) => {
        if (ok(v) && !ok(ser.values[i - 1]) && !ok(ser.values[i + 1])) {
          svg.append(s('circle', { cx: (i * bw + bw / 2).toFixed(1), cy: y(v).toFixed(1), r: 1.8, class: `${ser.cls || 'line'} pt` }));
        }
      });
    }
  }
  return svg;
}

/**
 * The distribution of a model's durations as a histogram (bins of
 * {lo, hi, count}) with its CDF and the plan's poll times as ticks, all in
 * seconds on one axis.
 */
export function distribution({ bins = [], cdf = [], polls = [], quantiles = {} }, opts = {}) {
  const w = opts.width || 1240;
  const hgt = opts.height || 260;
  const m = { l: 44, r: 44, t: 14, b: 44 };
  const iw = w - m.l - m.r;
  const ih = hgt - m.t - m.b;
  const xmax = Math.max(1e-9, ...bins.map((b) => finite(b.hi)), ...cdf.map((p) => finite(p[0])), ...(opts.pollsInRange ? polls : []));
  const cmax = Math.max(1e-9, ...bins.map((b) => finite(b.count)));
  const x = (v) => m.l + (Math.min(v, xmax) / xmax) * iw;
  const yh = (c) => m.t + ih - (c / cmax) * ih;
  const yc = (p) => m.t + ih - p * ih;
  const svg = s('svg', { class: 'dist', viewBox: `0 0 ${w} ${hgt}`, width: '100%', role: 'img', 'aria-label': opts.label || 'distribution' });

  // Grid and axes.
  const ticks = niceTicks(xmax, 8);
  for (const t of ticks) {
    svg.append(s('line', { x1: x(t), x2: x(t), y1: m.t, y2: m.t + ih, class: 'grid' }));
    svg.append(s('text', { x: x(t), y: m.t + ih + 14, class: 'tick', 'text-anchor': 'middle' }, fmtS(t)));
  }
  for (const p of [0.25, 0.5, 0.75, 1]) {
    svg.append(s('line', { x1: m.l, x2: m.l + iw, y1: yc(p), y2: yc(p), class: 'grid' }));
    svg.append(s('text', { x: m.l + iw + 6, y: yc(p) + 4, class: 'tick' }, `${p * 100}%`));
  }
  svg.append(s('text', { x: m.l - 6, y: m.t + 8, class: 'tick', 'text-anchor': 'end' }, (opts.fmtCount || String)(cmax)));
  svg.append(s('text', { x: m.l - 6, y: m.t + ih, class: 'tick', 'text-anchor': 'end' }, '0'));
  svg.append(s('line', { x1: m.l, x2: m.l + iw, y1: m.t + ih, y2: m.t + ih, class: 'axis' }));

  for (const b of bins) {
    const x0 = x(finite(b.lo));
    const x1 = x(finite(b.hi));
    const r = s('rect', { x: x0 + 0.5, y: yh(finite(b.count)), width: Math.max(1, x1 - x0 - 1), height: m.t + ih - yh(finite(b.count)), class: 'hist' });
    r.append(s('title', {}, `${fmtS(b.lo)}–${fmtS(b.hi)}: ${(opts.fmtCount || String)(b.count)}`));
    svg.append(r);
  }
  if (cdf.length) {
    const d = cdf.map((p, i) => `${i ? 'L' : 'M'}${x(p[0]).toFixed(1)} ${yc(p[1]).toFixed(1)}`).join('');
    svg.append(s('path', { d, class: 'cdf', fill: 'none' }));
  }
  let lastLabel = -Infinity;
  for (const [name, v] of Object.entries(quantiles)) {
    if (!finite(v) || v > xmax) continue;
    svg.append(s('line', { x1: x(v), x2: x(v), y1: m.t, y2: m.t + ih, class: 'qline' }));
    // Labels too close to the previous one go one line down.
    const down = x(v) - lastLabel < 34;
    svg.append(s('text', { x: x(v) + 3, y: m.t + (down ? 22 : 10), class: 'qlabel' }, name));
    if (!down) lastLabel = x(v);
  }
  // The poll plan: a tick under the axis at each poll.
  const py = m.t + ih + 22;
  svg.append(s('text', { x: m.l - 6, y: py + 5, class: 'tick', 'text-anchor': 'end' }, 'polls'));
  let shown = 0;
  polls.forEach((t, i) => {
    if (!Number.isFinite(t) || t > xmax) return;
    shown++;
    const tk = s('line', { x1: x(t), x2: x(t), y1: py - 5, y2: py + 5, class: 'poll' });
    tk.append(s('title', {}, `poll ${i + 1} at ${fmtS(t)}`));
    svg.append(tk);
  });
  const beyond = polls.filter((t) => t > xmax).length;
  if (beyond) svg.append(s('text', { x: m.l + iw + 6, y: py + 4, class: 'tick' }, `+${beyond}`));
  svg.dataset.polls = String(shown);
  return svg;
}

function niceTicks(max, n) {
  const raw = max / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((k) => k * mag).find((k) => k >= raw) || raw;
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(Number(t.toFixed(6)));
  return out;
}

function fmtS(v) {
  if (!Number.isFinite(v)) return '';
  if (v >= 3600) return `${+(v / 3600).toFixed(1)}h`;
  if (v >= 60) return `${+(v / 60).toFixed(1)}m`;
  return `${+v.toFixed(v < 10 ? 1 : 0)}s`;
}

/** A stacked horizontal bar of counts by state, each segment a link. */
export function stack(counts, order, hrefOf) {
  const total = order.reduce((a, k) => a + (counts[k] || 0), 0);
  const bar = document.createElement('div');
  bar.className = 'stackbar';
  if (!total) { bar.classList.add('empty'); return bar; }
  for (const k of order) {
    const c = counts[k] || 0;
    if (!c) continue;
    const a = document.createElement('a');
    a.className = `seg s-${k}`;
    a.href = hrefOf(k);
    a.title = `${k}: ${c.toLocaleString('en-US')}`;
    a.style.flexGrow = String(c);
    bar.append(a);
  }
  return bar;
}

/**
 * Spend per day: one bar a day (values, over dates 'YYYY-MM-DD'), the
 * day's budget as a dashed line when there is one, the dates along the
 * axis and the amounts up the side.
 */
export function dayBars(values, dates, opts = {}) {
  const w = opts.width || 1240;
  const hgt = opts.height || 200;
  const m = { l: 56, r: 12, t: 12, b: 30 };
  const iw = w - m.l - m.r;
  const ih = hgt - m.t - m.b;
  const budget = finite(opts.budget);
  const top = Math.max(1e-9, budget * 1.1, ...values.map(finite));
  const n = Math.max(1, values.length);
  const bw = iw / n;
  const y = (v) => m.t + ih - (finite(v) / top) * ih;
  const fmt = opts.fmt || ((v) => v.toFixed(2));
  const svg = s('svg', { class: 'days', viewBox: `0 0 ${w} ${hgt}`, width: '100%', role: 'img', 'aria-label': opts.label || 'spend per day' });
  for (const t of niceTicks(top, 4)) {
    svg.append(s('line', { x1: m.l, x2: m.l + iw, y1: y(t), y2: y(t), class: 'grid' }));
    svg.append(s('text', { x: m.l - 6, y: y(t) + 4, class: 'tick', 'text-anchor': 'end' }, fmt(t)));
  }
  values.forEach((v, i) => {
    const yy = y(v);
    const over = budget > 0 && finite(v) > budget;
    const r = s('rect', { x: (m.l + i * bw + 1).toFixed(1), y: yy.toFixed(1), width: Math.max(1, bw - 2).toFixed(1), height: Math.max(0, m.t + ih - yy).toFixed(1), class: over ? 'bar over' : 'bar', 'data-date': dates[i], 'data-value': finite(v) });
    r.append(s('title', {}, `${dates[i]}: ${fmt(finite(v))}`));
    svg.append(r);
  });
  const every = Math.max(1, Math.ceil(n / 10));
  dates.forEach((d, i) => {
    if (i % every !== 0 && i !== n - 1) return;
    svg.append(s('text', { x: m.l + i * bw + bw / 2, y: m.t + ih + 16, class: 'tick', 'text-anchor': 'middle' }, d.slice(5)));
  });
  svg.append(s('line', { x1: m.l, x2: m.l + iw, y1: m.t + ih, y2: m.t + ih, class: 'axis' }));
  if (budget > 0) {
    svg.append(s('line', { x1: m.l, x2: m.l + iw, y1: y(budget), y2: y(budget), class: 'budget' }));
    svg.append(s('text', { x: m.l + iw - 4, y: y(budget) - 4, class: 'tick budget-label', 'text-anchor': 'end' }, `day budget ${fmt(budget)}`));
  }
  return svg;
}
