// The Galley HTML report's script (html_report.cpp inlines it after the data it reads).
//
// It draws the timeline and the memory chart on canvases and builds the tables from the embedded
// JSON. Text from the trace only ever reaches the page through textContent, never as markup.
// It reports on itself in the status element: "state" ("ok" or "error"), every error it caught
// (uncaught exceptions, rejected promises, console.error), and how many timeline events its last
// drawing held and their names, so a headless browser can check a report by dumping the DOM.
'use strict';

(function () {
  const statusElement = document.getElementById('galley-status');
  const status = {
    state: 'loading',
    errors: [],
    tracks: 0,
    spans: 0,
    flows: 0,
    events_drawn: 0,
    names_drawn: [],
    memory_points: 0,
    op_rows: 0,
    tuner_rows: 0,
  };
  function writeStatus() {
    statusElement.dataset.state = status.state;
    statusElement.textContent = JSON.stringify(status, null, 1);
  }
  function fail(message) {
    status.errors.push(String(message));
    status.state = 'error';
    writeStatus();
  }
  window.addEventListener('error', (event) => {
    fail((event.message || 'error') + ' at ' + (event.filename || '?') + ':' + (event.lineno || 0));
  });
  window.addEventListener('unhandledrejection', (event) => fail('unhandled rejection: ' + event.reason));
  const consoleError = console.error.bind(console);
  console.error = function (...args) {
    fail('console.error: ' + args.map(String).join(' '));
    consoleError(...args);
  };

  // ---- formatting ----
  function formatNs(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(2) + ' us';
    return Math.round(ns) + ' ns';
  }
  const formatUs = (us) => formatNs(us * 1e3);
  function formatBytes(bytes) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = bytes;
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit + 1 < units.length) {
      value /= 1024;
      unit += 1;
    }
    return (unit === 0 ? String(value) : value.toFixed(2)) + ' ' + units[unit];
  }
  const formatShare = (share) => (100 * share).toFixed(1) + '%';

  // An element with attributes and children; strings become text nodes, never markup.
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (name === 'class') node.className = value;
      else if (name === 'text') node.textContent = value;
      else node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return node;
  }

  // A table sorted by clicking its headers. columns: {key, label, numeric, format(row), mono}.
  function sortableTable(columns, rows, sortKey, descending) {
    const table = el('table');
    const head = el('tr');
    const body = el('tbody');
    table.append(el('thead', null, head), body);
    let key = sortKey;
    let down = descending;
    const headers = columns.map((column) => {
      const th = el('th', { class: 'sortable', scope: 'col', text: column.label });
      th.addEventListener('click', () => {
        down = key === column.key ? !down : !!column.numeric;
        key = column.key;
        fill();
      });
      head.append(th);
      return th;
    });
    function fill() {
      const sorted = rows.slice().sort((a, b) => {
        const x = a[key];
        const y = b[key];
        const order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
        return down ? -order : order;
      });
      body.replaceChildren(
        ...sorted.map((row) =>
          el(
            'tr',
            null,
            ...columns.map((column) => {
              const shown = column.format ? column.format(row) : row[column.key];
              const cls = column.numeric ? 'num' : column.mono ? 'mono' : '';
              return el('td', cls ? { class: cls } : null, shown instanceof Node ? shown : String(shown));
            }),
          ),
        ),
      );
      columns.forEach((column, i) => {
        if (column.key === key) headers[i].setAttribute('aria-sort', down ? 'descending' : 'ascending');
        else headers[i].removeAttribute('aria-sort');
      });
    }
    fill();
    return table;
  }

  // ---- colours ----
  function hash(text) {
    let h = 2166136261;
    for (let i = 0; i < text.length; i += 1) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }
  const colourCache = new Map();
  function spanColour(name, cat) {
    const cacheKey = cat + '\u0000' + name;
    let colour = colourCache.get(cacheKey);
    if (colour === undefined) {
      if (cat === 'tune') colour = 'hsl(220, 8%, 72%)';
      else if (cat === 'copy') colour = 'hsl(30, 85%, 62%)';
      else {
        const lightness = cat === 'op' ? 70 : cat === 'launch' ? 80 : 60;
        colour = 'hsl(' + (hash(name) % 360) + ', 55%, ' + lightness + '%)';
      }
      colourCache.set(cacheKey, colour);
    }
    return colour;
  }
  const memoryColours = ['#2f6fde', '#d6453d', '#2e9e5b', '#8c52d1', '#c98a12'];

  // ---- the timeline and the memory chart, sharing one time axis ----
  const LABEL_WIDTH = 180;
  const ROW_HEIGHT = 18;
  const PROCESS_HEIGHT = 20;
  const TRACK_GAP = 4;
  const AXIS_HEIGHT = 22;
  const MEMORY_HEIGHT = 150;

  function spanArgs(data, span) {
    return data.args[span[5]] || {};
  }

  function Timeline(data, frame, memoryFrame, rangeLabel, tooltip) {
    const end = Math.max(data.end_ns, 1);
    const full = { t0: -end * 0.01, t1: end * 1.01 };
    const view = { t0: full.t0, t1: full.t1 };
    const canvas = el('canvas', { role: 'img', tabindex: '0', 'aria-label': 'timeline of the traced run' });
    frame.append(canvas);
    const memoryCanvas = data.memory.length > 0 ? el('canvas', { role: 'img', 'aria-label': 'device memory' }) : null;
    if (memoryCanvas) memoryFrame.append(memoryCanvas);

    // Layout: a band per process, in it a block of rows per track, a row per nesting depth.
    const rows = []; // {track, depth, y, spans, maxDur}
    const bands = []; // {y, text}
    const labels = []; // {y, text}
    let y = AXIS_HEIGHT;
    let process = null;
    // Where each span is drawn, and the span at the other end of its flow (launch <-> execution).
    const spanRow = new Map(); // span -> row
    const partner = new Map(); // span -> span
    for (const [fromTrack, fromSpan, toTrack, toSpan] of data.flows || []) {
      const from = data.tracks[fromTrack] && data.tracks[fromTrack].spans[fromSpan];
      const to = data.tracks[toTrack] && data.tracks[toTrack].spans[toSpan];
      if (!from || !to) continue;
      partner.set(from, to);
      partner.set(to, from);
    }
    for (const track of data.tracks) {
      if (track.process !== process) {
        process = track.process;
        bands.push({ y, text: process });
        y += PROCESS_HEIGHT;
      }
      labels.push({ y, text: track.name });
      for (let depth = 0; depth < Math.max(track.depth, 1); depth += 1) {
        const spans = track.spans.filter((s) => s[2] === depth);
        let maxDur = 0;
        for (const s of spans) maxDur = Math.max(maxDur, s[1]);
        const row = { track, depth, y, spans, maxDur };
        for (const s of spans) spanRow.set(s, row);
        rows.push(row);
        y += ROW_HEIGHT;
      }
      y += TRACK_GAP;
    }
    const height = y;

    let width = 800;
    function resize() {
      width = Math.max(frame.clientWidth, LABEL_WIDTH + 200);
      const ratio = window.devicePixelRatio || 1;
      for (const [c, h] of [
        [canvas, height],
        [memoryCanvas, MEMORY_HEIGHT],
      ]) {
        if (!c) continue;
        c.width = Math.round(width * ratio);
        c.height = Math.round(h * ratio);
        c.style.height = h + 'px';
        c.getContext('2d').setTransform(ratio, 0, 0, ratio, 0, 0);
      }
    }
    const plotWidth = () => width - LABEL_WIDTH;
    const xOf = (t) => LABEL_WIDTH + ((t - view.t0) / (view.t1 - view.t0)) * plotWidth();
    const tOf = (x) => view.t0 + ((x - LABEL_WIDTH) / plotWidth()) * (view.t1 - view.t0);

    // First span of a row that may reach t: starts are sorted, no span is longer than maxDur.
    function firstFrom(row, t) {
      let lo = 0;
      let hi = row.spans.length;
      const from = t - row.maxDur;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (row.spans[mid][0] < from) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    }

    function niceStep(span, count) {
      const raw = span / count;
      const power = Math.pow(10, Math.floor(Math.log10(raw)));
      for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
      return 10 * power;
    }

    function drawAxis(ctx, h) {
      const step = niceStep(view.t1 - view.t0, Math.max(2, Math.floor(plotWidth() / 110)));
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
        const x = xOf(t);
        ctx.strokeStyle = '#eceff4';
        ctx.beginPath();
        ctx.moveTo(x + 0.5, AXIS_HEIGHT);
        ctx.lineTo(x + 0.5, h);
        ctx.stroke();
        ctx.fillStyle = '#5b6472';
        ctx.fillText(formatNs(t), x + 3, AXIS_HEIGHT / 2);
      }
    }

    function draw() {
      const ctx = canvas.getContext('2d');
      ctx.clearRect(0, 0, width, height);
      drawAxis(ctx, height);
      let drawn = 0;
      const names = new Set();
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_WIDTH, 0, plotWidth(), height);
      ctx.clip();
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      for (const row of rows) {
        let lastEnd = -Infinity;
        for (let i = firstFrom(row, view.t0); i < row.spans.length; i += 1) {
          const s = row.spans[i];
          if (s[0] > view.t1) break;
          if (s[0] + s[1] < view.t0) continue;
          drawn += 1;
          const name = data.strings[s[3]];
          names.add(name);
          const x0 = xOf(s[0]);
          const x1 = Math.max(xOf(s[0] + s[1]), x0 + 1);
          // Spans narrower than a pixel that land on one already drawn add nothing visible.
          if (x1 <= lastEnd) continue;
          const from = Math.max(x0, lastEnd);
          ctx.fillStyle = spanColour(name, data.strings[s[4]]);
          ctx.fillRect(from, row.y + 1, x1 - from, ROW_HEIGHT - 2);
          lastEnd = x1;
          if (x1 - x0 > 36) {
            ctx.fillStyle = '#1d2330';
            const left = Math.max(x0, LABEL_WIDTH) + 3;
            ctx.save();
            ctx.beginPath();
            ctx.rect(left, row.y, x1 - left - 2, ROW_HEIGHT);
            ctx.clip();
            ctx.fillText(name, left, row.y + ROW_HEIGHT / 2);
            ctx.restore();
          }
        }
      }
      ctx.restore();
      // Labels last, over anything drawn under them.
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, AXIS_HEIGHT, LABEL_WIDTH, height - AXIS_HEIGHT);
      ctx.strokeStyle = '#d8dde6';
      ctx.beginPath();
      ctx.moveTo(LABEL_WIDTH - 0.5, 0);
      ctx.lineTo(LABEL_WIDTH - 0.5, height);
      ctx.stroke();
      for (const band of bands) {
        ctx.fillStyle = '#eef1f6';
        ctx.fillRect(0, band.y, width, PROCESS_HEIGHT);
        ctx.fillStyle = '#1d2330';
        ctx.font = '600 12px system-ui, sans-serif';
        ctx.fillText(band.text, 6, band.y + PROCESS_HEIGHT / 2);
      }
      ctx.font = '12px system-ui, sans-serif';
      ctx.fillStyle = '#1d2330';
      for (const label of labels) ctx.fillText(label.text, 14, label.y + ROW_HEIGHT / 2, LABEL_WIDTH - 20);
      drawFlow(ctx);
      drawMemory();
      rangeLabel.textContent = formatNs(view.t0) + ' .. ' + formatNs(view.t1) + ' (' + formatNs(view.t1 - view.t0) + ')';
      status.events_drawn = drawn;
      status.names_drawn = Array.from(names).sort().slice(0, 500);
      if (status.state !== 'loading') writeStatus();
    }

    // The hovered span's flow: a line from the launch (its middle, where the trace's flow starts)
    // to the start of the work it ran.
    let hovered = null;
    function drawFlow(ctx) {
      const other = hovered && partner.get(hovered);
      if (!other) return;
      const launch = spanRow.get(hovered).track.host ? hovered : other;
      const work = launch === hovered ? other : hovered;
      const a = spanRow.get(launch);
      const b = spanRow.get(work);
      const x0 = Math.max(xOf(launch[0] + launch[1] / 2), LABEL_WIDTH);
      const x1 = Math.max(xOf(work[0]), LABEL_WIDTH);
      ctx.save();
      ctx.strokeStyle = '#1d2330';
      ctx.fillStyle = '#1d2330';
      ctx.lineWidth = 1.5;
      for (const [s, row] of [
        [launch, a],
        [work, b],
      ]) {
        const left = Math.max(xOf(s[0]), LABEL_WIDTH);
        ctx.strokeRect(left, row.y + 1, Math.max(xOf(s[0] + s[1]) - left, 1), ROW_HEIGHT - 2);
      }
      const y0 = a.y + ROW_HEIGHT / 2;
      const y1 = b.y + ROW_HEIGHT / 2;
      ctx.beginPath();
      ctx.moveTo(x0, y0);
      ctx.bezierCurveTo(x0, (y0 + y1) / 2, x1, (y0 + y1) / 2, x1, y1);
      ctx.stroke();
      ctx.beginPath();
      ctx.arc(x1, y1, 3, 0, 2 * Math.PI);
      ctx.fill();
      ctx.restore();
    }

    let memoryMax = 1;
    for (const series of data.memory) for (const p of series.points) memoryMax = Math.max(memoryMax, p[1], p[2]);

    // First point of a series at or before t (the value in force at t), or -1.
    function pointAt(points, t) {
      let lo = 0;
      let hi = points.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (points[mid][0] <= t) lo = mid + 1;
        else hi = mid;
      }
      return lo - 1;
    }

    function drawMemory() {
      if (!memoryCanvas) return;
      const ctx = memoryCanvas.getContext('2d');
      const top = 24;
      const bottom = MEMORY_HEIGHT - 6;
      const yOf = (bytes) => bottom - (bytes / memoryMax) * (bottom - top);
      ctx.clearRect(0, 0, width, MEMORY_HEIGHT);
      drawAxis(ctx, MEMORY_HEIGHT);
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_WIDTH, 0, plotWidth(), MEMORY_HEIGHT);
      ctx.clip();
      data.memory.forEach((series, index) => {
        const colour = memoryColours[index % memoryColours.length];
        for (const [column, dash] of [
          [2, [4, 3]],
          [1, []],
        ]) {
          ctx.strokeStyle = colour;
          ctx.setLineDash(dash);
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          const first = Math.max(0, pointAt(series.points, view.t0));
          let previousY = null;
          for (let i = first; i < series.points.length; i += 1) {
            const p = series.points[i];
            const x = Math.max(xOf(p[0]), LABEL_WIDTH - 1);
            const yy = yOf(p[column]);
            if (previousY === null) ctx.moveTo(x, yy);
            else {
              ctx.lineTo(x, previousY);
              ctx.lineTo(x, yy);
            }
            previousY = yy;
            if (p[0] > view.t1) break;
          }
          if (previousY !== null) ctx.lineTo(width, previousY);
          ctx.stroke();
        }
      });
      ctx.restore();
      ctx.setLineDash([]);
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, 0, LABEL_WIDTH, MEMORY_HEIGHT);
      ctx.fillStyle = '#1d2330';
      ctx.font = '600 12px system-ui, sans-serif';
      ctx.fillText('device memory', 6, 12);
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText('top of the axis: ' + formatBytes(memoryMax), 6, 28);
      data.memory.forEach((series, index) => {
        ctx.fillStyle = memoryColours[index % memoryColours.length];
        ctx.fillText(series.device + ': allocated (solid),', 6, 46 + index * 30);
        ctx.fillText('reserved (dashed)', 14, 60 + index * 30);
      });
    }

    // ---- interaction ----
    function rowAt(yy) {
      for (const row of rows) if (yy >= row.y && yy < row.y + ROW_HEIGHT) return row;
      return null;
    }
    // The span under x on a row: one containing its time, else the nearest within 3 pixels.
    function spanAt(row, x) {
      const t = tOf(x);
      const slack = (3 * (view.t1 - view.t0)) / plotWidth();
      let best = null;
      let bestDistance = Infinity;
      for (let i = firstFrom(row, t - slack); i < row.spans.length; i += 1) {
        const s = row.spans[i];
        if (s[0] > t + slack) break;
        const distance = t < s[0] ? s[0] - t : t > s[0] + s[1] ? t - s[0] - s[1] : 0;
        if (distance <= slack && (distance < bestDistance || (distance === bestDistance && s[1] < best[1]))) {
          best = s;
          bestDistance = distance;
        }
      }
      return best;
    }

    function showTooltip(event, title, fields) {
      const list = el('dl');
      for (const [name, value] of fields) {
        if (value === undefined || value === null || value === '') continue;
        list.append(el('dt', { text: name }), el('dd', { text: String(value) }));
      }
      tooltip.replaceChildren(el('div', { class: 'name', text: title }), list);
      tooltip.hidden = false;
      const margin = 14;
      const box = tooltip.getBoundingClientRect();
      let left = event.clientX + margin;
      let topY = event.clientY + margin;
      if (left + box.width > window.innerWidth) left = Math.max(0, event.clientX - box.width - margin);
      if (topY + box.height > window.innerHeight) topY = Math.max(0, event.clientY - box.height - margin);
      tooltip.style.left = left + 'px';
      tooltip.style.top = topY + 'px';
    }

    function spanFields(s) {
      const args = spanArgs(data, s);
      const fields = [
        ['kind', data.strings[s[4]]],
        ['duration', formatNs(s[1])],
        ['start', formatNs(s[0])],
        ['op', args.op],
        ['solver', args.solver],
        ['config', args.config],
        ['problem key', args.key],
        ['device', args.device],
        ['stream', args.stream],
        ['bytes', args.bytes !== undefined ? formatBytes(args.bytes) : undefined],
        ['source', args.source],
      ];
      if (args.hit !== undefined) fields.push(['find-db hit', args.hit ? 'yes' : 'no']);
      const other = partner.get(s);
      if (other) {
        const otherRow = spanRow.get(other);
        const where = otherRow.track.process + ', ' + otherRow.track.name;
        if (spanRow.get(s).track.host) fields.push(['ran', 'on ' + where + ', ' + formatNs(other[0] - s[0]) + ' after the launch began']);
        else fields.push(['launched', 'from ' + where + ', ' + formatNs(s[0] - other[0]) + ' before it ran']);
      }
      return fields;
    }

    function localPoint(event, target) {
      const box = target.getBoundingClientRect();
      return { x: event.clientX - box.left, y: event.clientY - box.top };
    }

    let drag = null;
    canvas.addEventListener('mousedown', (event) => {
      drag = { x: event.clientX, t0: view.t0, t1: view.t1 };
      canvas.classList.add('dragging');
    });
    window.addEventListener('mouseup', () => {
      drag = null;
      canvas.classList.remove('dragging');
    });
    window.addEventListener('mousemove', (event) => {
      if (!drag) return;
      const dt = ((event.clientX - drag.x) / plotWidth()) * (drag.t1 - drag.t0);
      setView(drag.t0 - dt, drag.t1 - dt);
    });
    canvas.addEventListener('mousemove', (event) => {
      if (drag) {
        tooltip.hidden = true;
        return;
      }
      const p = localPoint(event, canvas);
      const row = p.x > LABEL_WIDTH ? rowAt(p.y) : null;
      const s = row ? spanAt(row, p.x) : null;
      if (s !== hovered) {
        const redraw = partner.has(s) || partner.has(hovered);
        hovered = s;
        if (redraw) draw();
      }
      if (!s) {
        tooltip.hidden = true;
        return;
      }
      showTooltip(event, data.strings[s[3]], spanFields(s));
    });
    canvas.addEventListener('mouseleave', () => {
      tooltip.hidden = true;
      if (partner.has(hovered)) {
        hovered = null;
        draw();
      } else hovered = null;
    });
    canvas.addEventListener('dblclick', (event) => {
      const p = localPoint(event, canvas);
      const row = rowAt(p.y);
      const s = row ? spanAt(row, p.x) : null;
      if (s) setView(s[0] - s[1] * 0.1, s[0] + s[1] * 1.1);
    });
    function zoomAround(t, factor) {
      setView(t - (t - view.t0) * factor, t + (view.t1 - t) * factor);
    }
    function onWheel(event) {
      event.preventDefault();
      const target = event.currentTarget;
      const p = localPoint(event, target);
      if (event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        const delta = event.shiftKey ? event.deltaY : event.deltaX;
        const dt = (delta / plotWidth()) * (view.t1 - view.t0);
        setView(view.t0 + dt, view.t1 + dt);
      } else {
        zoomAround(tOf(Math.max(p.x, LABEL_WIDTH)), Math.exp(event.deltaY * 0.002));
      }
    }
    canvas.addEventListener('wheel', onWheel, { passive: false });
    // W/S zoom in and out, A/D pan, as in chrome://tracing and Perfetto.
    canvas.addEventListener('keydown', (event) => {
      const step = (view.t1 - view.t0) * 0.2;
      const key = event.key.toLowerCase();
      if (key === 'w') zoomAround((view.t0 + view.t1) / 2, 0.7);
      else if (key === 's') zoomAround((view.t0 + view.t1) / 2, 1 / 0.7);
      else if (key === 'a') setView(view.t0 - step, view.t1 - step);
      else if (key === 'd') setView(view.t0 + step, view.t1 + step);
      else return;
      event.preventDefault();
    });
    if (memoryCanvas) {
      memoryCanvas.addEventListener('wheel', onWheel, { passive: false });
      memoryCanvas.addEventListener('mousemove', (event) => {
        const p = localPoint(event, memoryCanvas);
        if (p.x <= LABEL_WIDTH) {
          tooltip.hidden = true;
          return;
        }
        const t = tOf(p.x);
        const fields = [['time', formatNs(t)]];
        for (const series of data.memory) {
          const i = pointAt(series.points, t);
          const point = i >= 0 ? series.points[i] : [t, 0, 0];
          fields.push([series.device + ' allocated', formatBytes(point[1])]);
          fields.push([series.device + ' reserved', formatBytes(point[2])]);
        }
        showTooltip(event, 'device memory', fields);
      });
      memoryCanvas.addEventListener('mouseleave', () => {
        tooltip.hidden = true;
      });
    }

    function setView(t0, t1) {
      const minimum = 50;
      const span = Math.max(t1 - t0, minimum);
      const fullSpan = full.t1 - full.t0;
      if (span >= fullSpan) {
        view.t0 = full.t0;
        view.t1 = full.t1;
      } else {
        view.t0 = Math.min(Math.max(t0, full.t0), full.t1 - span);
        view.t1 = view.t0 + span;
      }
      draw();
    }
    const center = () => (view.t0 + view.t1) / 2;

    // Drives the timeline as a person would, with synthetic events on the canvas, and says what
    // each step did; run only when the page is opened with #selftest (the browser test does).
    function selfTest() {
      const result = {};
      // The longest span with a flow (else the longest): wide enough to point at.
      const longest = (spans) => spans.reduce((a, b) => (a === null || b[1] > a[1] ? b : a), null);
      const all = rows.flatMap((r) => r.spans);
      const s = longest(all.filter((x) => partner.has(x))) || longest(all);
      if (!s) return { error: 'no span to test with' };
      const row = spanRow.get(s);
      const box = canvas.getBoundingClientRect();
      const at = () => ({
        clientX: box.left + (Math.max(xOf(s[0]), LABEL_WIDTH) + Math.min(xOf(s[0] + s[1]), width)) / 2,
        clientY: box.top + row.y + ROW_HEIGHT / 2,
        bubbles: true,
      });
      canvas.dispatchEvent(new MouseEvent('mousemove', at()));
      result.hover = !tooltip.hidden && tooltip.textContent.includes(data.strings[s[3]]);
      result.flow_drawn = partner.has(s) ? hovered === s : null;
      const before = view.t1 - view.t0;
      canvas.dispatchEvent(new WheelEvent('wheel', { ...at(), deltaY: -300, cancelable: true }));
      result.wheel_zoom = view.t1 - view.t0 < before;
      const t0 = view.t0;
      canvas.dispatchEvent(new KeyboardEvent('keydown', { key: 'd', bubbles: true }));
      result.key_pan = view.t0 !== t0 || view.t1 >= full.t1;
      // The pan may have moved the span out of view; double-click it where it is seen whole.
      setView(full.t0, full.t1);
      canvas.dispatchEvent(new MouseEvent('dblclick', at()));
      result.double_click_zoom = Math.abs(view.t1 - view.t0 - Math.max(s[1] * 1.2, 50)) <= 1 || view.t1 - view.t0 >= full.t1 - full.t0;
      canvas.dispatchEvent(new MouseEvent('mousedown', { clientX: box.left + LABEL_WIDTH + 100, clientY: box.top + row.y, bubbles: true }));
      const dragged = view.t0;
      window.dispatchEvent(new MouseEvent('mousemove', { clientX: box.left + LABEL_WIDTH + 50, clientY: box.top + row.y }));
      window.dispatchEvent(new MouseEvent('mouseup', {}));
      result.drag_pan = view.t0 !== dragged || view.t1 >= full.t1;
      canvas.dispatchEvent(new MouseEvent('mouseleave', {}));
      result.leave_hides_tooltip = tooltip.hidden;
      setView(full.t0, full.t1);
      result.fit = view.t0 === full.t0 && view.t1 === full.t1;
      return result;
    }

    resize();
    window.addEventListener('resize', () => {
      resize();
      draw();
    });
    draw();
    return {
      zoomIn: () => zoomAround(center(), 0.5),
      zoomOut: () => zoomAround(center(), 2),
      fit: () => setView(full.t0, full.t1),
      selfTest,
    };
  }

  // ---- sections ----
  function timelineSection(data, main) {
    const section = el('section', { id: 'timeline' }, el('h2', { text: 'Timeline' }));
    main.append(section);
    const spans = data.tracks.reduce((n, t) => n + t.spans.length, 0);
    status.tracks = data.tracks.length;
    status.flows = (data.flows || []).length;
    status.spans = spans;
    if (spans === 0) {
      section.append(el('p', { class: 'note', text: 'The trace holds no spans.' }));
      return;
    }
    const zoomIn = el('button', { type: 'button', title: 'zoom in', text: '+' });
    const zoomOut = el('button', { type: 'button', title: 'zoom out', text: '\u2212' });
    const fit = el('button', { type: 'button', title: 'show the whole run', text: 'fit' });
    const range = el('span', { class: 'range' });
    section.append(
      el(
        'div',
        { class: 'controls' },
        zoomIn,
        zoomOut,
        fit,
        range,
        el('span', {
          class: 'note',
          text: 'wheel or W/S: zoom, drag, shift+wheel or A/D: pan, double-click a span: zoom to it; hover for details and the launch-to-work flow',
        }),
      ),
    );
    const frame = el('div', { class: 'timeline-frame' });
    const memoryFrame = el('div', { class: 'timeline-frame' });
    section.append(frame);
    if (data.memory.length > 0) section.append(memoryFrame);
    const tooltip = el('div', { class: 'tooltip', role: 'tooltip' });
    tooltip.hidden = true;
    document.body.append(tooltip);
    const timeline = Timeline(data, frame, memoryFrame, range, tooltip);
    zoomIn.addEventListener('click', timeline.zoomIn);
    zoomOut.addEventListener('click', timeline.zoomOut);
    fit.addEventListener('click', timeline.fit);
    return timeline;
  }

  function opsSection(data, main) {
    const section = el('section', { id: 'ops' }, el('h2', { text: 'Ops and solvers (device time)' }));
    main.append(section);
    status.op_rows = data.ops.length;
    if (data.ops.length === 0) {
      section.append(el('p', { class: 'note', text: 'No device work was traced.' }));
      return;
    }
    section.append(
      el('p', {
        class: 'note',
        text:
          'Total device time ' +
          formatUs(data.device_us) +
          '. "-" as the op: work launched outside an op (copies). Click a header to sort.',
      }),
      sortableTable(
        [
          { key: 'op', label: 'op', mono: true },
          { key: 'solver', label: 'solver', mono: true },
          { key: 'calls', label: 'calls', numeric: true },
          { key: 'device_us', label: 'device total', numeric: true, format: (r) => formatUs(r.device_us) },
          { key: 'mean_us', label: 'mean', numeric: true, format: (r) => formatUs(r.mean_us) },
          {
            key: 'share',
            label: 'share',
            numeric: true,
            format: (r) =>
              el(
                'span',
                null,
                el('span', { class: 'bar', style: 'width:' + (60 * r.share).toFixed(1) + 'px' }),
                formatShare(r.share),
              ),
          },
          { key: 'host_us', label: 'host API total', numeric: true, format: (r) => formatUs(r.host_us) },
        ],
        data.ops,
        'device_us',
        true,
      ),
    );
  }

  function streamsSection(data, main) {
    const section = el(
      'section',
      { id: 'streams' },
      el('h2', { text: 'Streams: T_total = sum(T_kernel) + sum(T_gap)' }),
    );
    main.append(section);
    if (data.streams.length === 0) {
      section.append(el('p', { class: 'note', text: 'No stream ran device work.' }));
      return;
    }
    const rows = data.streams.map((s) => ({
      ...s,
      where: s.device + ' stream ' + s.stream,
      gaps: s.largest_gaps.map((g) => formatUs(g.dur_us) + ' at ' + formatUs(g.start_us) + ' (host: ' + g.host + ')'),
    }));
    section.append(
      sortableTable(
        [
          { key: 'where', label: 'stream', mono: true },
          { key: 'spans', label: 'spans', numeric: true },
          { key: 'total_us', label: 'T_total', numeric: true, format: (r) => formatUs(r.total_us) },
          { key: 'kernel_us', label: 'sum(T_kernel)', numeric: true, format: (r) => formatUs(r.kernel_us) },
          { key: 'gap_us', label: 'sum(T_gap)', numeric: true, format: (r) => formatUs(r.gap_us) },
          { key: 'gap_share', label: 'gap share', numeric: true, format: (r) => formatShare(r.gap_share) },
          {
            key: 'gaps',
            label: 'largest gaps',
            format: (r) => el('span', null, ...r.gaps.flatMap((g, i) => (i === 0 ? [g] : [el('br'), g]))),
          },
          { key: 'hint', label: 'hint' },
        ],
        rows,
        'total_us',
        true,
      ),
    );
  }

  function memorySection(data, main) {
    const section = el('section', { id: 'memory' }, el('h2', { text: 'Device memory (caching allocator)' }));
    main.append(section);
    status.memory_points = data.memory.reduce((n, s) => n + s.points.length, 0);
    if (data.memory.length === 0) {
      section.append(
        el('p', { class: 'note', text: 'No allocator history in this trace: no caching-allocator call was traced.' }),
      );
      return;
    }
    const rows = data.memory.map((series) => {
      let peakAllocated = 0;
      let peakReserved = 0;
      for (const p of series.points) {
        peakAllocated = Math.max(peakAllocated, p[1]);
        peakReserved = Math.max(peakReserved, p[2]);
      }
      const last = series.points[series.points.length - 1];
      return {
        device: series.device,
        calls: series.points.length,
        peak_allocated: peakAllocated,
        peak_reserved: peakReserved,
        final_allocated: last[1],
        final_reserved: last[2],
      };
    });
    section.append(
      el('p', { class: 'note', text: 'Over time: the chart under the timeline (same time axis).' }),
      sortableTable(
        [
          { key: 'device', label: 'device', mono: true },
          { key: 'calls', label: 'allocator calls', numeric: true },
          { key: 'peak_allocated', label: 'peak allocated', numeric: true, format: (r) => formatBytes(r.peak_allocated) },
          { key: 'peak_reserved', label: 'peak reserved', numeric: true, format: (r) => formatBytes(r.peak_reserved) },
          { key: 'final_allocated', label: 'allocated at end', numeric: true, format: (r) => formatBytes(r.final_allocated) },
          { key: 'final_reserved', label: 'reserved at end', numeric: true, format: (r) => formatBytes(r.final_reserved) },
        ],
        rows,
        'device',
        false,
      ),
    );
  }

  function tunerSection(data, main) {
    const tuner = data.tuner;
    const section = el('section', { id: 'tuner' }, el('h2', { text: 'Tuner and find-db' }));
    main.append(section);
    status.tuner_rows = tuner.decisions.length;
    if (tuner.picks === 0) {
      section.append(el('p', { class: 'note', text: 'No tuner pick was traced.' }));
      return;
    }
    const card = (value, label) =>
      el('div', { class: 'card' }, el('div', { class: 'value', text: String(value) }), el('div', { class: 'label', text: label }));
    section.append(
      el(
        'div',
        { class: 'cards' },
        card(tuner.picks, 'picks'),
        card(tuner.hits, 'hits (a stored result used)'),
        card(tuner.misses, 'misses (tuned or list order)'),
        card(formatUs(tuner.tuning_us), 'spent tuning'),
        ...Object.entries(tuner.by_source).map(([source, count]) => card(count, 'from ' + source)),
      ),
      sortableTable(
        [
          { key: 'device', label: 'device', mono: true },
          { key: 'key', label: 'problem key', mono: true },
          { key: 'solver', label: 'solver', mono: true },
          { key: 'config', label: 'config', mono: true },
          { key: 'source', label: 'source' },
          { key: 'hit', label: 'hit', format: (r) => (r.hit ? 'yes' : 'no') },
          { key: 'calls', label: 'picks', numeric: true },
          { key: 'total_us', label: 'time picking', numeric: true, format: (r) => formatUs(r.total_us) },
        ],
        tuner.decisions,
        'total_us',
        true,
      ),
    );
  }

  function render(data) {
    if (data.format !== 'galley-html-report' || data.version !== 1) {
      throw new Error('unknown report data format ' + data.format + ' version ' + data.version);
    }
    const main = document.getElementById('report');
    main.replaceChildren();
    if (data.dropped > 0) {
      main.append(
        el('p', {
          class: 'warning',
          text: 'The tracer was full and dropped ' + data.dropped + ' records: the trace and these sums are incomplete.',
        }),
      );
    }
    const timeline = timelineSection(data, main);
    opsSection(data, main);
    streamsSection(data, main);
    memorySection(data, main);
    tunerSection(data, main);
    if (window.location.hash === '#selftest') status.selftest = selfTest(timeline);
  }

  function selfTest(timeline) {
    const result = timeline ? timeline.selfTest() : {};
    // A header click sorts its table by that column, a second click the other way.
    const header = document.querySelector('#ops th.sortable');
    if (header) {
      header.click();
      const first = header.getAttribute('aria-sort');
      header.click();
      result.sort = first !== null && header.getAttribute('aria-sort') !== first;
      // Back to the page's first order, largest device time first, for the screenshot.
      const deviceTotal = document.querySelectorAll('#ops th.sortable')[3];
      if (deviceTotal) deviceTotal.click();
    }
    return result;
  }

  try {
    render(JSON.parse(document.getElementById('galley-data').textContent));
    if (status.state === 'loading') status.state = 'ok';
  } catch (error) {
    fail(error && error.stack ? error.stack : error);
  }
  writeStatus();
})();
