// html_report.js — the plots of a `cpparity report` page, drawn with Chart.js (inlined before
// this script) from the JSON block #report-data (written by reports/html_report_charts.c).
//
// When every plot is created and painted, <html> gets data-report="rendered" and
// data-charts-drawn; any error (here, in Chart.js, or on the console) makes it
// data-report="error" and is listed in #render-errors. tests/browser_report.sh reads both.
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

  // Error against limit, one point per tensor and rank, both axes log; the diagonal is the limit.
  function limits(canvas, spec) {
    var values = [], skipped = 0;
    spec.series.forEach(function (series) {
      series.points.forEach(function (point) { values.push(point[0], point[1]); });
    });
    var range = logRange(values);
    var datasets = spec.series.map(function (series, index) {
      var points = series.points.filter(function (point) {
        var usable = typeof point[0] === 'number' && point[0] > 0;
        skipped += usable ? 0 : 1;
        return usable;
      }).map(function (point) {
        return { x: point[0], y: place(point[1], range), error: point[1], tensor: point[2],
                 passed: point[3] === 1 };
      });
      return { label: series.name, data: points, borderColor: colour(index),
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
      options: { scales: { x: logAxis('limit', range), y: logAxis('error (relative L2)', range) },
                 plugins: { legend: { labels: { boxWidth: 10, font: { size: 10 } } },
                            tooltip: { filter: notOurs, callbacks: { label: function (context) {
                              var p = context.raw;
                              return p.tensor + ' (' + context.dataset.label + '): error ' +
                                describe(p.error) + ', limit ' + describe(p.x) +
                                (p.passed ? '' : ' FAIL');
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
    item.ranks.forEach(function (run) { values = values.concat(run.error, [run.limit]); });
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

  var builders = { trend: trend, limits: limits, profile: profile, layers: layers };
  var drawn = 0;
  var expected = Number(root.getAttribute('data-charts-expected')); // set by the C side
  try {
    Chart.defaults.animation = false;
    Chart.defaults.responsive = true;
    Chart.defaults.maintainAspectRatio = false;
    var data = JSON.parse(document.getElementById('report-data').textContent);
    if (data.charts.length !== expected) {
      throw new Error(data.charts.length + ' plots in the data, ' + expected + ' expected');
    }
    data.charts.forEach(function (spec) {
      try {
        var canvas = document.getElementById(spec.canvas);
        if (!canvas) { throw new Error('no canvas'); }
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
    });
  } catch (error) {
    window.reportErrors.push('the plots could not be drawn: ' + error);
  }
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
  root.setAttribute('data-report', ok ? 'rendered' : 'error');
})();
