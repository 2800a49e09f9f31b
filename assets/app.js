// pChronicle web explorer: plain ES module, no dependencies.
//
// Every piece of trajectory content is put into the page as text
// (textContent / text nodes), never parsed as HTML. Highlighting splits
// text into text nodes and <mark> elements; it never changes which items
// the server returned.

const API = '/api/v1';
const PAGE = 200;

// ------------------------------------------------------------ helpers

/** Create an element; children may be strings (text nodes) or nodes. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'style') el.style.cssText = v; // CSSOM: allowed by the CSP, unlike a style attribute
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

const view = () => document.getElementById('view');

function setStatus(msg) { document.getElementById('status').textContent = msg; }

class ApiError extends Error {
  constructor(body, status) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.code = e.code || `HTTP-${status}`;
    this.status = status;
    this.body = e;
  }
}

async function api(path, params) {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
  }
  const started = performance.now();
  const r = await fetch(url, { headers: { Accept: 'application/json' } });
  let body = null;
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) throw new ApiError(body, r.status);
  const ms = Math.round(performance.now() - started);
  setStatus(`${url.pathname} · ${ms} ms · request ${r.headers.get('x-request-id') || ''}` +
    (body && body.snapshot_id ? ` · snapshot ${body.snapshot_id}` : ''));
  return body;
}

function errorBox(e) {
  return h('p', { class: 'error', role: 'alert' },
    e instanceof ApiError ? `${e.code}: ${e.message}` : String(e));
}

const fmtNum = (v) => (v === null || v === undefined) ? '' :
  (typeof v === 'number' ? (Number.isInteger(v) ? v.toLocaleString('en-US') : v.toFixed(4)) : String(v));
const fmtBytes = (n) => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n || 0; let u = 0;
  while (v >= 1024 && u + 1 < units.length) { v /= 1024; u += 1; }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
};
// The server's statistics of one request, as one line under a result (the
// fields of `pchronicle --stats`).
const statsLine = (s) => s ? h('p', { class: 'muted', 'data-testid': 'stats' },
  `${fmtNum(s.rows_scanned)} rows scanned · ${fmtBytes(s.bytes_read_local + s.bytes_read_s3)} read` +
  `${s.s3_requests ? ` in ${fmtNum(s.s3_requests)} S3 requests` : ''} · ${Math.round(s.wall_ms)} ms` +
  `${s.peak_rss_bytes ? ` · peak memory ${fmtBytes(s.peak_rss_bytes)}` : ''}` +
  `${s.overlapped ? ' · (counts include other requests running meanwhile)' : ''}`) : '';

// `.` and `..` would be collapsed by URL parsing: send them escaped.
function encodePath(s) { return (s === '.' || s === '..') ? s.replace(/\./g, '%2E') : encodeURIComponent(s); }

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  const params = new URLSearchParams(qs || '');
  const parts = path.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch (_) { return p; } });
  return { parts, params };
}

function hashFor(parts, params) {
  const p = '#/' + parts.map(encodeURIComponent).join('/');
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '')).toString() : '';
  return q ? `${p}?${q}` : p;
}

/** Text with every occurrence of the terms (case-insensitive) in <mark>. */
function highlighted(text, terms) {
  const frag = document.createDocumentFragment();
  if (!terms || !terms.length || !text) { frag.append(document.createTextNode(text || '')); return frag; }
  const lower = text.toLowerCase();
  const ranges = [];
  for (const t of terms) {
    const needle = t.toLowerCase();
    if (!needle) continue;
    let from = 0;
    for (;;) {
      const at = lower.indexOf(needle, from);
      if (at < 0) break;
      ranges.push([at, at + needle.length]);
      from = at + needle.length;
    }
  }
  ranges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let pos = 0;
  for (const [s, e] of ranges) {
    if (s < pos) continue;
    if (s > pos) frag.append(document.createTextNode(text.slice(pos, s)));
    frag.append(h('mark', {}, text.slice(s, e)));
    pos = e;
  }
  if (pos < text.length) frag.append(document.createTextNode(text.slice(pos)));
  return frag;
}

