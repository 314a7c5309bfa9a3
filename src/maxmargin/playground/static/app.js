// maxmargin playground: draw points, the server fits an SVM, the page draws it.
// Plain JavaScript, no libraries, nothing from the network but this server.
(function () {
  'use strict';

  // ------------------------------------------------------------------ constants
  var CLASS_COLORS = { '1': [214, 39, 40], '-1': [31, 119, 180], '2': [44, 160, 44],
                       '3': [255, 127, 14], '4': [148, 103, 189] };
  var CLASS_NAMES = { '1': '+1', '-1': '−1', '2': '2', '3': '3', '4': '4' };
  var FORMULATION_NAMES = {
    'l1': 'l1: 1-norm soft margin (hinge)', 'hard': 'hard margin', 'l2': 'l2: 2-norm soft margin',
    'l2-simplex': 'l2 on the simplex (Frank-Wolfe form)', 'zero-one': '0/1 error'
  };
  var SOLVER_NAMES = {
    'smo': 'SMO', 'frank-wolfe': 'Frank-Wolfe', 'qp': 'QP (dual)', 'primal-qp': 'QP (primal)',
    'subgradient': 'subgradient', 'random-search': 'random search'
  };
  var PAINT_SPACING = 12;   // px between painted points while dragging
  var ERASE_RADIUS = 11;    // px
  var DEFAULT_VIEW = { xmin: -3, xmax: 3, ymin: -3, ymax: 3 };

  // --------------------------------------------------------------------- state
  var state = {
    options: null,
    points: [],           // {id, x, y, label, u}
    nextId: 1,
    current: 1,
    mode: 'draw',
    view: Object.assign({}, DEFAULT_VIEW),
    seq: 0,
    client: 'tab-' + Math.random().toString(36).slice(2, 10),
    result: null,         // last successful fit (with .ids, the point ids it saw)
    resultStale: false,   // the points changed since, or the last fit failed
    history: [],
    queued: false,        // a fit is requested for the next animation frame
    fits: 0,
    boundary: ''          // signature of the drawn f = 0 curve
  };

  var $ = function (id) { return document.getElementById(id); };
  var canvas, ctx, regionCanvas;
  var inflight = null;
  var fitQueued = false;

  // ---------------------------------------------------------------- utilities
  function rng(seed) {                       // mulberry32
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  var splitRandom = rng(Date.now() & 0xffffffff);
  function gauss(r) {
    var u = 1 - r(), v = r();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
  function fmt(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) { return '—'; }
    digits = digits || 4;
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) { return v.toExponential(2); }
    return Number(v.toPrecision(digits)).toString();
  }
  function pct(v) { return (v === null || v === undefined) ? '—' : (100 * v).toFixed(1) + '%'; }
  function round6(v) { return Math.round(v * 1e6) / 1e6; }

  // ------------------------------------------------------------- coordinates
  function size() { return { w: canvas.clientWidth || 600, h: canvas.clientHeight || 600 }; }
  function toPx(x, y) {
    var s = size(), v = state.view;
    return [(x - v.xmin) / (v.xmax - v.xmin) * s.w, (v.ymax - y) / (v.ymax - v.ymin) * s.h];
  }
  function toWorld(px, py) {
    var s = size(), v = state.view;
    return [v.xmin + px / s.w * (v.xmax - v.xmin), v.ymax - py / s.h * (v.ymax - v.ymin)];
  }

  // ----------------------------------------------------------------- editing
  function snapshot() {
    state.history.push(state.points.map(function (p) { return Object.assign({}, p); }));
    if (state.history.length > 100) { state.history.shift(); }
  }
  function addPoint(x, y, label, u) {
    state.points.push({ id: state.nextId++, x: x, y: y, label: label,
                        u: (u === undefined ? splitRandom() : u) });
  }
  function eraseNear(px, py) {
    var before = state.points.length;
    state.points = state.points.filter(function (p) {
      var q = toPx(p.x, p.y);
      return Math.hypot(q[0] - px, q[1] - py) > ERASE_RADIUS;
    });
    return state.points.length !== before;
  }
  function changed() {
    state.resultStale = true;
    updateClassCounts();
    draw();
    requestFit();
  }
  function classCounts() {
    var counts = {};
    state.points.forEach(function (p) { counts[p.label] = (counts[p.label] || 0) + 1; });
    return counts;
  }
  // As the server does: with few points in some class every point trains (as svm-toy does);
  // a test share is held out once each class has limits.min_class_for_test points.
  function allTrain() {
    var min = state.options ? state.options.limits.min_class_for_test : 0;
    if (!min || Number($('split').value) >= 100) { return false; }
    var counts = classCounts();
    return Object.keys(counts).some(function (l) { return counts[l] < min; });
  }
  function isTrain(p, all) { return all || p.u < Number($('split').value) / 100; }

  // ----------------------------------------------------------------- presets
  function preset(name) {
    var r = rng(0x5eed + state.nextId), pts = [], i, t;
    function push(x, y, l) { pts.push([x, y, l]); }
    if (name === 'blobs') {
      for (i = 0; i < 100; i++) { push(-1 + 0.55 * gauss(r), -0.8 + 0.55 * gauss(r), -1); }
      for (i = 0; i < 100; i++) { push(1 + 0.55 * gauss(r), 0.8 + 0.55 * gauss(r), 1); }
    } else if (name === 'xor') {
      [[1.3, 1.3, 1], [-1.3, -1.3, 1], [-1.3, 1.3, -1], [1.3, -1.3, -1]].forEach(function (c) {
        for (var k = 0; k < 50; k++) { push(c[0] + 0.45 * gauss(r), c[1] + 0.45 * gauss(r), c[2]); }
      });
    } else if (name === 'moons') {
      for (i = 0; i < 100; i++) {
        t = Math.PI * r();
        push(1.6 * (Math.cos(t) - 0.5) + 0.2 * gauss(r), 1.6 * (Math.sin(t) - 0.25) + 0.2 * gauss(r), 1);
        t = Math.PI * r();
        push(1.6 * (0.5 - Math.cos(t)) + 0.2 * gauss(r), 1.6 * (0.25 - Math.sin(t)) + 0.2 * gauss(r), -1);
      }
    } else if (name === 'circles') {
      for (i = 0; i < 100; i++) {
        t = 2 * Math.PI * r();
        push(0.9 * Math.cos(t) + 0.15 * gauss(r), 0.9 * Math.sin(t) + 0.15 * gauss(r), 1);
        t = 2 * Math.PI * r();
        push(2.1 * Math.cos(t) + 0.15 * gauss(r), 2.1 * Math.sin(t) + 0.15 * gauss(r), -1);
      }
    } else if (name === 'blobs3') {
      [[-1.4, -1, 1], [1.4, -1, -1], [0, 1.5, 2]].forEach(function (c) {
        for (var k = 0; k < 60; k++) { push(c[0] + 0.5 * gauss(r), c[1] + 0.5 * gauss(r), c[2]); }
      });
    } else {
      return;
    }
    snapshot();
    state.points = [];
    state.view = Object.assign({}, DEFAULT_VIEW);
    pts.forEach(function (p) { addPoint(p[0], p[1], p[2]); });
    changed();
  }

  // --------------------------------------------------------------------- CSV
  function exportCsv() {
    var lines = ['x1,x2,label'];
    state.points.forEach(function (p) { lines.push(round6(p.x) + ',' + round6(p.y) + ',' + p.label); });
    return lines.join('\n') + '\n';
  }
  function downloadCsv() {
    var blob = new Blob([exportCsv()], { type: 'text/csv' });
    var a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'maxmargin-points.csv';
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  }
  // Reads "x1,x2,label" (our export), "label,x1,x2" (seed 003's y,x1,x2) and the
  // like: with a header, the column named label/y/class/target is the label;
  // without, the last column if it holds few integers, else the first.
  function parseCsv(text) {
    var rows = [], header = null;
    text.split(/\r?\n/).forEach(function (line) {
      line = line.trim();
      if (!line || line.charAt(0) === '#') { return; }
      var f = line.split(/\s*[,;\t]\s*|\s+/);
      if (rows.length === 0 && header === null && f.some(function (v) { return v !== '' && isNaN(Number(v)); })) {
        header = f.map(function (v) { return v.toLowerCase().replace(/^["']|["']$/g, ''); });
        return;
      }
      rows.push(f.map(Number));
    });
    if (!rows.length) { throw new Error('no data rows'); }
    var width = rows[0].length;
    rows.forEach(function (r, i) {
      if (r.length !== width) { throw new Error('row ' + (i + 1) + ' has ' + r.length + ' fields, the first has ' + width); }
      r.forEach(function (v) { if (!isFinite(v)) { throw new Error('row ' + (i + 1) + ' has a value that is not a number'); } });
    });
    if (width !== 3) {
      throw new Error('the playground draws 2-D points: a file needs 3 columns (two coordinates and a label), this one has ' + width);
    }
    var li = -1;
    if (header) {
      ['label', 'y', 'class', 'target'].forEach(function (n) { if (li < 0) { li = header.indexOf(n); } });
    }
    function labelLike(c) {
      var seen = {};
      return rows.every(function (r) { seen[r[c]] = 1; return Number.isInteger(r[c]); }) &&
        Object.keys(seen).length <= 5;
    }
    if (li < 0) { li = labelLike(2) ? 2 : (labelLike(0) ? 0 : 2); }
    var uniq = Array.from(new Set(rows.map(function (r) { return r[li]; }))).sort(function (a, b) { return a - b; });
    if (uniq.length > 5) { throw new Error('at most 5 classes, the label column has ' + uniq.length + ' values'); }
    var known = state.options ? state.options.classes : [1, -1, 2, 3, 4];
    var map = {};
    if (uniq.every(function (v) { return known.indexOf(v) >= 0; })) {
      uniq.forEach(function (v) { map[v] = v; });
    } else if (uniq.length === 2) {
      map[uniq[0]] = -1; map[uniq[1]] = 1;
    } else {
      uniq.forEach(function (v, i) { map[v] = known[i]; });
    }
    var cols = [0, 1, 2].filter(function (c) { return c !== li; });
    return rows.map(function (r) { return [r[cols[0]], r[cols[1]], map[r[li]]]; });
  }
  function importCsv(text) {
    var pts = parseCsv(text);
    var max = state.options ? state.options.limits.max_points : 5000;
    if (pts.length > max) { throw new Error(pts.length + ' points; the playground takes at most ' + max); }
    snapshot();
    state.points = [];
    pts.forEach(function (p) { addPoint(p[0], p[1], p[2]); });
    fitView();
    changed();
  }
  function fitView() {
    if (!state.points.length) { state.view = Object.assign({}, DEFAULT_VIEW); return; }
    var xs = state.points.map(function (p) { return p.x; }), ys = state.points.map(function (p) { return p.y; });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    var cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
    var half = Math.max(x1 - x0, y1 - y0, 1e-6) * 0.6;
    state.view = { xmin: cx - half, xmax: cx + half, ymin: cy - half, ymax: cy + half };
  }

  // ---------------------------------------------------------------- controls
  function log10Value(id) { return Math.pow(10, Number($(id).value)); }
  function params() {
    var p = {
      formulation: $('formulation').value,
      solver: $('solver').value,
      kernel: $('kernel').value,
      C: log10Value('C'),
      degree: Number($('degree').value),
      coef0: Number($('coef0').value) || 0
    };
    if (p.kernel === 'rbf') { p.sigma = $('sigma-auto').checked ? 'median' : log10Value('sigma'); }
    if (p.kernel === 'poly' || p.kernel === 'sigmoid') { p.gamma = log10Value('gamma'); }
    return p;
  }
  function fillSelect(sel, values, names, keep) {
    var old = keep ? sel.value : null;
    sel.innerHTML = '';
    values.forEach(function (v) {
      var o = document.createElement('option');
      o.value = v;
      o.textContent = names[v] || v;
      sel.appendChild(o);
    });
    if (old && values.indexOf(old) >= 0) { sel.value = old; }
  }
  function syncControls() {
    var o = state.options;
    if (!o) { return; }
    var f = $('formulation').value;
    // solvers able to solve f, in the library's order (its first is its default)
    var unavailable = o.unavailable || {};
    var valid = o.solvers.filter(function (sv) {
      return o.valid.some(function (v) { return v[0] === f && v[1] === sv; });
    });
    var ok = valid.filter(function (sv) { return !unavailable[sv]; });
    Array.prototype.forEach.call($('solver').options, function (opt) {
      opt.disabled = ok.indexOf(opt.value) < 0;
    });
    if (ok.indexOf($('solver').value) < 0 && ok.length) { $('solver').value = ok[0]; }
    var byReason = {};             // the solvers that cannot run here, grouped by the reason
    valid.forEach(function (sv) {
      var why = unavailable[sv];
      if (why) { (byReason[why] = byReason[why] || []).push(SOLVER_NAMES[sv] || sv); }
    });
    var reasons = Object.keys(byReason);
    $('solver-note').classList.toggle('hidden', !reasons.length);
    $('solver-note').textContent = reasons.map(function (why) {
      return byReason[why].join(' and ') + ': not available here, ' + why + '.';
    }).join(' ');
    // linear kernel only: the chosen solver, or a formulation whose solvers all are (0/1 error)
    var lin = o.linear_only || [];
    var named = valid.filter(function (sv) { return sv !== 'auto'; });
    var formLinear = named.length > 0 && named.every(function (sv) { return lin.indexOf(sv) >= 0; });
    var linearOnly = formLinear || lin.indexOf($('solver').value) >= 0;
    Array.prototype.forEach.call($('kernel').options, function (opt) {
      opt.disabled = linearOnly && opt.value !== 'linear';
    });
    var switched = linearOnly && $('kernel').value !== 'linear';
    if (switched) { $('kernel').value = 'linear'; }
    var why = !linearOnly ? '' : (formLinear ? (FORMULATION_NAMES[f] || f) + ' (solved by ' +
      named.map(function (sv) { return SOLVER_NAMES[sv] || sv; }).join(', ') + ')' :
      'the ' + (SOLVER_NAMES[$('solver').value] || $('solver').value) + ' solver') +
      ' works with the linear kernel only: the kernel is linear and the other kernels are off.';
    $('kernel').title = why;
    $('kernel-note').textContent = why;
    $('kernel-note').classList.toggle('hidden', !linearOnly);
    var k = $('kernel').value;
    $('sigma-row').classList.toggle('hidden', k !== 'rbf');
    $('sigma-auto-row').classList.toggle('hidden', k !== 'rbf');
    $('sigma').disabled = $('sigma-auto').checked;
    $('sigma-row').classList.toggle('disabled', $('sigma-auto').checked);
    $('gamma-row').classList.toggle('hidden', !(k === 'poly' || k === 'sigmoid'));
    $('degree-row').classList.toggle('hidden', k !== 'poly');
    $('coef0-row').classList.toggle('hidden', !(k === 'poly' || k === 'sigmoid'));
    var noC = o.no_C.indexOf(f) >= 0;
    $('C').disabled = noC;
    $('C-row').classList.toggle('disabled', noC);
    $('C-value').textContent = noC ? 'not used' : fmt(log10Value('C'), 3);
    var s = log10Value('sigma');
    if ($('sigma-auto').checked) {
      var g = state.result && state.result.numbers.gamma;
      $('sigma-value').textContent = g ? 'from data: ' + fmt(Math.sqrt(1 / (2 * g)), 3) : 'from data';
    } else {
      $('sigma-value').textContent = fmt(s, 3) + '  (γ = ' + fmt(1 / (2 * s * s), 3) + ')';
    }
    $('gamma-value').textContent = fmt(log10Value('gamma'), 3);
    var share = Number($('split').value), every = allTrain();
    $('split-value').textContent = every ? 'all points train (' + share + '% later)' :
      share + '% train / ' + (100 - share) + '% test';
    $('split-note').classList.toggle('hidden', !every);
    $('split-note').textContent = every ? 'Every point trains for now: a test share of ' + (100 - share) +
      '% is held out once each class has ' + o.limits.min_class_for_test + ' points.' : '';
  }
  function setMode(mode) {
    state.mode = mode;
    $('mode-draw').setAttribute('aria-pressed', String(mode === 'draw'));
    $('mode-erase').setAttribute('aria-pressed', String(mode === 'erase'));
    document.body.classList.toggle('erasing', mode === 'erase');
  }
  function setClass(label) {
    state.current = label;
    Array.prototype.forEach.call(document.querySelectorAll('.class-button'), function (b) {
      b.setAttribute('aria-pressed', String(Number(b.dataset.label) === label));
    });
    setMode('draw');
  }
  function buildClassBar() {
    var bar = $('class-bar');
    Array.prototype.forEach.call(bar.querySelectorAll('.class-button'), function (b) { b.remove(); });
    var labels = state.options ? state.options.classes : [1, -1, 2, 3, 4];
    labels.forEach(function (l, i) {
      var b = document.createElement('button');
      b.type = 'button';
      b.className = 'class-button';
      b.dataset.label = String(l);
      b.id = 'class-' + (l < 0 ? 'm' + (-l) : String(l));
      b.title = 'class ' + CLASS_NAMES[l] + ' (key ' + (i + 1) + ')';
      var sw = document.createElement('span');
      sw.className = 'swatch';
      sw.style.background = 'rgb(' + CLASS_COLORS[l].join(',') + ')';
      var t = document.createElement('span');
      t.textContent = CLASS_NAMES[l];
      var c = document.createElement('span');
      c.className = 'count';
      b.appendChild(sw); b.appendChild(t); b.appendChild(c);
      b.addEventListener('click', function () { setClass(l); });
      bar.appendChild(b);
    });
    setClass(state.current);
    updateClassCounts();
  }
  function updateClassCounts() {
    var counts = classCounts();
    Array.prototype.forEach.call(document.querySelectorAll('.class-button'), function (b) {
      b.querySelector('.count').textContent = '(' + (counts[b.dataset.label] || 0) + ')';
    });
  }

  // ------------------------------------------------------------------ status
  function setStatus(kind, text) {
    document.body.dataset.status = kind;
    $('status').textContent = text;
  }
  function showMessages(items) {      // [{kind: 'error'|'warning'|'hint', text}]
    var box = $('message');
    box.innerHTML = '';
    items.forEach(function (m) {
      var d = document.createElement('div');
      d.className = m.kind;
      d.textContent = m.text;
      box.appendChild(d);
    });
  }
  function clearNumbers() {
    ['num-train-error', 'num-test-error', 'num-margin', 'num-min-yf', 'num-sv', 'num-loo', 'num-objective',
     'num-iter', 'num-time', 'num-points'].forEach(function (id) { $(id).textContent = '—'; });
    $('sv-note').classList.add('hidden');
  }
  function perPair(m, what) {      // one value, or the smallest over the one-vs-one pairs
    m = m || [];
    var finite = m.filter(function (v) { return v !== null; });
    if (!finite.length) { return '—'; }
    return m.length === 1 ? fmt(m[0]) : what + ' ' + fmt(Math.min.apply(null, finite)) + ' over ' + m.length + ' pairs';
  }
  function showNumbers(r) {
    var n = r.numbers;
    $('num-train-error').textContent = pct(n.train_error);
    $('num-test-error').textContent = n.n_test ? pct(n.test_error) : '— (no test points)';
    var noMargin = $('formulation').value === 'zero-one' && !n.margin;
    $('num-margin').textContent = noMargin ? '— (0/1 error has no margin)' : perPair(n.margin, 'min');
    $('num-min-yf').textContent = noMargin ? '—' : perPair(n.min_yf_margin, 'min');
    var rho = (n.margin_rule || '').charAt(0) === 'ρ';
    $('margin-label').firstChild.textContent = rho ? 'margin ρ/‖w‖' : 'margin 1/‖w‖';
    $('margin-label').title = 'half-width of the band between the margin lines: ' + (n.margin_rule || '1/‖w‖');
    $('num-sv').textContent = n.n_sv === null ? '—' : String(n.n_sv);
    $('sv-label').textContent = n.sv_rule ? '#SV (y·f ≤ 1)' : '#SV';
    $('loo-label').textContent = n.sv_rule ? 'LOO bound #(y·f ≤ 1)/n' : 'LOO bound #SV/n';
    $('sv-note').classList.toggle('hidden', !n.sv_rule);
    $('sv-note').textContent = n.sv_rule ? '#SV and the rings count the ' + n.sv_rule + '.' : '';
    $('num-loo').textContent = pct(n.loo_bound);
    var obj = n.objective || [];
    $('num-objective').textContent = !obj.length ? '—' :
      (obj.length === 1 ? fmt(obj[0], 6) : 'Σ ' + fmt(obj.reduce(function (a, b) { return a + (b || 0); }, 0), 6));
    var it = n.n_iter || [];
    $('num-iter').textContent = !it.length ? '—' : String(it.reduce(function (a, b) { return a + b; }, 0)) +
      (it.length > 1 ? ' (' + it.length + ' pairs)' : '');
    $('num-time').textContent = fmt(1000 * n.fit_time, 3) + ' ms';
    $('num-points').textContent = n.n_train + ' / ' + n.n_test;
  }

  // ------------------------------------------------------------------ fitting
  function requestFit() {
    if (fitQueued) { return; }
    fitQueued = true;
    state.queued = true;
    requestAnimationFrame(function () { fitQueued = false; state.queued = false; fitNow(); });
  }
  function fitNow() {
    if (!state.options) { return Promise.resolve(); }
    var labels = {};
    state.points.forEach(function (p) { labels[p.label] = 1; });
    var seq = ++state.seq;
    if (inflight) { inflight.abort(); inflight = null; }
    if (Object.keys(labels).length < 2) {
      state.result = null;
      clearNumbers();
      draw();
      document.body.dataset.done = String(seq);
      setStatus('idle', 'waiting for points');
      showMessages([{ kind: 'hint', text: 'Add points of at least two classes (click the canvas; keys 1–5 switch class).' }]);
      return Promise.resolve();
    }
    var max = state.options.limits.max_points;
    if (state.points.length > max) {
      document.body.dataset.done = String(seq);
      setStatus('error', 'too many points');
      showMessages([{ kind: 'error', text: state.points.length + ' points: the server takes at most ' + max + '. Delete some.' }]);
      return Promise.resolve();
    }
    var ctrl = new AbortController();
    inflight = ctrl;
    var ids = state.points.map(function (p) { return p.id; });
    var grid = Object.assign({}, state.view, { nx: state.options.defaults.grid, ny: state.options.defaults.grid });
    var body = {
      client: state.client, seq: seq,
      points: state.points.map(function (p) { return [round6(p.x), round6(p.y), p.label, round6(p.u)]; }),
      params: params(), train_percent: Number($('split').value), grid: grid
    };
    setStatus('fitting', 'fitting…');
    var t0 = performance.now();
    return fetch('api/fit', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), signal: ctrl.signal
    }).then(function (resp) {
      return resp.json().catch(function () { return { ok: false, error: 'HTTP ' + resp.status }; })
        .then(function (data) { return [resp, data]; });
    }).then(function (rd) {
      var resp = rd[0], data = rd[1];
      if (seq !== state.seq || resp.status === 409) { return; }     // superseded
      document.body.dataset.done = String(seq);
      if (!resp.ok || !data.ok) {
        state.resultStale = true;        // the old picture stays, faded; its numbers go
        clearNumbers();
        setStatus('error', 'error');
        showMessages([{ kind: 'error', text: (resp.ok ? '' : 'request refused (' + resp.status + '): ') + data.error }]);
        draw();
        return;
      }
      data.ids = ids;
      data.roundTrip = performance.now() - t0;
      state.result = data;
      state.resultStale = false;
      state.fits += 1;
      showNumbers(data);
      syncControls();
      var msgs = (data.warnings || []).map(function (w) { return { kind: 'warning', text: w }; });
      var note = data.split_note;
      if (note) { msgs.push({ kind: 'hint', text: note.charAt(0).toUpperCase() + note.slice(1) + '.' }); }
      showMessages(msgs);
      draw();
      document.body.dataset.seq = String(seq);
      setStatus('ok', 'fitted in ' + fmt(1000 * data.numbers.fit_time, 3) + ' ms (round trip ' +
                Math.round(data.roundTrip) + ' ms)' + (data.numbers.converged ? '' : ' — not converged'));
    }).catch(function (err) {
      if (err && err.name === 'AbortError') { return; }
      if (seq !== state.seq) { return; }
      document.body.dataset.done = String(seq);
      setStatus('error', 'server unreachable');
      showMessages([{ kind: 'error', text: 'The server did not answer: ' + err + '. Is `maxmargin playground` still running?' }]);
    }).then(function () {
      if (inflight === ctrl) { inflight = null; }
    });
  }

  // ----------------------------------------------------------------- contours
  // Marching squares on a grid of values (row j = y index, rising), joined into
  // polylines through the shared cell edges.
  function contour(values, nx, ny, level) {
    function v(i, j) { return values[j * nx + i]; }
    function cross(a, b) { return (a >= level) !== (b >= level) && a !== null && b !== null; }
    function frac(a, b) { return (level - a) / (b - a); }
    var segs = [];
    for (var j = 0; j < ny - 1; j++) {
      for (var i = 0; i < nx - 1; i++) {
        var a = v(i, j), b = v(i + 1, j), c = v(i + 1, j + 1), d = v(i, j + 1);
        if (a === null || b === null || c === null || d === null) { continue; }
        var pts = [];   // [key, gx, gy]
        if (cross(a, b)) { pts.push(['h' + i + '_' + j, i + frac(a, b), j]); }
        if (cross(b, c)) { pts.push(['v' + (i + 1) + '_' + j, i + 1, j + frac(b, c)]); }
        if (cross(d, c)) { pts.push(['h' + i + '_' + (j + 1), i + frac(d, c), j + 1]); }
        if (cross(a, d)) { pts.push(['v' + i + '_' + j, i, j + frac(a, d)]); }
        if (pts.length === 2) {
          segs.push([pts[0], pts[1]]);
        } else if (pts.length === 4) {           // saddle: split by the centre value
          var centre = (a + b + c + d) / 4;
          if ((centre >= level) === (a >= level)) {
            segs.push([pts[0], pts[1]]); segs.push([pts[2], pts[3]]);
          } else {
            segs.push([pts[0], pts[3]]); segs.push([pts[1], pts[2]]);
          }
        }
      }
    }
    // join segments sharing an edge key
    var byKey = {};
    segs.forEach(function (s, k) {
      (byKey[s[0][0]] = byKey[s[0][0]] || []).push(k);
      (byKey[s[1][0]] = byKey[s[1][0]] || []).push(k);
    });
    var used = new Array(segs.length), lines = [];
    function extend(line, key) {
      for (;;) {
        var next = (byKey[key] || []).filter(function (k) { return !used[k]; })[0];
        if (next === undefined) { return; }
        used[next] = true;
        var s = segs[next], far = s[0][0] === key ? s[1] : s[0];
        line.push([far[1], far[2]]);
        key = far[0];
      }
    }
    segs.forEach(function (s, k) {
      if (used[k]) { return; }
      used[k] = true;
      var fwd = [[s[0][1], s[0][2]], [s[1][1], s[1][2]]];
      extend(fwd, s[1][0]);
      var back = [];
      extend(back, s[0][0]);
      lines.push(back.reverse().concat(fwd));
    });
    return lines;
  }

  // --------------------------------------------------------------------- draw
  function mix(rgb, t) {   // t = 0: white, 1: the colour
    return [255 + (rgb[0] - 255) * t, 255 + (rgb[1] - 255) * t, 255 + (rgb[2] - 255) * t];
  }
  function renderRegions(r) {
    var g = r.grid, nx = g.nx, ny = g.ny;
    regionCanvas.width = nx;
    regionCanvas.height = ny;
    var rctx = regionCanvas.getContext('2d');
    var img = rctx.createImageData(nx, ny);
    var neg = CLASS_COLORS[String(r.classes[0])], pos = CLASS_COLORS[String(r.classes[1])] || neg;
    var scale = g.margin_level || 0;
    if (g.kind === 'binary' && !scale) {           // no margin (zero-one): scale by the values
      g.values.forEach(function (v) { if (v !== null) { scale = Math.max(scale, Math.abs(v) / 2.5); } });
      scale = scale || 1;
    }
    for (var j = 0; j < ny; j++) {
      for (var i = 0; i < nx; i++) {
        var val = g.values[j * nx + i], col;
        if (val === null) {
          col = [255, 255, 255];
        } else if (g.kind === 'binary') {
          var t = Math.min(1, Math.abs(val) / (2.5 * scale));
          col = mix(val >= 0 ? pos : neg, 0.1 + 0.45 * Math.sqrt(t));
        } else {
          col = mix(CLASS_COLORS[String(r.classes[val])], 0.35);
        }
        var o = ((ny - 1 - j) * nx + i) * 4;
        img.data[o] = col[0]; img.data[o + 1] = col[1]; img.data[o + 2] = col[2]; img.data[o + 3] = 255;
      }
    }
    rctx.putImageData(img, 0, 0);
  }
  function gridToPx(g, gx, gy) {
    var x = g.xmin + gx / (g.nx - 1) * (g.xmax - g.xmin);
    var y = g.ymin + gy / (g.ny - 1) * (g.ymax - g.ymin);
    return toPx(x, y);
  }
  function strokeLines(g, lines) {
    lines.forEach(function (line) {
      ctx.beginPath();
      line.forEach(function (p, k) {
        var q = gridToPx(g, p[0], p[1]);
        if (k === 0) { ctx.moveTo(q[0], q[1]); } else { ctx.lineTo(q[0], q[1]); }
      });
      ctx.stroke();
    });
  }
  function lengthOf(g, lines) {
    var total = 0;
    lines.forEach(function (line) {
      for (var k = 1; k < line.length; k++) {
        var a = gridToPx(g, line[k - 1][0], line[k - 1][1]), b = gridToPx(g, line[k][0], line[k][1]);
        total += Math.hypot(b[0] - a[0], b[1] - a[1]);
      }
    });
    return total;
  }
  function drawAxes() {
    var v = state.view, span = v.xmax - v.xmin;
    var step = Math.pow(10, Math.floor(Math.log10(span / 4)));
    if (span / step > 12) { step *= 5; } else if (span / step > 6) { step *= 2; }
    ctx.save();
    ctx.strokeStyle = 'rgba(0,0,0,0.08)';
    ctx.fillStyle = 'rgba(0,0,0,0.45)';
    ctx.lineWidth = 1;
    ctx.font = '10px sans-serif';
    var s = size(), x, y, q;
    for (x = Math.ceil(v.xmin / step) * step; x <= v.xmax; x += step) {
      q = toPx(x, 0);
      ctx.beginPath(); ctx.moveTo(q[0], 0); ctx.lineTo(q[0], s.h); ctx.stroke();
      ctx.fillText(fmt(x, 3), q[0] + 2, s.h - 3);
    }
    for (y = Math.ceil(v.ymin / step) * step; y <= v.ymax; y += step) {
      q = toPx(0, y);
      ctx.beginPath(); ctx.moveTo(0, q[1]); ctx.lineTo(s.w, q[1]); ctx.stroke();
      ctx.fillText(fmt(y, 3), 2, q[1] - 2);
    }
    ctx.restore();
  }
  function draw() {
    var s = size(), dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(s.w * dpr) || canvas.height !== Math.round(s.h * dpr)) {
      canvas.width = Math.round(s.w * dpr);
      canvas.height = Math.round(s.h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, s.w, s.h);
    var r = state.result, signature = 'none';
    if (r) {
      var g = r.grid;
      renderRegions(r);
      var dx = (g.xmax - g.xmin) / (g.nx - 1) / 2, dy = (g.ymax - g.ymin) / (g.ny - 1) / 2;
      var p0 = toPx(g.xmin - dx, g.ymax + dy), p1 = toPx(g.xmax + dx, g.ymin - dy);
      ctx.save();
      ctx.globalAlpha = state.resultStale ? 0.45 : 1;
      ctx.imageSmoothingEnabled = true;
      ctx.drawImage(regionCanvas, p0[0], p0[1], p1[0] - p0[0], p1[1] - p0[1]);
      ctx.restore();
      drawAxes();
      ctx.save();
      ctx.globalAlpha = state.resultStale ? 0.45 : 1;
      ctx.strokeStyle = '#111';
      ctx.lineJoin = 'round';
      if (g.kind === 'binary') {
        var zero = contour(g.values, g.nx, g.ny, 0);
        ctx.lineWidth = 2.2;
        strokeLines(g, zero);
        ctx.lineWidth = 1.2;
        if (g.margin_level) {                    // f = -r and f = +r
          ctx.setLineDash([7, 5]);
          strokeLines(g, contour(g.values, g.nx, g.ny, -g.margin_level));
          strokeLines(g, contour(g.values, g.nx, g.ny, g.margin_level));
          ctx.setLineDash([]);
        }
        signature = zero.length + ':' + lengthOf(g, zero).toFixed(1);
      } else {
        var all = [];
        ctx.lineWidth = 1.8;
        r.classes.forEach(function (c, k) {
          // smooth borders from the server's per-class fields, else the class indicator
          var lines = g.borders ? contour(g.borders[k], g.nx, g.ny, 0) :
            contour(g.values.map(function (v) { return v === k ? 1 : 0; }), g.nx, g.ny, 0.5);
          strokeLines(g, lines);
          all = all.concat(lines);
        });
        signature = all.length + ':' + lengthOf(g, all).toFixed(1);
      }
      ctx.restore();
    } else {
      drawAxes();
    }
    state.boundary = signature;
    canvas.dataset.boundary = signature;
    drawBanner(r && !state.resultStale ? r : null);

    // points: training large with an edge, test small without
    var sv = {};
    if (r && !state.resultStale) { r.support.forEach(function (k) { sv[r.ids[k]] = 1; }); }
    var every = allTrain();
    state.points.forEach(function (p) {
      var q = toPx(p.x, p.y), col = CLASS_COLORS[String(p.label)];
      ctx.beginPath();
      if (isTrain(p, every)) {
        ctx.arc(q[0], q[1], 5.5, 0, 2 * Math.PI);
        ctx.fillStyle = 'rgb(' + col.join(',') + ')';
        ctx.fill();
        ctx.lineWidth = 1;
        ctx.strokeStyle = '#000';
        ctx.stroke();
      } else {
        ctx.arc(q[0], q[1], 2.8, 0, 2 * Math.PI);
        ctx.fillStyle = 'rgb(' + col.join(',') + ')';
        ctx.fill();
      }
      if (sv[p.id]) {
        ctx.beginPath();
        ctx.arc(q[0], q[1], 9.5, 0, 2 * Math.PI);
        ctx.lineWidth = 1.6;
        ctx.strokeStyle = '#000';
        ctx.stroke();
      }
    });
    canvas.dataset.points = String(state.points.length);
    canvas.dataset.support = String(Object.keys(sv).length);
  }

  // A fit that did not converge is no answer: a banner over the canvas and a frame around it.
  function drawBanner(r) {
    var text = '';
    if (r && !r.numbers.converged) {
      var limit = state.options ? state.options.limits.fit_time_limit : null;
      text = r.numbers.stopped === 'time' ?
        'Stopped at the time limit' + (limit ? ' (' + fmt(limit, 3) + ' s)' : '') +
        ': not converged. The picture shows where the solver got to.' :
        'The solver stopped before converging: not converged. The picture shows where it got to.';
    }
    var banner = $('canvas-banner');
    banner.textContent = text;
    banner.classList.toggle('hidden', !text);
    canvas.dataset.banner = text ? (r.numbers.stopped === 'time' ? 'time-limit' : 'not-converged') : '';
    if (text) {
      var s = size();
      ctx.save();
      ctx.strokeStyle = 'rgba(138, 90, 0, 0.92)';
      ctx.lineWidth = 6;
      ctx.setLineDash([14, 8]);
      ctx.strokeRect(3, 3, s.w - 6, s.h - 6);
      ctx.restore();
    }
  }

  // ------------------------------------------------------------------- events
  function pointerPos(ev) {       // CSS pixels from the canvas's drawing area (inside its border)
    var rect = canvas.getBoundingClientRect();
    return [ev.clientX - rect.left - canvas.clientLeft, ev.clientY - rect.top - canvas.clientTop];
  }
  var drag = null;
  function onDown(ev) {
    ev.preventDefault();
    var pos = pointerPos(ev);
    var erase = state.mode === 'erase' || ev.button === 2 || ev.shiftKey;
    snapshot();
    drag = { erase: erase, last: pos, changed: false };
    canvas.setPointerCapture(ev.pointerId);
    if (erase) {
      drag.changed = eraseNear(pos[0], pos[1]);
    } else {
      var max = state.options ? state.options.limits.max_points : 5000;
      if (state.points.length < max) {
        var w = toWorld(pos[0], pos[1]);
        addPoint(w[0], w[1], state.current);
        drag.changed = true;
      }
    }
    if (drag.changed) { changed(); } else { state.history.pop(); }
  }
  function onMove(ev) {
    if (!drag) { return; }
    var pos = pointerPos(ev);
    if (drag.erase) {
      if (eraseNear(pos[0], pos[1])) { drag.changed = true; changed(); }
    } else if (Math.hypot(pos[0] - drag.last[0], pos[1] - drag.last[1]) >= PAINT_SPACING) {
      var max = state.options ? state.options.limits.max_points : 5000;
      if (state.points.length < max) {
        var w = toWorld(pos[0], pos[1]);
        addPoint(w[0], w[1], state.current);
        drag.last = pos;
        changed();
      }
    }
  }
  function onUp() { drag = null; }

  // Shortcuts work wherever the focus is (a slider, a menu, a button) except while typing text.
  function typingIn(el) {
    if (!el) { return false; }
    if (el.isContentEditable || el.tagName === 'TEXTAREA') { return true; }
    if (el.tagName !== 'INPUT') { return false; }
    var t = (el.getAttribute('type') || 'text').toLowerCase();
    return ['range', 'checkbox', 'radio', 'button', 'submit', 'reset', 'file', 'color'].indexOf(t) < 0;
  }
  function onKey(ev) {
    if (typingIn(ev.target) || ev.altKey || ev.metaKey) { return; }
    var labels = state.options ? state.options.classes : [1, -1, 2, 3, 4];
    var k = ev.key;
    if (ev.ctrlKey && k !== 'z') { return; }
    if (k >= '1' && k <= '9' && Number(k) <= labels.length) { setClass(labels[Number(k) - 1]); }
    else if (k === 'x') { setClass(state.current === 1 ? -1 : 1); }
    else if (k === 'e') { setMode('erase'); }
    else if (k === 'd') { setMode('draw'); }
    else if (k === 'z') { undo(); }
    else { return; }
    ev.preventDefault();
  }
  function undo() {
    if (!state.history.length) { return; }
    state.points = state.history.pop();
    changed();
  }

  function wire() {
    canvas.addEventListener('pointerdown', onDown);
    canvas.addEventListener('pointermove', onMove);
    canvas.addEventListener('pointerup', onUp);
    canvas.addEventListener('pointercancel', onUp);
    canvas.addEventListener('contextmenu', function (ev) { ev.preventDefault(); });
    document.addEventListener('keydown', onKey);
    $('mode-draw').addEventListener('click', function () { setMode('draw'); });
    $('mode-erase').addEventListener('click', function () { setMode('erase'); });
    $('undo').addEventListener('click', undo);
    $('clear').addEventListener('click', function () { snapshot(); state.points = []; changed(); });
    $('preset').addEventListener('change', function () {
      preset($('preset').value);
      $('preset').value = '';
    });
    $('export').addEventListener('click', downloadCsv);
    $('import').addEventListener('change', function () {
      var file = $('import').files[0];
      if (!file) { return; }
      file.text().then(function (text) {
        try { importCsv(text); } catch (e) {
          setStatus('error', 'import failed');
          showMessages([{ kind: 'error', text: 'Could not import ' + file.name + ': ' + e.message }]);
        }
        $('import').value = '';
      });
    });
    ['formulation', 'solver', 'kernel', 'degree', 'coef0', 'sigma-auto'].forEach(function (id) {
      $(id).addEventListener('change', function () { syncControls(); requestFit(); });
    });
    ['C', 'sigma', 'gamma', 'split'].forEach(function (id) {
      $(id).addEventListener('input', function () { syncControls(); draw(); requestFit(); });
    });
    $('resplit').addEventListener('click', function () {
      state.points.forEach(function (p) { p.u = splitRandom(); });
      changed();
    });
    window.addEventListener('resize', draw);
    if (window.ResizeObserver) { new ResizeObserver(function () { draw(); }).observe(canvas); }
  }

  function init() {
    canvas = $('canvas');
    ctx = canvas.getContext('2d');
    regionCanvas = document.createElement('canvas');
    wire();
    draw();
    fetch('api/options').then(function (r) {
      if (!r.ok) { throw new Error('HTTP ' + r.status); }
      return r.json();
    }).then(function (o) {
      state.options = o;
      fillSelect($('formulation'), o.formulations, FORMULATION_NAMES);
      var solverNames = Object.assign({}, SOLVER_NAMES);
      Object.keys(o.unavailable || {}).forEach(function (sv) {
        solverNames[sv] = (SOLVER_NAMES[sv] || sv) + ' (not installed)';
      });
      fillSelect($('solver'), o.solvers, solverNames);
      Array.prototype.forEach.call($('solver').options, function (opt) {
        if ((o.unavailable || {})[opt.value]) { opt.title = 'not available here: ' + o.unavailable[opt.value]; }
      });
      fillSelect($('kernel'), o.kernels, {});
      var d = o.defaults;
      if (o.formulations.indexOf(d.formulation) >= 0) { $('formulation').value = d.formulation; }
      if (o.solvers.indexOf(d.solver) >= 0) { $('solver').value = d.solver; }
      $('kernel').value = d.kernel;
      $('C').value = Math.log10(d.C);
      $('sigma').value = Math.log10(d.sigma);
      $('gamma').value = Math.log10(d.gamma);
      $('degree').value = String(d.degree);
      $('coef0').value = String(d.coef0);
      $('split').value = String(d.train_percent);
      buildClassBar();
      syncControls();
      setStatus('idle', 'ready');
      fitNow();
    }).catch(function (e) {
      setStatus('error', 'no server');
      showMessages([{ kind: 'error', text: 'Could not read /api/options: ' + e.message }]);
    });
  }

  // for tests and the curious: window.maxmarginPlayground
  window.maxmarginPlayground = {
    state: state, fitNow: fitNow, preset: preset, exportCsv: exportCsv, importCsv: importCsv,
    parseCsv: parseCsv, contour: contour
  };
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
}());
