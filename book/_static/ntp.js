// Inline maths wider than its line scrolls sideways; every other formula has no box of its
// own that could draw a scrollbar (book/_static/ntp.css, span.math).  MathJax's glyphs stick
// out of their boxes by a pixel or two, so a scrolling box on every formula would put a
// scrollbar under most of them wherever scrollbars are drawn; here only a formula that is
// really wider than the line it sits in (a long formula on a phone, in a narrow column) gets
// one, after MathJax has typeset the page and again when the window changes size.
(() => {
  const SLACK = 6; // px of overhang that is not a wider formula
  const mark = () => {
    for (const span of document.querySelectorAll("article span.math")) {
      span.classList.remove("ntp-wide-math");
      const math = span.querySelector("mjx-container");
      // the line box: the nearest enclosing box that is not itself inline
      let box = span.parentElement;
      while (box && /^(inline|contents)/.test(getComputedStyle(box).display)) box = box.parentElement;
      if (!math || !box) continue;
      const style = getComputedStyle(box);
      const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      if (math.getBoundingClientRect().width > room + SLACK) span.classList.add("ntp-wide-math");
    }
  };
  // <html data-ntp-math="marked"> once the formulas are measured with the page's final
  // fonts and typesetting (the browser check waits for it): measured earlier, a formula set
  // in a fallback font can be marked wide and then fit, or the other way round.
  const done = () => {
    mark();
    document.documentElement.dataset.ntpMath = "marked";
  };
  let pending = null;
  const later = () => {
    delete document.documentElement.dataset.ntpMath;
    clearTimeout(pending);
    pending = setTimeout(done, 150);
  };
  window.addEventListener("load", () => {
    const ready = window.MathJax?.startup?.promise ?? Promise.resolve();
    const fonts = document.fonts?.ready ?? Promise.resolve();
    Promise.all([ready, fonts]).then(done);
    window.addEventListener("resize", later);
  });
})();