function jsonText(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (_) { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// ------------------------------------------------------------ terminal output

// Tool output is shown as a terminal showed it: SGR colours become classes,
// other control sequences (cursor moves, titles, hyperlinks) are dropped,
// carriage returns and backspaces overwrite the line, CRLF is a newline. The
// text stays text: every segment is a text node.

const SGR_COLOURS = 8;

/** Parse terminal text into lines of [text, style] segments. */
function terminalLines(text) {
  const lines = [];
  let cells = [];
  let cursor = 0;
  let style = { fg: null, bg: null, bold: false, dim: false, underline: false };
  const key = (st) => `${st.fg ?? ''}|${st.bg ?? ''}|${st.bold ? 'b' : ''}${st.dim ? 'd' : ''}${st.underline ? 'u' : ''}`;
  const put = (ch) => {
    const cell = { ch, style };
    if (cursor < cells.length) cells[cursor] = cell; else cells.push(cell);
    cursor += 1;
  };
  const endLine = () => {
    const segs = [];
    for (const c of cells) {
      const last = segs[segs.length - 1];
      if (last && key(last[1]) === key(c.style)) last[0] += c.ch; else segs.push([c.ch, c.style]);
    }
    lines.push(segs);
    cells = [];
    cursor = 0;
  };
  const sgr = (params) => {
    const ps = params === '' ? [0] : params.split(';').map((x) => Number(x || 0));
    const st = { ...style };
    for (let i = 0; i < ps.length; i++) {
      const p = ps[i];
      if (p === 0) Object.assign(st, { fg: null, bg: null, bold: false, dim: false, underline: false });
      else if (p === 1) st.bold = true;
      else if (p === 2) st.dim = true;
      else if (p === 4) st.underline = true;
      else if (p === 22) { st.bold = false; st.dim = false; }
      else if (p === 24) st.underline = false;
      else if (p >= 30 && p <= 37) st.fg = p - 30;
      else if (p >= 90 && p <= 97) st.fg = p - 90 + SGR_COLOURS;
      else if (p === 39) st.fg = null;
      else if (p >= 40 && p <= 47) st.bg = p - 40;
      else if (p >= 100 && p <= 107) st.bg = p - 100 + SGR_COLOURS;
      else if (p === 49) st.bg = null;
      else if (p === 38 || p === 48) {
        // 256-colour and true-colour forms: the first 16 map to the palette.
        if (ps[i + 1] === 5) { const c = ps[i + 2]; if (c < 16) { if (p === 38) st.fg = c; else st.bg = c; } i += 2; }
        else if (ps[i + 1] === 2) i += 4;
      }
    }
    style = st;
  };
  const chars = Array.from(text || '');
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    const code = c.codePointAt(0);
    if (c === '\n') { endLine(); continue; }
    if (c === '\r') { cursor = 0; continue; }
    if (c === '\b') { cursor = Math.max(0, cursor - 1); continue; }
    if (c === '\t') { put(c); continue; }
    if (c === '\u001b' || c === '\u009b') {
      let j = i + 1;
      const intro = c === '\u009b' ? '[' : chars[j];
      if (c === '\u001b') j += 1;
      if (intro === '[') {
        let params = '';
        while (j < chars.length && /[0-?]/.test(chars[j])) params += chars[j++];
        while (j < chars.length && /[ -/]/.test(chars[j])) j++;
        const final = j < chars.length && /[@-~]/.test(chars[j]) ? chars[j] : '';
        if (final) j++;
        if (final === 'm') sgr(params);
        i = j - 1;
      } else if (intro === ']' || intro === 'P' || intro === 'X' || intro === '^' || intro === '_') {
        while (j < chars.length && chars[j] !== '\u0007' && chars[j] !== '\n' && chars[j] !== '\u009c' && chars[j] !== '\u001b') j++;
        if (chars[j] === '\u001b') j += chars[j + 1] === '\\' ? 2 : 1;
        else if (chars[j] === '\u0007' || chars[j] === '\u009c') j++;
        i = j - 1;
      } else if (intro !== undefined && intro !== '\n') {
        while (j - 1 < chars.length && /[ -/]/.test(chars[j - 1])) j++;
        i = j - 1;
      } else {
        i = j - 2;
      }
      continue;
    }
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) continue;
    put(c);
  }
  if (cells.length || !lines.length) endLine();
  // A trailing newline does not make an empty last line.
  if (lines.length > 1 && !lines[lines.length - 1].length && (text || '').endsWith('\n')) lines.pop();
  return lines;
}

function lineNode(segs, terms) {
  const line = h('span', { class: 'line' });
  for (const [t, st] of segs) {
    const cls = [st.fg != null ? `fg${st.fg}` : '', st.bg != null ? `bg${st.bg}` : '', st.bold ? 'b' : '', st.dim ? 'dim' : '', st.underline ? 'u' : ''].filter(Boolean).join(' ');
    line.append(cls ? h('span', { class: cls }, highlighted(t, terms)) : highlighted(t, terms));
  }
  line.append('\n');
  return line;
}

const COLLAPSE_LINES = 30;
const HEAD_LINES = 12;
const TAIL_LINES = 8;

/**
 * A block of tool output. `entry` is an output entry of the API
 * ({text, tail?, cut, lines}); `full` fetches the whole text when the page
 * carried only its head and tail. Long output shows its first and last lines
 * with a button to show all of it.
 */
function terminalBlock(entry, terms, full) {
  const pre = h('pre', { class: 'term', 'data-lines': entry.lines });
  const render = (text, expanded) => {
    clear(pre);
    const lines = terminalLines(text);
    if (expanded || lines.length <= COLLAPSE_LINES) {
      for (const l of lines) pre.append(lineNode(l, terms));
      return;
    }
    for (const l of lines.slice(0, HEAD_LINES)) pre.append(lineNode(l, terms));
    pre.append(showAll());
    for (const l of lines.slice(-TAIL_LINES)) pre.append(lineNode(l, terms));
  };
  const showAll = () => h('button', {
    class: 'show-all', onclick: async (e) => {
      e.target.disabled = true;
      try { render(entry.cut ? await full() : entry.text, true); } catch (err) { pre.append(errorBox(err)); }
    },
  }, `show all ${fmtNum(entry.lines)} lines`);
  if (entry.cut) {
    clear(pre);
    const head = terminalLines(entry.text);
    const tail = terminalLines(entry.tail || '');
    for (const l of head.slice(0, HEAD_LINES)) pre.append(lineNode(l, terms));
    pre.append(showAll());
    for (const l of tail.slice(-TAIL_LINES)) pre.append(lineNode(l, terms));
  } else {
    render(entry.text, false);
  }
  return pre;
}

