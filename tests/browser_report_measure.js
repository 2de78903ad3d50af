// browser_report_measure.js: put by tests/browser_report_suite.sh into a copy of a
// `cpparity report` page, after everything else in its <body>, to measure the page as a browser
// draws it, whatever the page's own script says about itself (so it measures an older page the
// same way). When the page has marked itself (data-report is no longer "loading": every plot
// drawn, or an error), it forces the layout of the whole page and writes on <html>:
//   data-test-laid-out-ms  milliseconds from the start of loading to then;
//   data-test-drawn-ms     the same once the next frame is painted (what the test bounds);
//   data-test-grid-chips   chips in the cells of the case x cp grid (#grid td .chip);
//   data-test-grid-overflow chips or cells that run out of their cell or out of the window;
//   data-test-name-lines   the most lines a case's name takes in the grid's first column.
// It logs nothing and throws nothing (a page that logs fails the test).
(function () {
  'use strict';
  var root = document.documentElement;

  // Lines an element's text takes: line boxes of an inline element, or its height in lines.
  function lines(element) {
    var tops = {};
    Array.prototype.forEach.call(element.getClientRects(), function (rect) {
      tops[Math.round(rect.top)] = true;
    });
    var lineHeight = parseFloat(window.getComputedStyle(element).lineHeight);
    var byHeight = lineHeight > 0 ? Math.round(element.getBoundingClientRect().height / lineHeight)
                                  : 0;
    return Math.max(Object.keys(tops).length, byHeight);
  }

  function measure() {
    document.body.getBoundingClientRect(); // the layout of the whole page, now
    root.setAttribute('data-test-laid-out-ms', String(Math.round(performance.now())));
    // ...and painted: the next frame, then a task after it
    window.requestAnimationFrame(function () {
      setTimeout(function () {
        root.setAttribute('data-test-drawn-ms', String(Math.round(performance.now())));
      }, 0);
    });
    var width = document.documentElement.clientWidth, chips = 0, overflow = 0, nameLines = 0;
    var slack = 0.5; // sub-pixel rounding of boxes laid out side by side
    Array.prototype.forEach.call(document.querySelectorAll('#grid td'), function (cell) {
      var box = cell.getBoundingClientRect();
      overflow += box.right > width + slack ? 1 : 0;
      Array.prototype.forEach.call(cell.querySelectorAll('.chip'), function (chip) {
        var r = chip.getBoundingClientRect();
        chips++;
        overflow += r.left < box.left - slack || r.right > box.right + slack ||
                    r.top < box.top - slack || r.bottom > box.bottom + slack ||
                    r.right > width + slack ? 1 : 0;
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll('#grid tbody th'), function (th) {
      nameLines = Math.max(nameLines, lines(th.firstElementChild || th));
    });
    root.setAttribute('data-test-grid-chips', String(chips));
    root.setAttribute('data-test-grid-overflow', String(overflow));
    root.setAttribute('data-test-name-lines', String(nameLines));
  }

  function marked() { return (root.getAttribute('data-report') || 'loading') !== 'loading'; }

  if (marked()) {
    measure();
  } else {
    new MutationObserver(function (records, observer) {
      if (marked()) {
        observer.disconnect();
        measure();
      }
    }).observe(root, { attributes: true, attributeFilter: ['data-report'] });
  }
})();
