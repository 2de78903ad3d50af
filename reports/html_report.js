// html_report.js — the plots of a `cpparity report` page, drawn with Chart.js (inlined before
// this script) from the JSON block #report-data (written by reports/html_report_charts.c), and
// the tables of an item's tensors, drawn from the same block (reports/html_report_tensors.c) when
// a reader opens the item (its <details>, or a link to #item-N / #tensors-N); the tables of
// failed items, open from the start, are drawn at once.
//
// The page's text, grid and open tables are drawn by the time this script ends (<html>
// data-page-ms: milliseconds from the start of its loading); the plots after it, those near the
// window first. When every plot is created and painted, <html> gets data-report="rendered",
// data-charts-drawn and data-render-ms; any error (here, in Chart.js, or on the console) makes
// it data-report="error" and is listed in #render-errors. tests/browser_report.sh reads both.
(function () {
  'use strict';
  var root = document.documentElement;
  var palette = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
                 '#ff9da7', '#9c755f', '#bab0ac'];
  var limitColour = '#cf222e';
  var decoration = { boundary: '#1d2129', document: '#8250df', padding: 'rgba(150,150,150,0.25)',
                     automatic: 'rgba(212,167,44,0.25)' };

  function colour(index) { return palette[index % palette.length]; }

  // The range of a log axis over values (numbers; "nonfinite", null, 0 ignored), with room for
  // zeros drawn below it and non-finite values drawn above it.
  function logRange(values, extra) {
    var low = Infinity, high = -Infinity, zeros = 0, nonfinite = 0;
    values.concat(extra || []).forEach(function (value) {
      if (value === 'nonfinite') { nonfinite++; return; }
      if (typeof value !== 'number') { return; }
      if (value <= 0) { zeros++; return; }
      low = Math.min(low, value);
      high = Math.max(high, value);
    });
    if (!isFinite(low)) { low = 1e-8; high = 1; }
    if (high / low < 10) { low /= 3; high *= 3; }
    return { bottom: low / 10, top: high * 10, zeros: zeros, nonfinite: nonfinite };
  }

  // A measured value placed on a log axis: zeros at the bottom, non-finite at the top.
  function place(value, range) {
    if (value === 'nonfinite') { return range.top; }
    if (typeof value !== 'number') { return null; }
    return value <= 0 ? range.bottom : value;
  }

  function describe(value) {
    if (value === 'nonfinite') { return 'non-finite'; }
    if (value === null || value === undefined) { return 'not compared'; }
    return value === 0 ? '0' : Number(value).toPrecision(3);
  }

  function logAxis(title, range) {
    return { type: 'logarithmic', min: range.bottom, max: range.top,
             title: { display: true, text: title },
             ticks: { callback: function (value) {
               var exponent = Math.log10(value);
               return Math.abs(exponent - Math.round(exponent)) < 1e-9 ? '1e' + Math.round(exponent) : '';
             } } };
  }

  function note(spec, text) {
    var element = document.querySelector('[data-note-for="' + spec.canvas + '"]');
    if (element) { element.textContent = text; }
  }

  function notOurs(item) { return !item.dataset.decoration; }

  // Each case's worst error / limit, run after run; the line at 1 is the limit.
  function trend(canvas, spec) {
    var all = [];
    spec.series.forEach(function (series) { all = all.concat(series.values); });
    var range = logRange(all, [1]);
    var datasets = spec.series.map(function (series, index) {
      return { label: series.name, data: series.values.map(function (v) { return place(v, range); }),
               raw: series.values, borderColor: colour(index), backgroundColor: colour(index),
               pointStyle: series.values.map(function (v) { return v === 'nonfinite' ? 'triangle' : 'circle'; }),
               pointRadius: series.values.map(function (v) { return v === 'nonfinite' ? 6 : 3; }),
               spanGaps: false };
    });
    datasets.push({ label: 'limit', data: spec.labels.map(function () { return 1; }), decoration: true,
                    borderColor: limitColour, borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5 });
    return new Chart(canvas, {
      type: 'line', data: { labels: spec.labels, datasets: datasets },
      options: { scales: { y: logAxis('worst error / limit', range) },
                 plugins: { legend: { labels: { boxWidth: 10, font: { size: 10 } } },
                            tooltip: { filter: notOurs, callbacks: { label: function (context) {
                              return context.dataset.label + ': ' +
                                describe(context.dataset.raw[context.dataIndex]);
                            } } } } } });
  }

  // Error against limit, one point per tensor and rank, both axes log; the diagonal is the limit
  // (of the rule that decided each tensor). The points are the rows of each series' item.
  function limits(canvas, spec) {
    var values = [], skipped = 0;
    var series = spec.series.map(function (one) {
      var points = tensorRows(one.item).map(function (row) {
        var error = row[12] > 0 || typeof row[2] !== 'number' ? 'nonfinite' : row[2];
        return [row[3], error, data.names[row[0]] + '@rank' + row[1], row[11] & 1,
                data.rules[row[4]]];
      });
      points.forEach(function (point) { values.push(point[0], point[1]); });
      return { name: one.name, points: points };
    });
    var range = logRange(values);
    var datasets = series.map(function (one, index) {
      var points = one.points.filter(function (point) {
        var usable = typeof point[0] === 'number' && point[0] > 0;
        skipped += usable ? 0 : 1;
        return usable;
      }).map(function (point) {
        return { x: point[0], y: place(point[1], range), error: point[1], tensor: point[2],
                 passed: point[3] === 1, rule: point[4] };
      });
      return { label: one.name, data: points, borderColor: colour(index),
               backgroundColor: colour(index),
               pointStyle: points.map(function (p) { return p.passed ? 'circle' : 'crossRot'; }),
               pointRadius: points.map(function (p) { return p.passed ? 3 : 7; }),
               pointBorderWidth: points.map(function (p) { return p.passed ? 1 : 2.5; }) };
    });
    datasets.push({ type: 'line', label: 'error = limit', decoration: true,
                    data: [{ x: range.bottom, y: range.bottom }, { x: range.top, y: range.top }],
                    borderColor: limitColour, borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5 });
    var remarks = [];
    if (range.zeros) { remarks.push(range.zeros + ' error(s) exactly 0, drawn at the bottom'); }
    if (range.nonfinite) { remarks.push(range.nonfinite + ' non-finite error(s), drawn at the top'); }
    if (skipped) { remarks.push(skipped + ' tensor(s) without a positive limit, not drawn'); }
    note(spec, remarks.join('; '));
    return new Chart(canvas, {
      type: 'scatter', data: { datasets: datasets },
      options: { scales: { x: logAxis('limit (of the deciding rule)', range),
                           y: logAxis('error (relative L2)', range) },
                 plugins: { legend: { labels: { boxWidth: 10, font: { size: 10 } } },
                            tooltip: { filter: notOurs, callbacks: { label: function (context) {
                              var p = context.raw;
                              return p.tensor + ' (' + context.dataset.label + '): error ' +
                                describe(p.error) + ', limit ' + describe(p.x) + ' (' + p.rule +
                                ')' + (p.passed ? '' : ' FAIL');
                            } } } } } });
  }

  // A vertical line at each position, across the range (a dataset: no drawing code of ours).
  function verticals(label, positions, range, style) {
    var data = [];
    positions.forEach(function (x) {
      data.push({ x: x, y: range.bottom }, { x: x, y: range.top }, { x: x, y: null });
    });
    return Object.assign({ label: label, data: data, decoration: true, pointRadius: 0,
                           spanGaps: false, borderWidth: 1 }, style);
  }

  // Shaded bands over [start, end) intervals, filled down to the axis.
  function bands(label, intervals, range, fill) {
    var data = [];
    intervals.forEach(function (interval) {
      data.push({ x: interval[0], y: range.top }, { x: interval[1], y: range.top },
                { x: interval[1], y: null });
    });
    return { label: label, data: data, decoration: true, pointRadius: 0, borderWidth: 0,
             backgroundColor: fill, borderColor: fill, fill: 'start', spanGaps: false };
  }

  // A point with no drawn neighbour (a rank holding isolated positions) gets a dot.
  function isolatedRadius(context) {
    var data = context.dataset.data, i = context.dataIndex;
    var before = i > 0 && data[i - 1].y !== null, after = i + 1 < data.length && data[i + 1].y !== null;
    return before || after ? 0 : 2;
  }

  // item.ranks holds one entry per run of consecutive positions of a rank (a contiguous layout:
  // one per rank; zigzag: two), at its global positions; a rank's runs share one line.
  function profileDatasets(spec, item) {
    var values = [];
    item.ranks.forEach(function (run) {
      values = values.concat(run.error, [run.limit], run.limits || []);
    });
    var range = logRange(values);
    var byRank = {}, order = [];
    item.ranks.forEach(function (run) {
      if (!(run.rank in byRank)) { byRank[run.rank] = []; order.push(run.rank); }
      var data = byRank[run.rank], bin = run.bin || item.bin;
      if (data.length) { data.push({ x: run.offset, y: null, error: null }); }
      run.error.forEach(function (v, j) {
        data.push({ x: run.offset + j * bin, y: place(v, range), error: v });
      });
    });
    var datasets = order.map(function (rank, index) {
      return { label: 'rank ' + rank, borderColor: colour(index), backgroundColor: colour(index),
               data: byRank[rank], pointRadius: isolatedRadius, borderWidth: 1.5,
               spanGaps: false };
    });
    var limitData = [];
    item.ranks.forEach(function (run) {
      if (typeof run.limit === 'number') {
        limitData.push({ x: run.offset, y: run.limit },
                       { x: run.offset + run.length - 1, y: run.limit },
                       { x: run.offset + run.length - 1, y: null });
      }
    });
    datasets.push({ label: "limit of the rank's slice", data: limitData, decoration: true,
                    borderColor: limitColour, borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5,
                    spanGaps: false });
    // Each position's own limit (the per-position rule), at the position each point shows.
    var ownLimits = [];
    item.ranks.forEach(function (run) {
      if (!run.limits) { return; }
      var bin = run.bin || item.bin;
      if (ownLimits.length) { ownLimits.push({ x: run.offset, y: null }); }
      run.limits.forEach(function (v, j) {
        ownLimits.push({ x: run.offset + j * bin, y: typeof v === 'number' ? place(v, range) : null });
      });
    });
    if (ownLimits.length) {
      datasets.push({ label: "each position's own limit", data: ownLimits, decoration: true,
                      borderColor: limitColour, borderDash: [1, 3], pointRadius: 0,
                      borderWidth: 1, spanGaps: false });
    }
    var boundaries = [];
    item.ranks.forEach(function (run) {
      if (run.offset > 0 && run.length < item.padded && boundaries.indexOf(run.offset) < 0) {
        boundaries.push(run.offset);
      }
    });
    if (boundaries.length) {
      datasets.push(verticals('rank boundary', boundaries, range,
                              { borderColor: decoration.boundary, borderWidth: 1.5 }));
    }
    if (spec.documents.length) {
      datasets.push(verticals('document start', spec.documents, range,
                              { borderColor: decoration.document, borderDash: [2, 3] }));
    }
    if (spec.padding.length) {
      datasets.push(bands('padding (some row)', spec.padding, range, decoration.padding));
    }
    if (spec.seq_len > 0 && item.padded > spec.seq_len) {
      datasets.push(bands('automatic padding', [[spec.seq_len, item.padded]], range,
                          decoration.automatic));
    }
    return { datasets: datasets, range: range };
  }

  function profileNote(spec, item, range) {
    var remarks = [];
    if (item.layout && item.layout !== 'contiguous') {
      remarks.push('layout ' + item.layout + ': each rank drawn at the global positions it holds');
    }
    if (item.bin > 1) { remarks.push('each point is the largest error of ' + item.bin + ' positions'); }
    if (range.zeros) { remarks.push('errors of exactly 0 drawn at the bottom'); }
    remarks.push('gaps: no logits compared there (fully masked rows, padding)');
    note(spec, remarks.join('; '));
  }

  // The logits error along the sequence of one item at a time (the <select> picks it).
  function profile(canvas, spec) {
    var item = spec.items[spec.initial];
    var built = profileDatasets(spec, item);
    var chart = new Chart(canvas, {
      type: 'line', data: { datasets: built.datasets },
      options: { parsing: true,
                 scales: { x: { type: 'linear', min: 0, max: item.padded,
                                title: { display: true, text: 'global position' } },
                           y: logAxis('logits error (relative L2 per position)', built.range) },
                 plugins: { legend: { labels: { boxWidth: 10, font: { size: 10 } } },
                            tooltip: { filter: notOurs, callbacks: { label: function (context) {
                              return context.dataset.label + ' position ' + context.raw.x + ': ' +
                                describe(context.raw.error);
                            } } } } } });
    profileNote(spec, item, built.range);
    var select = document.getElementById('select-' + spec.canvas);
    spec.items.forEach(function (candidate, index) {
      var option = document.createElement('option');
      option.value = String(index);
      option.textContent = candidate.name;
      option.selected = index === spec.initial;
      select.appendChild(option);
    });
    select.addEventListener('change', function () {
      var chosen = spec.items[Number(select.value)];
      var rebuilt = profileDatasets(spec, chosen);
      chart.data.datasets = rebuilt.datasets;
      chart.options.scales.x.max = chosen.padded;
      chart.options.scales.y = logAxis('logits error (relative L2 per position)', rebuilt.range);
      chart.update();
      profileNote(spec, chosen, rebuilt.range);
    });
    return chart;
  }

  // Gradient error / limit per layer, one line per item; the line at 1 is the limit.
  function layers(canvas, spec) {
    var all = [];
    spec.series.forEach(function (series) { all = all.concat(series.values); });
    var range = logRange(all, [1]);
    var datasets = spec.series.map(function (series, index) {
      return { label: series.name, raw: series.values, tensors: series.tensors,
               data: series.values.map(function (v) { return place(v, range); }),
               borderColor: colour(index), backgroundColor: colour(index), pointRadius: 3,
               spanGaps: false };
    });
    datasets.push({ label: 'limit', data: spec.labels.map(function () { return 1; }), decoration: true,
                    borderColor: limitColour, borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5 });
    return new Chart(canvas, {
      type: 'line', data: { labels: spec.labels, datasets: datasets },
      options: { scales: { y: logAxis('error / limit', range) },
                 plugins: { legend: { labels: { boxWidth: 10, font: { size: 10 } } },
                            tooltip: { filter: notOurs, callbacks: { label: function (context) {
                              var d = context.dataset;
                              return d.label + ': ' + describe(d.raw[context.dataIndex]) + ' (' +
                                d.tensors[context.dataIndex] + ')';
                            } } } } } });
  }

  // Pixels of the canvas that were painted (not transparent).
  function painted(canvas) {
    var image = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    var count = 0;
    for (var i = 3; i < image.length; i += 4) { count += image[i] !== 0 ? 1 : 0; }
    return count;
  }

  // Points drawn by the datasets that hold data (not the limit lines, boundaries or bands).
  function points(chart) {
    var count = 0;
    chart.data.datasets.forEach(function (dataset, index) {
      if (!dataset.decoration) { count += chart.getDatasetMeta(index).data.length; }
    });
    return count;
  }

  // ---- the tables of an item's tensors, from data.items (reports/html_report_tensors.c) ----

  var data = null; // the JSON block, parsed once below

  // The rows of item index: [name, rank, error, limit, rule, error / limit, naive-rule limit,
  // CP-only limit, naive error, tolerance, reason, flags, non-finite count]; a bare rank in the
  // data repeats the row before it on that rank.
  function tensorRows(index) {
    var rows = [];
    (data.items[index] || []).forEach(function (row) {
      if (typeof row === 'number') {
        var repeated = rows[rows.length - 1].slice();
        repeated[1] = row;
        row = repeated;
      }
      rows.push(row);
    });
    return rows;
  }

  // "e-06", "e+04": an exponent as C's printf writes it, two digits at least.
  function exponentText(exponent) {
    var magnitude = Math.abs(exponent);
    return 'e' + (exponent < 0 ? '-' : '+') + (magnitude < 10 ? '0' : '') + magnitude;
  }

  // A number as the C side's %.3g writes it ("1.53e-06", "0.0115", "7.35e+04"); null is NaN,
  // the strings "inf" and "-inf" are themselves.
  function number(value) {
    if (value === null || value === undefined) { return 'NaN'; }
    if (typeof value !== 'number') { return String(value); }
    if (value === 0) { return '0'; }
    var parts = value.toExponential(2).split('e'), exponent = Number(parts[1]);
    if (exponent < -4 || exponent >= 3) {
      return parts[0].replace(/\.?0+$/, '') + exponentText(exponent);
    }
    return String(Number(value.toPrecision(3)));
  }

  // %.2e as C writes it ("1.15e-02"), for the numbers of a reason.
  function scientific(value) {
    var parts = value.toExponential(2).split('e');
    return parts[0] + exponentText(Number(parts[1]));
  }

  // A row's reason: a template's {e}, {l}, {c} and {b} are its error, limit, CP-only limit and
  // naive error; a one-string array is a reason taken literally.
  function reasonOf(row) {
    var entry = data.reasons[row[10]];
    if (Array.isArray(entry)) { return entry[0]; }
    var fields = { e: row[2], l: row[6], c: row[7], b: row[8] };
    return entry.replace(/\{([elcb])\}/g, function (whole, mark) {
      return typeof fields[mark] === 'number' ? scientific(fields[mark]) : whole;
    });
  }

  function addCell(tr, text, className) {
    var td = document.createElement('td');
    td.textContent = text;
    if (className) { td.className = className; }
    tr.appendChild(td);
    return td;
  }

  function addBold(td, text) {
    var bold = document.createElement('b');
    bold.textContent = text;
    td.appendChild(bold);
  }

  var tensorColumns = ['tensor', 'rank', 'error', 'limit (rule)', 'error / limit',
                       'naive-rule limit', 'CP-only limit', 'naive error', 'tolerance', 'origin',
                       'verdict', 'reason'];

  // Draws the table of the item of a <details class="tensors" data-item="N"> into it, once;
  // returns the rows drawn.
  function drawTensors(details) {
    if (details.getAttribute('data-drawn') === 'yes') { return 0; }
    details.setAttribute('data-drawn', 'yes');
    var rows = tensorRows(Number(details.getAttribute('data-item')));
    var table = document.createElement('table');
    table.className = 'tensors';
    var head = table.createTHead().insertRow();
    tensorColumns.forEach(function (name) {
      var th = document.createElement('th');
      th.textContent = name;
      head.appendChild(th);
    });
    var body = document.createElement('tbody');
    rows.forEach(function (row) {
      var tr = document.createElement('tr');
      var passed = (row[11] & 1) === 1;
      var tolerance = data.tolerances[row[9]];
      if (!passed) { tr.className = 'failed'; }
      addCell(tr, data.names[row[0]]);
      addCell(tr, String(row[1]));
      var error = addCell(tr, number(row[2]) + (row[11] & 2 ? ' (absolute)' : ''));
      if (row[12] > 0) { addBold(error, ' ' + row[12] + ' non-finite'); }
      addCell(tr, number(row[3]) + ' (' + data.rules[row[4]] + ')');
      addCell(tr, number(row[5]));
      addCell(tr, number(row[6]));
      addCell(tr, row[7] === null ? '' : number(row[7]));
      addCell(tr, number(row[8]));
      addCell(tr, '\u2264 ' + number(tolerance[0]) + ' \u00d7 naive + ' + number(tolerance[1]) +
              '; naive \u2264 ' + number(tolerance[2]));
      addCell(tr, 'ratio ' + tolerance[3] + ', floor ' + tolerance[4] + ', ceiling ' +
              tolerance[5]);
      var verdict = addCell(tr, passed ? 'pass' : '');
      if (!passed) { addBold(verdict, 'FAIL'); }
      addCell(tr, reasonOf(row), 'message');
      body.appendChild(tr);
    });
    table.appendChild(body);
    details.appendChild(table);
    return rows.length;
  }

  // An error after this script's first run: kept for the mark, or listed and marked when the
  // page is already marked.
  function lateError(message) {
    window.reportErrors.push(message);
    if (finished) {
      var entry = document.createElement('li');
      entry.textContent = message;
      document.getElementById('render-errors').appendChild(entry);
      root.setAttribute('data-report', 'error');
    }
  }

  function drawOrReport(details, late) {
    try {
      return drawTensors(details);
    } catch (error) {
      var message = 'the tensors of ' + details.id + ' could not be drawn: ' + error;
      if (late) { lateError(message); } else { window.reportErrors.push(message); }
      return 0;
    }
  }

  // #item-N (a chip of the grid, a failure's link) or #tensors-N opens the item's tensors.
  function openFromHash(late) {
    var match = /^#(?:item|tensors)-(\d+)$/.exec(window.location.hash);
    var details = match && document.getElementById('tensors-' + match[1]);
    if (details) {
      details.open = true;
      drawOrReport(details, late !== false);
    }
  }

  // Open tables first drawn at load: up to this many rows with the page, the rest one table per
  // task after it, so a run where everything failed still shows its page at once.
  var rowsDrawnAtLoad = 3000;

  function drawTables() {
    document.addEventListener('toggle', function (event) {
      var details = event.target;
      if (details.open && details.classList && details.classList.contains('tensors')) {
        drawOrReport(details, true);
      }
    }, true);
    window.addEventListener('hashchange', function () { openFromHash(true); });
    openFromHash(false);
    var pending = Array.prototype.slice.call(document.querySelectorAll('details.tensors[open]'));
    var rows = 0;
    while (pending.length && rows < rowsDrawnAtLoad) { rows += drawOrReport(pending.shift(), false); }
    function drawLater() {
      if (pending.length) {
        drawOrReport(pending.shift(), true);
        setTimeout(drawLater, 0);
      }
    }
    setTimeout(drawLater, 0);
  }

  // ---- the page ----
  //
  // The page's text, grid and open tables are drawn first; then the plots: those in or near the
  // window at once (an IntersectionObserver), the others in page order, a slice of at most
  // sliceMs per task, so a suite of thousands of items shows its page at once and stays
  // responsive while its plots are drawn. When the last one is drawn the page is marked.

  var builders = { trend: trend, limits: limits, profile: profile, layers: layers };
  var drawn = 0, attempted = 0, finished = false;
  var expected = Number(root.getAttribute('data-charts-expected')); // set by the C side
  var sliceMs = 40;     // a task of drawing leaves the page responsive (a frame or three)
  var nearWindow = '800px 0px'; // plots this close to the window are drawn before the rest
  var queue = [], observer = null;

  function drawChart(spec) {
    if (spec.attempted) { return; }
    spec.attempted = true;
    attempted++;
    try {
      var canvas = document.getElementById(spec.canvas);
      if (!canvas) { throw new Error('no canvas'); }
      if (observer) { observer.unobserve(canvas); }
      var chart = builders[spec.kind](canvas, spec);
      var paintedPixels = painted(canvas), drawnPoints = points(chart);
      canvas.setAttribute('data-painted', String(paintedPixels));
      canvas.setAttribute('data-points', String(drawnPoints));
      if (paintedPixels === 0 || drawnPoints === 0) { throw new Error('drawn blank'); }
      canvas.setAttribute('data-drawn', 'yes');
      drawn++;
    } catch (error) {
      window.reportErrors.push(spec.canvas + ' (' + spec.kind + '): ' + error);
    }
  }

  // Marks the page once: rendered when every plot is drawn and nothing went wrong.
  function finish() {
    if (finished || (data && attempted < data.charts.length)) { return; }
    finished = true;
    if (observer) { observer.disconnect(); }
    root.setAttribute('data-charts-drawn', String(drawn));
    var list = document.getElementById('render-errors');
    window.reportErrors.forEach(function (message) {
      var entry = document.createElement('li');
      entry.textContent = message;
      list.appendChild(entry);
    });
    var ok = window.reportErrors.length === 0 && drawn === expected;
    document.getElementById('render-status').textContent =
      'Plots: ' + drawn + ' of ' + expected + ' drawn' + (ok ? '.' : ', with errors (below).');
    root.setAttribute('data-render-ms', String(Math.round(performance.now())));
    root.setAttribute('data-report', ok ? 'rendered' : 'error');
  }

  function drawSlice() {
    var start = performance.now();
    while (queue.length && performance.now() - start < sliceMs) { drawChart(queue.shift()); }
    if (queue.length) { setTimeout(drawSlice, 0); } else { finish(); }
  }

  try {
    Chart.defaults.animation = false;
    Chart.defaults.responsive = true;
    Chart.defaults.maintainAspectRatio = false;
    data = JSON.parse(document.getElementById('report-data').textContent);
    if (data.charts.length !== expected) {
      throw new Error(data.charts.length + ' plots in the data, ' + expected + ' expected');
    }
    drawTables();
    queue = data.charts.slice();
    if ('IntersectionObserver' in window) {
      var byCanvas = {};
      data.charts.forEach(function (spec) { byCanvas[spec.canvas] = spec; });
      observer = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) {
          if (entry.isIntersecting) { drawChart(byCanvas[entry.target.id]); }
        });
        finish();
      }, { rootMargin: nearWindow });
      data.charts.forEach(function (spec) {
        var canvas = document.getElementById(spec.canvas);
        if (canvas) { observer.observe(canvas); }
      });
    }
    setTimeout(drawSlice, 0);
  } catch (error) {
    window.reportErrors.push('the page could not be drawn: ' + error);
    attempted = Infinity;
    finish();
  }
  // The page without its plots is drawn: how long it took from the start of its loading.
  root.setAttribute('data-page-ms', String(Math.round(performance.now())));
})();