/** Images a result or message refers to: shown when the Dataset has the file. */
function mediaNodes(ctx, media) {
  return (media || []).map((m) => {
    const local = m.kind === 'image' && m.path && !/^[a-z][a-z0-9+.-]*:/i.test(m.path);
    if (!local) return h('div', { class: 'media-placeholder muted' }, m.label);
    const src = `${API}/datasets/${encodePath(ctx.ds)}/media?` + new URLSearchParams({ source: ctx.source, path: m.path });
    const holder = h('figure', { class: 'media' });
    const img = h('img', { src, alt: m.label, loading: 'lazy' });
    img.addEventListener('error', () => { clear(holder).append(h('div', { class: 'media-placeholder muted', 'data-broken': '1' }, m.label)); });
    holder.append(img, h('figcaption', { class: 'muted' }, m.path));
    return holder;
  });
}

/** The output entries of a call or a step, each as a terminal block. */
function outputNodes(ctx, entries, terms, full) {
  return entries.map((e, i) => h('div', { class: 'output' },
    e.text || e.tail ? terminalBlock(e, terms, async () => (await full())[i].text) : null,
    mediaNodes(ctx, e.media)));
}

// ------------------------------------------------------------ state

const state = { catalog: null, dataset: null };

async function loadCatalog() {
  state.catalog = await api('/catalog');
  const sel = document.getElementById('dataset');
  clear(sel);
  for (const d of state.catalog.datasets) sel.append(h('option', { value: d.name }, d.name));
  const saved = sessionStorage.getItem('pchronicle.dataset');
  const names = state.catalog.datasets.map((d) => d.name);
  state.dataset = names.includes(saved) ? saved : (state.catalog.default_dataset || names[0] || null);
  sel.value = state.dataset || '';
  sel.addEventListener('change', () => {
    state.dataset = sel.value;
    sessionStorage.setItem('pchronicle.dataset', sel.value);
    const { parts } = parseHash();
    if (parts[0] === 'd') location.hash = hashFor(['runs']);
    else render();
  });
}

function useDataset(name) {
  if (name && state.dataset !== name) {
    state.dataset = name;
    document.getElementById('dataset').value = name;
    sessionStorage.setItem('pchronicle.dataset', name);
  }
}

// ------------------------------------------------------------ overview

function bars(rows, label, value, fmt) {
  const max = Math.max(1, ...rows.map((r) => Number(r[value]) || 0));
  return h('div', { class: 'bars' }, rows.map((r) => h('div', { class: 'bar' },
    h('span', { class: 'label', title: String(r[label] ?? '(none)') }, String(r[label] ?? '(none)')),
    h('span', {}, h('div', { class: 'fill', style: `width:${(100 * (Number(r[value]) || 0) / max).toFixed(1)}%` })),
    h('span', { class: 'value' }, fmt ? fmt(r[value]) : fmtNum(r[value])))));
}

async function renderOverview(root) {
  root.append(h('h1', {}, 'Datasets'));
  const cards = h('div', { class: 'cards', 'data-testid': 'datasets' });
  for (const d of state.catalog.datasets) {
    const statuses = Object.entries(d.status_counts).map(([k, v]) => h('span', { class: `badge ${k}` }, `${v} ${k}`));
    cards.append(h('div', { class: 'card', 'data-dataset': d.name },
      h('h3', {}, h('a', { href: hashFor(['runs']), onclick: () => useDataset(d.name) }, d.name)),
      h('dl', { class: 'kv' },
        h('dt', {}, 'kind'), h('dd', {}, d.kind),
        h('dt', {}, 'sources'), h('dd', {}, fmtNum(d.source_count), ' ', statuses),
        h('dt', {}, 'formats'), h('dd', {}, Object.entries(d.format_counts).map(([k, v]) => `${k} ${v}`).join(', ')),
        h('dt', {}, 'size'), h('dd', {}, `${(d.bytes / 1e6).toFixed(1)} MB`),
        h('dt', {}, 'snapshot'), h('dd', { class: 'mono' }, d.snapshot_id))));
  }
  root.append(cards);
  if (!state.dataset) return;
  const ds = state.dataset;
  const charts = h('div', { class: 'charts' });
  root.append(h('h2', {}, `Summary of ${ds}`), charts);
  const sources = h('div', {});
  root.append(h('h2', {}, `Sources of ${ds}`), sources);
  try {
    const s = await api(`/datasets/${encodePath(ds)}/summary`);
    charts.append(
      h('div', { class: 'card' }, h('h3', {}, 'Tokens per model (agent steps)'),
        bars(s.models.map((m) => ({ ...m, tokens: (m.prompt_tokens || 0) + (m.completion_tokens || 0) })), 'model_name', 'tokens')),
      h('div', { class: 'card' }, h('h3', {}, 'Cost per model (USD)'),
        bars(s.models, 'model_name', 'cost_usd', (v) => (v == null ? '' : Number(v).toFixed(4)))),
      h('div', { class: 'card' }, h('h3', {}, 'Tool calls'), bars(s.tools, 'function_name', 'calls')));
  } catch (e) { charts.append(errorBox(e)); }
  try {
    const s = await api(`/datasets/${encodePath(ds)}/sources`);
    const t = h('table', { class: 'grid', 'data-testid': 'sources' },
      h('thead', {}, h('tr', {}, ['source_path', 'format', 'status', 'size', 'reason'].map((c) => h('th', {}, c)))));
    const tb = h('tbody');
    for (const r of s.sources.slice(0, 500)) {
      tb.append(h('tr', {},
        h('td', { class: 'mono' }, r.source_path),
        h('td', {}, r.format),
        h('td', {}, h('span', { class: `badge ${r.status}` }, r.status)),
        h('td', { class: 'num' }, fmtNum(r.size_bytes ?? r.size)),
        h('td', { class: 'clip' }, r.reason_code ? `${r.reason_code}: ${r.reason || ''}` : '')));
    }
    t.append(tb);
    sources.append(t);
    if (s.sources.length > 500) sources.append(h('p', { class: 'muted' }, `${s.sources.length - 500} more not shown`));
  } catch (e) { sources.append(errorBox(e)); }
}

// ------------------------------------------------------------ runs

const RUN_COLS = [
  ['run_id', 'Run'], ['agent_name', 'Agent'], ['model_name', 'Model'],
  ['trajectory_count', 'Traj.', true], ['step_count', 'Steps', true], ['tool_call_count', 'Tools', true],
  ['total_prompt_tokens', 'Prompt tok', true], ['total_completion_tokens', 'Compl. tok', true],
  ['total_cost_usd', 'Cost', true], ['started_at', 'Started'], ['first_user_message', 'First user message'],
];

/** Where a trajectory is: its Source and, inside it, its position. */
function docParams(source, ordinal) {
  return ordinal == null ? { source } : { source, ordinal };
}

async function renderRuns(root, params) {
  const ds = state.dataset;
  if (!ds) { root.append(h('p', {}, 'No dataset.')); return; }
  const p = {
    q: params.get('q') || '', agent_name: params.get('agent') || '', model_name: params.get('model') || '',
    sort: params.get('sort') || 'source_path', order: params.get('order') || 'asc',
    offset: Number(params.get('offset') || 0), limit: 50,
  };
  const go = (patch) => {
    const n = { ...p, ...patch };
    location.hash = hashFor(['runs'], { q: n.q, agent: n.agent_name, model: n.model_name, sort: n.sort, order: n.order, offset: n.offset || '' });
  };
  root.append(h('h1', {}, `Runs of ${ds}`));
  const q = h('input', { type: 'search', placeholder: 'filter: id, agent, model, first message…', value: p.q, size: 40, 'aria-label': 'filter runs' });
  const agent = h('input', { type: 'text', placeholder: 'agent', value: p.agent_name, size: 14, 'aria-label': 'agent' });
  const model = h('input', { type: 'text', placeholder: 'model', value: p.model_name, size: 14, 'aria-label': 'model' });
  const apply = () => go({ q: q.value, agent_name: agent.value, model_name: model.value, offset: 0 });
  for (const i of [q, agent, model]) i.addEventListener('keydown', (e) => { if (e.key === 'Enter') apply(); });
  root.append(h('div', { class: 'toolbar' }, q, agent, model, h('button', { class: 'primary', onclick: apply }, 'Filter')));
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  root.append(box);
  let r;
  try {
    r = await api(`/datasets/${encodePath(ds)}/runs`, p);
  } catch (e) { clear(box).append(errorBox(e)); return; }
  clear(box);
  const head = h('tr', {}, RUN_COLS.map(([c, label]) => {
    const sorted = r.sort === c;
    return h('th', {
      class: `sortable${sorted ? ' sorted' : ''}${sorted && r.order === 'desc' ? ' desc' : ''}`,
      onclick: () => go({ sort: c, order: sorted && r.order === 'asc' ? 'desc' : 'asc', offset: 0 }),
    }, label);
  }));
  const tb = h('tbody');
  for (const run of r.runs) {
    // A Run opens at its main trajectory; the page lists its subagents.
    const link = hashFor(['d', ds, 't', run.root_document_id], docParams(run.source_path, run.storage_ordinal));
    tb.append(h('tr', { 'data-document': run.root_document_id, 'data-run': run.run_id }, RUN_COLS.map(([c, , num]) => {
      if (c === 'run_id') {
        return h('td', { class: 'mono' }, h('a', { href: link }, run.run_id),
          run.root_document_id !== run.run_id ? h('div', { class: 'muted' }, `main: ${run.root_document_id}`) : null,
          run.subagent_count ? h('div', { class: 'muted' }, `${run.subagent_count} subagent${run.subagent_count === 1 ? '' : 's'}`) : null,
          h('div', { class: 'muted' }, run.origin_path !== run.source_path ? `${run.source_path} · ${run.origin_path}` : run.source_path));
      }
      if (c === 'total_cost_usd') return h('td', { class: 'num' }, run[c] == null ? '' : Number(run[c]).toFixed(4));
      return h('td', { class: num ? 'num' : (c === 'first_user_message' ? 'clip' : '') , title: c === 'first_user_message' ? (run[c] || '') : null }, fmtNum(run[c]));
    })));
  }
  box.append(h('table', { class: 'grid', 'data-testid': 'runs' }, h('thead', {}, head), tb));
  box.append(h('div', { class: 'pager' },
    h('button', { disabled: r.offset === 0, onclick: () => go({ offset: Math.max(0, r.offset - r.limit) }) }, '← Previous'),
    h('span', { class: 'muted' }, `${r.total ? r.offset + 1 : 0}–${r.offset + r.runs.length} of ${fmtNum(r.total)}`),
    h('button', { disabled: r.next_offset == null, onclick: () => go({ offset: r.next_offset }) }, 'Next →')));
}

// ------------------------------------------------------------ trajectory

function roleOf(step) {
  const s = step.step_source || '';
  if (s === 'agent' || s === 'assistant') return 'agent';
  if (s === 'user') return 'user';
  if (s === 'system') return 'system';
  return 'other';
}

function metricsLine(step) {
  const bits = [];
  if (step.prompt_tokens != null) bits.push(`prompt ${fmtNum(step.prompt_tokens)}`);
  if (step.completion_tokens != null) bits.push(`completion ${fmtNum(step.completion_tokens)}`);
  if (step.cached_tokens != null) bits.push(`cached ${fmtNum(step.cached_tokens)}`);
  if (step.cost_usd != null) bits.push(`$${Number(step.cost_usd).toFixed(5)}`);
  if (step.latency_ms != null) bits.push(`${fmtNum(step.latency_ms)} ms`);
  if (step.ttft_ms != null) bits.push(`ttft ${fmtNum(step.ttft_ms)} ms`);
  return bits.join(' · ');
}

function stepNode(ctx, step) {
  const role = roleOf(step);
  const terms = ctx.terms;
  const node = h('article', { class: `step ${role}`, id: `step-${step.index}`, 'data-index': step.index, 'data-role': role });
  node.append(h('div', { class: 'meta' },
    h('span', { class: 'role' }, role === 'agent' ? 'assistant' : (step.step_source || 'step')),
    h('span', {}, `#${step.index}`),
    step.step_id != null ? h('span', {}, `step_id ${step.step_id}`) : null,
    step.effective_kind ? h('span', {}, step.effective_kind) : null,
    step.timestamp ? h('span', {}, step.timestamp) : null,
    step.model_name ? h('span', {}, step.model_name) : null,
    h('span', {}, metricsLine(step))));
  // Cut output is expanded by its own block; other cut fields by this button.
  const truncated = new Set((step.truncated || []).filter((k) => !['observation', 'observation_text'].includes(k) && !/^tool_calls\[\d+\]\.results/.test(k)));
  const body = h('div', { class: 'body' });
  const fullStep = () => api(`/datasets/${encodePath(ctx.ds)}/trajectories/${encodePath(ctx.doc)}/steps/${step.index}`, ctx.at);
  const fill = (s) => {
    clear(body);
    if (s.reasoning_content) {
      body.append(h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'),
        h('div', { class: 'text' }, highlighted(s.reasoning_content, terms))));
    }
    if (s.message_value) body.append(h('div', { class: 'text message' }, highlighted(s.message_value, terms)));
    else if (s.message_json && typeof s.message_json !== 'string') body.append(h('pre', { class: 'json' }, jsonText(s.message_json)));
    body.append(...mediaNodes(ctx, (s.message_media || []).filter((m) => m.kind === 'image')));
    (s.tool_calls || []).forEach((c, ci) => {
      const out = c.output || [];
      body.append(h('div', { class: 'call', 'data-call': c.tool_call_id },
        h('div', {}, h('span', { class: 'fn' }, c.function_name || '(tool)'), ' ',
          h('span', { class: 'muted' }, [c.tool_call_id, c.status, c.duration_ms != null ? `${c.duration_ms} ms` : null, c.exit_code != null ? `exit ${c.exit_code}` : null].filter(Boolean).join(' · '))),
        h('details', { open: true }, h('summary', {}, 'arguments'), h('pre', { class: 'json' }, highlighted(jsonText(c.arguments), terms))),
        out.length ? h('details', { open: true, class: 'result' }, h('summary', {}, out.length > 1 ? `result (${out.length})` : 'result'),
          outputNodes(ctx, out, terms, async () => (await fullStep()).tool_calls[ci].output)) : null));
    });
    const loose = s.output || [];
    if (loose.length) {
      body.append(h('details', { open: true, class: 'observation' }, h('summary', {}, 'Output'),
        outputNodes(ctx, loose, terms, async () => (await fullStep()).output)));
    }
    if (s.metrics && typeof s.metrics === 'object') {
      body.append(h('details', {}, h('summary', {}, 'metrics'), h('pre', { class: 'json' }, jsonText(s.metrics))));
    }
  };
  fill(step);
  node.append(body);
  if (truncated.size) {
    node.append(h('button', {
      class: 'more', onclick: async (e) => {
        e.target.disabled = true;
        try {
          fill(await fullStep());
          e.target.remove();
        } catch (err) { node.append(errorBox(err)); }
      },
    }, `Show full text (${[...truncated].join(', ')})`));
  }
  return node;
}

async function renderTrajectory(root, ds, doc, params) {
  useDataset(ds);
  const source = params.get('source') || undefined;
  const ordinal = params.get('ordinal') || undefined;
  const terms = (params.get('hl') || '').split('\u001f').filter(Boolean);
  const focus = params.has('step') ? Number(params.get('step')) : null;
  let t;
  try {
    t = await api(`/datasets/${encodePath(ds)}/trajectories/${encodePath(doc)}`, docParams(source, ordinal));
  } catch (e) { root.append(h('h1', {}, doc), errorBox(e)); return; }
  const run = t.run || {};
  const src = t.source_path;
  const at = docParams(src, run.storage_ordinal);
  const exp = (fmt) => h('a', {
    class: 'button', download: '', 'data-export': fmt,
    href: `${API}/datasets/${encodePath(ds)}/trajectories/${encodePath(doc)}/export?` + new URLSearchParams({ ...at, format: fmt }),
  }, fmt);
  root.append(h('h1', {}, 'Trajectory ', h('span', { class: 'mono' }, doc)));
  root.append(h('div', { class: 'card' }, h('dl', { class: 'kv' },
    h('dt', {}, 'source'), h('dd', { class: 'mono' }, src),
    run.origin_path && run.origin_path !== src ? h('dt', {}, 'read from') : null,
    run.origin_path && run.origin_path !== src ? h('dd', { class: 'mono', 'data-testid': 'origin-path' }, run.origin_path) : null,
    h('dt', {}, 'run / session'), h('dd', { class: 'mono' }, `${run.run_id || ''} / ${run.session_id || ''}`),
    h('dt', {}, 'agent'), h('dd', {}, `${run.agent_name || ''} ${run.model_name ? '· ' + run.model_name : ''}`),
    h('dt', {}, 'steps'), h('dd', {}, `${fmtNum(t.step_count)} steps, ${fmtNum(t.tool_call_count)} tool calls`),
    h('dt', {}, 'tokens'), h('dd', {}, `${fmtNum(run.total_prompt_tokens)} prompt, ${fmtNum(run.total_completion_tokens)} completion` + (run.total_cost_usd != null ? `, $${Number(run.total_cost_usd).toFixed(4)}` : '')),
    h('dt', {}, 'time'), h('dd', {}, `${run.started_at || ''} → ${run.finished_at || ''}`),
    run.parent_document_id ? h('dt', {}, 'parent') : null,
    run.parent_document_id ? h('dd', {}, h('a', { href: hashFor(['d', ds, 't', run.parent_document_id], { source: src }) }, run.parent_document_id)) : null,
    t.children.length ? h('dt', {}, 'subagents') : null,
    t.children.length ? h('dd', {}, t.children.map((c) => h('a', { href: hashFor(['d', ds, 't', c.document_id], docParams(c.source_path, c.storage_ordinal)), style: 'margin-right:.8rem' }, `${c.document_id} (${c.agent_name || 'agent'}, ${c.step_count} steps)`))) : null,
    h('dt', {}, 'export'), h('dd', {}, exp('atif'), ' ', exp('openai-messages'), ' ', exp('storyline')))));
  const jump = h('input', { type: 'number', min: 0, max: Math.max(0, t.step_count - 1), placeholder: 'step #', style: 'width:7rem', 'aria-label': 'jump to step' });
  const toolbar = h('div', { class: 'toolbar' },
    h('button', { onclick: () => document.querySelectorAll('details.reasoning').forEach((d) => { d.open = true; }) }, 'Expand reasoning'),
    h('button', { onclick: () => document.querySelectorAll('details.reasoning').forEach((d) => { d.open = false; }) }, 'Collapse reasoning'),
    jump, h('button', { onclick: () => showStep(Number(jump.value)) }, 'Go'),
    terms.length ? h('span', { class: 'muted' }, 'highlighting: ', terms.map((x) => h('mark', {}, x))) : null);
  root.append(toolbar);
  const timeline = h('div', { class: 'timeline', 'data-testid': 'timeline' });
  root.append(timeline);
  const ctx = { ds, doc, source: src, at, terms };

  // Page-granular virtualisation: each page of PAGE steps is a slot that
  // holds its steps while near the viewport and a spacer of the same height
  // otherwise; pages are fetched when first approached.
  const pages = Math.ceil(t.step_count / PAGE);
  const slots = [];
  const cache = new Map();
  const estimate = 120;
  for (let i = 0; i < pages; i++) {
    const n = Math.min(PAGE, t.step_count - i * PAGE);
    const slot = h('div', { class: 'slot spacer', 'data-page': i, style: `height:${n * estimate}px` });
    slots.push(slot);
    timeline.append(slot);
  }
  const near = (el) => {
    const r = el.getBoundingClientRect();
    return r.bottom > -2500 && r.top < window.innerHeight + 2500;
  };
  const fillSlot = async (i, keep) => {
    const slot = slots[i];
    if (slot.dataset.filled === '1' || slot.dataset.loading === '1') return;
    slot.dataset.loading = '1';
    try {
      let page = cache.get(i);
      if (!page) {
        page = await api(`/datasets/${encodePath(ds)}/trajectories/${encodePath(doc)}/steps`, { ...at, offset: i * PAGE, limit: PAGE });
        cache.set(i, page);
      }
      clear(slot);
      slot.classList.remove('spacer');
      slot.style.height = '';
      for (const s of page.steps) slot.append(stepNode(ctx, s));
      slot.dataset.filled = '1';
    } catch (e) { clear(slot).append(errorBox(e)); } finally { slot.dataset.loading = '0'; }
    // The reader may have moved on while the page loaded.
    if (!keep && !near(slot)) emptySlot(i);
  };
  const emptySlot = (i) => {
    const slot = slots[i];
    if (slot.dataset.filled !== '1') return;
    const height = slot.getBoundingClientRect().height;
    clear(slot);
    slot.classList.add('spacer');
    slot.style.height = `${height}px`;
    slot.dataset.filled = '0';
  };
  const io = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const i = Number(e.target.dataset.page);
      if (e.isIntersecting) fillSlot(i); else emptySlot(i);
    }
  }, { rootMargin: '2500px 0px' });
  slots.forEach((s) => io.observe(s));
  state.cleanup = () => io.disconnect();
  const showStep = async (n) => {
    if (!(n >= 0 && n < t.step_count)) return;
    const i = Math.floor(n / PAGE);
    await fillSlot(i, true);
    const el = document.getElementById(`step-${n}`);
    if (el) { el.scrollIntoView({ block: 'center' }); el.style.outline = '2px solid var(--accent)'; }
  };
  if (pages === 0) timeline.append(h('p', { class: 'muted' }, 'No steps.'));
  else if (focus != null) await showStep(focus);
  else await fillSlot(0);
}

// ------------------------------------------------------------ find

async function renderFind(root, params) {
  const ds = state.dataset;
  root.append(h('h1', {}, `Find in ${ds}`));
  const q = h('input', { type: 'search', size: 60, value: params.get('q') || '', placeholder: 'e.g. 数据库 AND #assistant(timeout)  or  $.priority >= 2', 'aria-label': 'find expression', autofocus: true });
  const scope = h('select', { 'aria-label': 'scope' }, ['auto', 'steps', 'runs'].map((s) => h('option', { value: s }, s)));
  scope.value = params.get('scope') || 'auto';
  const parse = h('div', { class: 'parse', 'data-testid': 'parse-status' }, '');
  const results = h('div', { 'data-testid': 'hits' });
  root.append(h('div', { class: 'toolbar' }, q, scope, h('button', { class: 'primary', onclick: () => run(true) }, 'Search')), parse, results);
  let timer = null;
  let seq = 0;
  const explain = async () => {
    const my = ++seq;
    if (!q.value.trim()) { parse.textContent = ''; return; }
    try {
      const r = await api(`/datasets/${encodePath(ds)}/find`, { q: q.value, scope: scope.value, explain: '1' });
      if (my !== seq) return;
      clear(parse).append(h('span', { class: 'ok' }, '✓ parsed'), ` · scope ${r.search.scope} · mode ${r.search.mode} · `, h('code', {}, r.query.expression || ''),
        ...(r.search.notes || []).map((n) => h('div', { class: 'note' }, `note: ${n}`)));
    } catch (e) {
      if (my !== seq) return;
      clear(parse).append(h('span', { class: 'error' }, `✗ ${e.code}: ${e.message}`));
    }
  };
  const run = async (push) => {
    if (push) history.replaceState(null, '', hashFor(['find'], { q: q.value, scope: scope.value === 'auto' ? '' : scope.value }));
    clear(results).append(h('p', { class: 'muted' }, 'Searching…'));
    let r;
    try {
      r = await api(`/datasets/${encodePath(ds)}/find`, { q: q.value, scope: scope.value, limit: 100 });
    } catch (e) { clear(results).append(errorBox(e)); return; }
    clear(results);
    const terms = r.highlight_terms || [];
    results.append(h('p', { class: 'muted' },
      `${fmtNum(r.total)} match${r.total === 1 ? '' : 'es'}${r.truncated ? ` (showing ${r.matches.length})` : ''} · ${r.search.scope} · ${Math.round(r.elapsed_ms)} ms`,
      r.search.fts_available ? '' : ` · full-text search unavailable: ${r.search.fts_unavailable_reason || ''}`));
    results.append(statsLine(r.stats));
    for (const n of r.search.notes || []) results.append(h('p', { class: 'note', 'data-testid': 'find-note' }, `note: ${n}`));
    for (const m of r.matches) {
      const link = hashFor(['d', ds, 't', m.document_id], { ...docParams(m.source_path, m.storage_ordinal), step: m.index, hl: terms.join('\u001f') });
      const f = m.fields || {};
      const parts = [];
      for (const [k, label] of [['message_value', 'message'], ['reasoning_content', 'reasoning'], ['observation_text', 'output'], ['prompt', 'prompt']]) {
        if (!f[k]) continue;
        const body = k === 'observation_text'
          ? terminalBlock({ text: f[k], cut: false, lines: f[k].split('\n').length }, terms)
          : h('div', { class: 'text' }, highlighted(f[k], terms));
        parts.push(h('div', {}, h('span', { class: 'badge' }, label), body));
      }
      if (!parts.length) parts.push(h('div', { class: 'text' }, highlighted(m.preview, terms)));
      results.append(h('div', { class: 'hit', 'data-document': m.document_id },
        h('div', { class: 'meta' },
          h('a', { href: link, class: 'mono' }, m.document_id),
          h('span', { class: 'mono' }, m.source_path),
          m.step_id != null ? h('span', {}, `step ${m.step_id}`) : null,
          m.step_source ? h('span', {}, m.step_source) : null,
          m.timestamp ? h('span', {}, m.timestamp) : null),
        parts));
    }
  };
  q.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(explain, 200); });
  scope.addEventListener('change', explain);
  q.addEventListener('keydown', (e) => { if (e.key === 'Enter') run(true); });
  if (q.value.trim()) { explain(); run(false); }
}

// ------------------------------------------------------------ SQL

async function renderSql(root, params) {
  const ds = state.dataset;
  root.append(h('h1', {}, 'SQL'));
  const names = state.catalog.datasets.map((d) => d.name).join(', ');
  root.append(h('p', { class: 'muted' }, `Each dataset is a schema (${names}) with sources, runs, trajectories, steps, tool_calls, events and judgments. Read-only: SELECT, WITH, DESCRIBE, EXPLAIN.`));
  const quoted = /^[a-z_][a-z0-9_]*$/.test(ds || '') ? ds : `"${ds}"`;
  const ta = h('textarea', { class: 'sql', 'aria-label': 'SQL', spellcheck: 'false' });
  ta.value = params.get('sql') || sessionStorage.getItem('pchronicle.sql') || `SELECT step_source, count(*) AS steps\nFROM ${quoted}.steps\nGROUP BY step_source\nORDER BY steps DESC`;
  const out = h('div', { 'data-testid': 'sql-result' });
  const links = h('span', {});
  const run = async () => {
    sessionStorage.setItem('pchronicle.sql', ta.value);
    clear(out).append(h('p', { class: 'muted' }, 'Running…'));
    clear(links);
    let r;
    try { r = await api('/query', { sql: ta.value, max_rows: 1000 }); } catch (e) { clear(out).append(errorBox(e)); return; }
    clear(out);
    const dl = (fmt) => h('a', { class: 'button', download: `query.${fmt}`, 'data-download': fmt, href: `${API}/query?` + new URLSearchParams({ sql: ta.value, format: fmt }) }, `Download ${fmt.toUpperCase()}`);
    links.append(dl('csv'), ' ', dl('jsonl'));
    out.append(h('p', { class: 'muted' }, `${fmtNum(r.row_count)} row${r.row_count === 1 ? '' : 's'}${r.truncated ? ` (first ${r.max_rows} shown)` : ''}`));
    out.append(statsLine(r.stats));
    for (const w of r.warnings || []) out.append(h('p', { class: 'error' }, `${w.code}: ${w.message}`));
    const t = h('table', { class: 'grid' }, h('thead', {}, h('tr', {}, r.columns.map((c) => h('th', { title: c.type }, c.name)))));
    const tb = h('tbody');
    for (const row of r.rows) tb.append(h('tr', {}, row.map((v) => h('td', { class: typeof v === 'number' ? 'num' : 'clip', title: typeof v === 'string' && v.length > 60 ? v.slice(0, 2000) : null }, v === null ? 'NULL' : String(v)))));
    t.append(tb);
    out.append(t);
  };
  ta.addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
  root.append(ta, h('div', { class: 'toolbar' }, h('button', { class: 'primary', onclick: run }, 'Run (Ctrl+Enter)'), links), out);
}

// ------------------------------------------------------------ router

let renderSeq = 0;
async function render() {
  // Each view renders into its own root: a view still loading when the user
  // moves on fills a detached node, not the new page.
  renderSeq += 1;
  if (state.cleanup) { state.cleanup(); state.cleanup = null; }
  const root = document.createElement('div');
  clear(view()).append(root);
  const { parts, params } = parseHash();
  const section = parts[0] || 'overview';
  document.querySelectorAll('header nav a').forEach((a) => a.classList.toggle('active', a.dataset.nav === (section === 'd' ? 'runs' : section)));
  try {
    if (section === 'overview') await renderOverview(root);
    else if (section === 'runs') await renderRuns(root, params);
    else if (section === 'find') await renderFind(root, params);
    else if (section === 'sql') await renderSql(root, params);
    else if (section === 'd' && parts[2] === 't' && parts[3] !== undefined) await renderTrajectory(root, parts[1], parts[3], params);
    else root.append(h('p', {}, 'Not found. '), h('a', { href: '#/' }, 'Datasets'));
  } catch (e) { root.append(errorBox(e)); }
  document.body.dataset.ready = '1';
}

window.addEventListener('hashchange', () => { document.body.dataset.ready = '0'; render(); });
(async () => {
  try { await loadCatalog(); } catch (e) { clear(view()).append(errorBox(e)); document.body.dataset.ready = '1'; return; }
  render();
})();
