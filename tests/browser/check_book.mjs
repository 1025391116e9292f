// Headless-browser check of the built book (_build/html).
//
//   node tests/browser/check_book.mjs [_build/html]   check the book
//   node tests/browser/check_book.mjs --self-test     negative controls (tests/browser/fixtures)
//   node tests/browser/check_book.mjs _build/html book/lin/   only the pages under book/lin/
//
// Serves the HTML over loopback and opens every page in Debian's chromium through
// playwright-core, at a laptop's width (1366 x 900) and at a phone's (420 x 860; its
// problems are prefixed "420 px: "), and checks, at each width: the page loads with no
// 4xx/5xx response, no failed request, no page error and no console error (none is allowed;
// sphinx-thebe's duplicate declaration of THEBE_JS_URL included: the book's extension
// removes it), and no request leaving the machine (the book ships its MathJax); all math is
// typeset by MathJax; no raw TeX (a \command or $...$) is left in the visible text, the
// printed outputs of notebook cells included (code and code cells' source apart); no word of
// the text or of a table is broken across two lines (a break at a hyphen or a slash is one),
// and no table column stands one word per line; no maths, display or inline, is cut off, runs
// into the next table cell or past the column, unless a box around it scrolls sideways; no
// table is wider than the column (on the phone: unless inside a box that scrolls sideways),
// no display equation of the text is wider than the column at the laptop's width, the page
// does not scroll sideways, and no code or output line of a notebook cell is cut at its right
// edge; the book's title at the top of the sidebar is in view when the page loads; every
// <img> has loaded and every page of an executed notebook shows at least one image; no
// internal link points at a missing file or anchor.  And, for the reader: no scrollbar under
// inline maths (Chromium runs with the classic scrollbars of a desktop -- Playwright's
// --hide-scrollbars is left out, and the run stops if scrollbars take no room); on the phone,
// a table that scrolls sideways shows it (a shade at the hidden edge); every image of the
// text links to its file at full size; no two pages share a title; one header bar, not two;
// "(quick)" printed at most once outside the page's quick banner; and every page of an
// executed notebook links back to where the book shows its figure (the figure's anchor).
// Screenshots of a few pages at both widths go to _build/screenshots/ (BROWSER_SHOTS=0: none;
// CI, where nobody looks at them, saves about 25 s of rendering).  Ends with
// "N passed, N failed".
import { createServer } from "node:http";
import { readFile, readdir, mkdir, stat } from "node:fs/promises";
import { dirname, extname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
// The pages of executed notebooks (book/executed/<figure id>.html).
const EXECUTED = /(^|\/)executed\//;
const SHOTS = resolve("_build/screenshots");
// Screenshots (a full page at 1366 px, the first screen at 420 px): <name>-<width>.png
const SHOT_PAGES = {
  "book/intro.html": "intro",
  "book/start.html": "start",
  "book/notation.html": "notation",
  "book/geo/index.html": "geo-index",
  "book/att/theory.html": "att-theory",
  "book/att/experiments.html": "att-experiments",
  "book/executed/att-exercises.html": "executed-att-exercises",
  "book/lin/index.html": "lin-index",
  "book/lin/beyond.html": "lin-beyond",
  "book/claims.html": "claims",
  "book/performance.html": "performance",
  "book/reproducibility.html": "reproducibility",
  "book/bibliography.html": "bibliography",
  "book/executed/lin-gd-direction.html": "executed-lin-gd-direction",
  "book/executed/att-plain-gd.html": "executed-att-plain-gd",
};
// Every page is read at a laptop's width and at a phone's; problems at the phone width are
// prefixed "420 px: ".  Every console error fails (none is allowed).
const VIEWPORTS = [
  { width: 1366, height: 900, narrow: false },
  { width: 420, height: 860, narrow: true },
];
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css",
  ".png": "image/png", ".svg": "image/svg+xml", ".json": "application/json",
  ".woff2": "font/woff2", ".woff": "font/woff", ".ipynb": "application/json",
  ".pdf": "application/pdf", ".txt": "text/plain", ".ico": "image/x-icon" };

async function walk(dir) {
  const out = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

function serve(root) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://localhost");
    let path = join(root, decodeURIComponent(url.pathname));
    if (!path.startsWith(root)) { res.writeHead(403); return res.end(); }
    try {
      if ((await stat(path)).isDirectory()) path = join(path, "index.html");
      const body = await readFile(path);
      res.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream" });
      res.end(body);
    } catch { res.writeHead(404); res.end("not found"); }
  });
  return new Promise((r) => server.listen(0, "127.0.0.1", () => r(server)));
}

// Runs in the page: what a reader sees, measured.  `narrow`: a phone-width screen, where a
// wide equation or table may scroll sideways inside its own container.
function inspectPage({ narrow }) {
  const visible = (el) => el.checkVisibility({ visibilityProperty: true });
  const column = document.querySelector("article.bd-article") ?? document.querySelector("main")
    ?? document.body;
  const colRect = column.getBoundingClientRect();
  const inOutput = (el) => el.closest(".cell_output");
  // Raw TeX in visible text: a \command, \( \[ delimiters, $$ or a $...$ pair.  Skipped: code
  // (blocks, inline code and the source of notebook cells), MathJax's containers and the (not
  // yet typeset) math nodes.  A notebook cell's *outputs* are text a reader reads: their
  // printed lines are checked too (a claim line printed as TeX source fails).
  const NEVER = "script, style, textarea, noscript, .math, mjx-container, .MathJax, kbd, samp";
  const CODE = "pre, code, .highlight";
  const TEX = /\\[A-Za-z]+|\\[([]|\$\$|\$[^$\s][^$]*\$/;
  const rawTex = [];
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest(NEVER) || !visible(el)) continue;
    // words are checked in the column's text, not in code blocks; inline code (an
    // identifier may wrap where it must) only in tables, where it must stay whole
    if (column.contains(el) && !el.closest("pre") && (!el.closest("code") || el.closest("td, th")))
      texts.push(n);
    const printed = inOutput(el) && el.closest("pre") && !el.closest("code");
    if (el.closest(CODE) && !printed) continue;
    const m = n.textContent.match(TEX);
    if (m) {
      const i = m.index;
      rawTex.push(n.textContent.slice(Math.max(0, i - 30), i + 40).replace(/\s+/g, " ").trim());
    }
  }
  // Words broken across two lines (a break inside a word, not at a hyphen or a slash), and
  // table cells whose text stands one word per line (a column too narrow to read).
  const lineTops = (range) => [...range.getClientRects()].filter((r) => r.width > 0.5)
    .map((r) => r.top);
  const twoLines = (tops) => tops.length > 1 && Math.max(...tops) - Math.min(...tops) > 3;
  const brokenWords = [];
  const cellWords = new Map(); // table cell -> [word count, tops of each word's first line]
  for (const n of texts) {
    const text = n.textContent;
    const cell = n.parentElement.closest("td, th");
    for (const m of text.matchAll(/[^\s\u200b]+/g)) {
      const range = document.createRange();
      if (cell) {
        range.setStart(n, m.index);
        range.setEnd(n, m.index + m[0].length);
        const tops = lineTops(range);
        if (tops.length) {
          const entry = cellWords.get(cell) ?? [0, []];
          entry[0] += 1;
          entry[1].push(Math.round(Math.min(...tops)));
          cellWords.set(cell, entry);
        }
      }
      // pieces between break opportunities: after a hyphen, dash or slash
      let at = m.index;
      for (const piece of m[0].split(/(?<=[-\u2010\u2013\u2014/])/)) {
        if (piece.length > 1) {
          range.setStart(n, at);
          range.setEnd(n, at + piece.length);
          if (twoLines(lineTops(range))) brokenWords.push(m[0].slice(0, 60));
        }
        at += piece.length;
      }
    }
  }
  // Lines of a cell: word tops more than 6 px apart (half a line) start a new line; inline
  // code, set smaller, has its text a few pixels below the words beside it on the same line.
  const countLines = (tops) => [...tops].sort((a, b) => a - b)
    .reduce(([n, start], t) => (t - start > 6 ? [n + 1, t] : [n, start]), [0, -Infinity])[0];
  const oneWordColumns = [];
  for (const [cell, [count, tops]] of cellWords) {
    const lines = countLines(tops);
    if (count >= 4 && lines >= count)
      oneWordColumns.push(cell.textContent.replace(/\s+/g, " ").trim().slice(0, 60));
  }
  // Tables wider than the content column: at full width none (notebook outputs apart); on a
  // phone-width screen only inside a container that scrolls sideways within the column.
  // a box inside the column that scrolls sideways (the column itself scrolling, or the page,
  // would move the whole text)
  const scrolls = (a) => ["auto", "scroll"].includes(getComputedStyle(a).overflowX)
    && a !== column && column.contains(a) && a.getBoundingClientRect().right <= colRect.right + 1;
  const scroller = (el) => {
    for (let a = el.parentElement; a && a !== column; a = a.parentElement) if (scrolls(a)) return a;
    return null;
  };
  const wideTables = [...column.querySelectorAll("table")]
    .filter((t) => visible(t) && (narrow || !inOutput(t)))
    .filter((t) => t.getBoundingClientRect().right > colRect.right + 1
      || t.scrollWidth > (t.parentElement?.clientWidth ?? Infinity) + 1)
    .filter((t) => !narrow || !scroller(t))
    .map((t) => `${Math.round(t.scrollWidth)} px in ${Math.round(column.clientWidth)} px`
      + (narrow ? ", not in a scroll container" : ""));
  // Display equations must fit the column at full width (a wider one hides behind a scrollbar).
  const wideMath = narrow ? [] : [...column.querySelectorAll('mjx-container[display="true"]')]
    .filter((m) => visible(m) && !inOutput(m) && m.scrollWidth > m.clientWidth + 1)
    .map((m) => {
      const label = m.closest(".math")?.querySelector(".eqno")?.textContent.replace("#", "")
        ?? m.closest("[id]")?.id ?? "";
      return `${label} ${Math.round(m.scrollWidth)} px in ${Math.round(m.clientWidth)} px`.trim();
    });
  // Maths, display or inline, must not be clipped: where it is wider than a box around it,
  // a box on the way (inside the column) scrolls sideways, so the reader can scroll to it;
  // otherwise it is cut off (a box that hides its overflow), runs into the next table cell,
  // or runs past the column.
  const clippedMath = [];
  for (const m of document.querySelectorAll("mjx-container")) {
    if (!visible(m) || !column.contains(m)) continue;
    const r = (m.querySelector("mjx-math") ?? m).getBoundingClientRect();
    if (r.width === 0) continue;
    let problem = "";
    for (let a = m; a; a = a.parentElement) {
      const style = getComputedStyle(a);
      const ar = a.getBoundingClientRect();
      if (style.display === "inline" || style.display === "contents") continue; // no own box
      if (!(r.left < ar.left - 1 || r.right > ar.right + 1)) continue;
      if (scrolls(a)) break;
      if (a === column) { problem = "past the column"; break; }
      if (style.overflowX !== "visible") { problem = `cut off by <${a.tagName.toLowerCase()}>`; break; }
      if (a.matches("td, th")) { problem = "past its table cell"; break; }
    }
    if (problem) {
      const tex = m.closest(".math")?.textContent ?? m.getAttribute("aria-label") ?? m.textContent;
      clippedMath.push(`${tex.replace(/\s+/g, " ").trim().slice(0, 50)} (${problem})`);
    }
  }
  // The page itself must not scroll sideways.
  const pageWidth = document.scrollingElement.scrollWidth;
  const pageOverflow = pageWidth > window.innerWidth + 1 ? `${pageWidth} px in ${window.innerWidth} px` : "";
  // The book's title (the brand at the top of the sidebar) is in view when the page loads,
  // wherever the sidebar has scrolled to (not hidden above, nor under another element).
  let titleHidden = "";
  const brand = document.querySelector(".bd-sidebar-primary .navbar-brand");
  const sidebar = brand?.closest(".bd-sidebar-primary");
  if (brand && visible(sidebar) && sidebar.getBoundingClientRect().right > 0
      && getComputedStyle(sidebar).position !== "fixed") {
    const b = brand.getBoundingClientRect();
    const x = b.left + b.width / 2;
    for (const y of [b.top + 4, b.bottom - 4]) {
      const hit = y >= 0 && y <= window.innerHeight ? document.elementFromPoint(x, y) : null;
      if (!hit || !brand.contains(hit)) {
        titleHidden = `${brand.textContent.trim().slice(0, 40)} (sidebar scrolled to ${Math.round(sidebar.scrollTop)} px)`;
        break;
      }
    }
  }
  // Notebook cells: no code or output line runs past the visible width of its block.
  const cutLines = [...document.querySelectorAll("div.cell pre")]
    .filter((p) => visible(p) && p.scrollWidth > p.clientWidth + 1)
    .map((p) => (p.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a), ""))
      .slice(0, 60));
  // A scrollbar under inline maths: a box around an inline formula (its own, or its
  // cell's) that scrolls sideways and draws a scrollbar, whatever the formula's width.
  const mathScrollbars = [];
  for (const m of column.querySelectorAll("span.math, mjx-container:not([display='true'])")) {
    if (!visible(m) || m.closest("div.math") || inOutput(m)) continue;
    const top = m.closest("p, li, td, th, dd, figcaption") ?? m.parentElement;
    for (let a = m; a && a !== top?.parentElement; a = a.parentElement) {
      const style = getComputedStyle(a);
      if (!["auto", "scroll"].includes(style.overflowX)) continue;
      const bar = a.offsetHeight - a.clientHeight - parseFloat(style.borderTopWidth)
        - parseFloat(style.borderBottomWidth);
      if (bar > 0 && (style.overflowX === "scroll" || a.scrollWidth > a.clientWidth)) {
        const more = a.scrollWidth - a.clientWidth;
        mathScrollbars.push(`${m.textContent.replace(/\s+/g, " ").trim().slice(0, 40)}`
          + (more > 8 ? ` (${more} px wider than its line)` : " (needless: it fits)"));
        break;
      }
    }
  }
  // On a phone: a table wider than its scrolling box shows that it scrolls (a shade at the
  // hidden edge: a gradient background of the box).
  const hiddenScroll = !narrow ? [] : [...column.querySelectorAll("table")]
    .filter((t) => visible(t) && !inOutput(t))
    .map((t) => [t, scroller(t)])
    .filter(([, box]) => box && box.scrollWidth > box.clientWidth + 1
      && !getComputedStyle(box).backgroundImage.includes("gradient"))
    .map(([t]) => t.textContent.replace(/\s+/g, " ").trim().slice(0, 50));
  // Every image of the text links to a file (its full-size image).
  const unlinkedImages = [...column.querySelectorAll("img")]
    .filter((i) => !i.closest("a[href]")?.getAttribute("href")?.match(/\.(png|jpe?g|svg|gif|webp)(#.*)?$/i))
    .map((i) => (i.getAttribute("src") ?? "").split("/").pop());
  // Header bars across the top of the page (the theme's, the article's).
  const headerBars = [...document.querySelectorAll("header, .bd-header-article")]
    .filter((h) => visible(h) && h.getBoundingClientRect().height > 8
      && h.getBoundingClientRect().top < 120 && !h.parentElement.closest("header"))
    .map((h) => h.id || h.className.split(" ")[0]);
  // "(quick)" outside the banner of a quick build.
  const quickMarks = (() => {
    const clone = column.cloneNode(true);
    clone.querySelectorAll(".ntp-quick-banner").forEach((b) => b.remove());
    return (clone.textContent.match(/\(quick\)/g) ?? []).length;
  })();
  // The link back from an executed notebook to its figure in the book.
  const backlinks = [...document.querySelectorAll("p.ntp-backlink a[href]")]
    .map((a) => a.getAttribute("href"));
  const imgs = [...document.querySelectorAll("img")];
  return {
    math: document.querySelectorAll(".math").length,
    typeset: document.querySelectorAll("mjx-container").length,
    merror: document.querySelectorAll("mjx-merror").length,
    images: imgs.length,
    badImages: imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.src),
    links: [...document.querySelectorAll("a[href]")].map((a) => a.getAttribute("href")),
    ids: [...document.querySelectorAll("[id]")].map((e) => e.id),
    rawTex,
    brokenWords: [...new Set(brokenWords)],
    oneWordColumns,
    wideTables,
    wideMath,
    clippedMath,
    pageOverflow,
    titleHidden,
    cutLines,
    mathScrollbars: [...new Set(mathScrollbars)],
    hiddenScroll,
    unlinkedImages,
    headerBars,
    quickMarks,
    backlinks,
    title: document.title.trim(),
    scrollbarRoom: (() => {
      const d = document.createElement("div");
      d.style.cssText = "width:100px;height:100px;overflow:scroll;position:absolute;top:-500px";
      document.body.append(d);
      const room = d.offsetWidth - d.clientWidth;
      d.remove();
      return room;
    })(),
  };
}

// How many pages are open at once (BROWSER_JOBS, default 2): a page's time is mostly its
// renderer's (layout, MathJax, the measurements below), one process per page, so two pages
// side by side keep two cores busy.  Each page is checked on its own: its requests, errors
// and measurements are its own, and the report is in the pages' sorted order.
const JOBS = Math.max(1, Number.parseInt(process.env.BROWSER_JOBS ?? "2", 10) || 1);

// Checks every page under root at each width; returns { passed, failed, report: Map(rel ->
// [problems]) }, a problem found at the phone width prefixed "420 px: ".
async function checkSite(root, { shots = false, quiet = false, only = [] } = {}) {
  const server = await serve(root);
  const base = `http://127.0.0.1:${server.address().port}`;
  // Playwright adds --hide-scrollbars to a headless Chromium: left out, the page draws the
  // classic scrollbars of a desktop (checked on every page: scrollbarRoom), which is where a
  // needless scrollbar shows.
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    ignoreDefaultArgs: ["--hide-scrollbars"],
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const contexts = [];
  for (const vp of VIEWPORTS)
    contexts.push([vp, await browser.newContext({ viewport: { width: vp.width, height: vp.height } })]);

  const all = (await walk(root)).map((p) => relative(root, p).split(sep).join("/"));
  const existing = new Set(all);
  const pages = all.filter((p) => p.endsWith(".html"))
    .filter((p) => !p.startsWith("_static/") && !["genindex.html", "search.html"].includes(p))
    .filter((p) => !only.length || only.some((o) => p.startsWith(o)))
    .sort();
  if (shots) await mkdir(SHOTS, { recursive: true });
  const log = quiet ? () => {} : console.log;
  // A figure in its page, whole: the first section index (sorted) with an image.
  let figurePage = null;
  for (const rel of pages.filter((p) => p.includes("/index.html")))
    if (/<img\b/.test(await readFile(join(root, rel), "utf8"))) { figurePage = rel; break; }

  // One page at one width: what a reader would find wrong there, and what it measured.
  async function visit(rel, vp, context) {
    const first = vp === VIEWPORTS[0];
    const found = [];
    const external = [];
    const page = await context.newPage();
    // Offline: every request that would leave the machine is refused and reported.
    await page.route("**/*", (route) => {
      const u = new URL(route.request().url());
      if (u.host === new URL(base).host || u.protocol === "data:") return route.continue();
      external.push(u.href);
      return route.abort();
    });
    page.on("pageerror", (e) => found.push(`page error: ${e.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error" && !/net::ERR_FAILED/.test(msg.text()))
        found.push(`console error: ${msg.text()}`);
    });
    page.on("requestfailed", (r) => {
      if (r.url().startsWith(base)) found.push(`request failed: ${r.url()}`);
    });
    page.on("response", (r) => {
      if (r.status() >= 400 && r.url().startsWith(base)) found.push(`HTTP ${r.status()} ${r.url()}`);
    });
    let info = null;
    try {
      await page.goto(`${base}/${rel}`, { waitUntil: "load", timeout: 30000 });
      await page.evaluate(async () => {
        if (window.MathJax?.startup?.promise) await window.MathJax.startup.promise;
      });
      // the book's script has measured the formulas with the final fonts (ntp.js); a page
      // with formulas and without the script fails at once, one whose script never marks
      // the page after the time limit
      const unmeasured = "the formulas were never measured (ntp.js did not run)";
      const script = await page.evaluate(() => !document.querySelector("article span.math")
        || document.documentElement.dataset.ntpMath === "marked"
        || Boolean(document.querySelector('script[src*="ntp.js"]')));
      if (!script) found.push(unmeasured);
      else await page.waitForFunction(
        () => !document.querySelector("article span.math") ||
          document.documentElement.dataset.ntpMath === "marked",
        null, { timeout: 20000 },
      ).catch(() => found.push(unmeasured));
      // what the page folds (a figure's checks, a solution) is checked as a reader who
      // opens it sees it
      await page.evaluate(() => document.querySelectorAll("details").forEach((d) => { d.open = true; }));
      // two frames: the theme's scripts (sidebar scroll, ...) have run
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      info = await page.evaluate(inspectPage, { narrow: vp.narrow });
      if (info.typeset < info.math) found.push(`math ${info.typeset}/${info.math} typeset`);
      if (info.merror) found.push(`${info.merror} MathJax errors`);
      for (const t of info.rawTex) found.push(`raw TeX in the text: ${t}`);
      for (const t of info.brokenWords) found.push(`word broken across lines: ${t}`);
      for (const t of info.oneWordColumns) found.push(`table column one word per line: ${t}`);
      for (const t of info.wideTables) found.push(`table wider than the column: ${t}`);
      for (const t of info.wideMath) found.push(`equation wider than the column: ${t}`);
      for (const t of info.clippedMath) found.push(`maths clipped: ${t}`);
      if (info.pageOverflow) found.push(`page wider than the screen: ${info.pageOverflow}`);
      if (info.titleHidden) found.push(`book title not visible in the sidebar: ${info.titleHidden}`);
      for (const l of info.cutLines) found.push(`notebook line cut at the right edge: ${l}`);
      if (info.badImages.length) found.push(`images not loaded: ${info.badImages.join(", ")}`);
      for (const u of new Set(external)) found.push(`request leaves the machine: ${u}`);
      if (info.scrollbarRoom === 0)
        found.push("scrollbars take no room: the browser hides them, so a needless scrollbar cannot be seen");
      // a formula really wider than its line scrolls (ntp.js); a scrollbar under one that
      // fits is the fault
      for (const t of info.mathScrollbars.filter((m) => m.endsWith("(needless: it fits)")))
        found.push(`scrollbar under inline maths: ${t}`);
      for (const t of info.hiddenScroll) found.push(`table scrolls sideways with no sign of it: ${t}`);
      if (info.headerBars.length > 1) found.push(`second header bar: ${info.headerBars.join(", ")}`);
      if (first) {
        for (const i of info.unlinkedImages) found.push(`image not linked to its full-size file: ${i}`);
        if (info.quickMarks > 1) found.push(`"(quick)" printed ${info.quickMarks} times outside the banner`);
        if (EXECUTED.test(rel)) {
          const id = rel.split("/").pop().replace(/\.html$/, "");
          const back = info.backlinks;
          if (!back.length) found.push("executed notebook page has no link back to its figure in the book");
          else if (back.some((h) => h.includes("#")) && !back.some((h) => h.endsWith(`#${id}`)))
            found.push(`the link back does not point at the figure's anchor #${id}: ${back.join(", ")}`);
        }
        if (EXECUTED.test(rel) && info.images === 0)
          found.push("executed notebook page shows no image");
        const dir = rel.includes("/") ? rel.slice(0, rel.lastIndexOf("/") + 1) : "";
        for (const href of info.links) {
          if (/^[a-z]+:/i.test(href) || href.startsWith("//")) continue;
          const [pathPart, anchor] = href.split("#");
          const target = pathPart ? new URL(pathPart, `http://x/${dir}`).pathname.slice(1) : rel;
          const file = target.endsWith("/") || target === "" ? `${target}index.html` : target;
          if (pathPart && !existing.has(decodeURIComponent(file))) found.push(`broken link ${href}`);
          else if (anchor && !pathPart && !info.ids.includes(decodeURIComponent(anchor)))
            found.push(`broken anchor #${anchor}`);
        }
      }
      const shot = SHOT_PAGES[rel];
      if (shots && shot)
        await page.screenshot({ path: join(SHOTS, `${shot}-${vp.width}.png`), fullPage: first });
      if (shots && first && rel === figurePage)
        await page.screenshot({ path: join(SHOTS, "figure-page.png"), fullPage: true });
    } catch (e) {
      found.push(`load failed: ${e.message}`);
    }
    await page.close();
    return { found: found.map((f) => (first ? f : `${vp.width} px: ${f}`)), info };
  }

  // One page at every width (a redirect page: its target exists; it is not rendered).
  async function check(rel) {
    const problems = [];
    const summaries = [];
    const html = await readFile(join(root, rel), "utf8");
    const redirect = html.match(/http-equiv="refresh"[^>]*url=([^"]+)"/i);
    if (redirect) {
      const target = new URL(redirect[1], `http://x/${rel}`).pathname.slice(1);
      if (!existing.has(target)) problems.push(`redirect to missing ${target}`);
      summaries.push(`redirect to ${target}`);
      return { rel, problems, summaries, title: null, wideMath: 0 };
    }
    let title = null, wideMath = 0;
    for (const [vp, context] of contexts) {
      const { found, info } = await visit(rel, vp, context);
      problems.push(...found);
      if (!info) continue;
      wideMath += info.mathScrollbars.length;
      if (vp === VIEWPORTS[0]) {
        title = info.title || null;
        summaries.push(`math ${info.typeset}/${info.math}, images ${info.images - info.badImages.length}/${info.images}`);
      }
    }
    return { rel, problems, summaries, title, wideMath };
  }

  // JOBS pages at once; each result is logged as soon as the pages before it are done, so
  // the log keeps the sorted order.
  const results = new Array(pages.length);
  let next = 0, logged = 0;
  const flush = () => {
    for (; logged < pages.length && results[logged]; logged++) {
      const r = results[logged];
      log(`${r.problems.length ? "FAIL" : "ok  "} ${r.rel}  ${r.summaries.join(", ")}`);
      for (const p of r.problems) log(`     ${p}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(JOBS, pages.length) }, async () => {
    while (next < pages.length) {
      const i = next++;
      results[i] = await check(pages[i]);
      flush();
    }
  }));

  let passed = 0, failed = 0, wideMathCount = 0;
  const report = new Map();
  const titles = new Map(); // page title -> pages
  for (const r of results) {
    report.set(r.rel, r.problems);
    if (r.problems.length) failed++; else passed++;
    wideMathCount += r.wideMath;
    if (r.title) titles.set(r.title, [...(titles.get(r.title) ?? []), r.rel]);
  }
  // Two pages with one title: both fail (a reader cannot tell them apart in a tab or a list).
  for (const [title, rels] of titles) {
    if (rels.length < 2) continue;
    for (const rel of rels) {
      const problem = `title "${title}" also used by ${rels.filter((r) => r !== rel).join(", ")}`;
      log(`FAIL ${rel}\n     ${problem}`);
      if (!report.get(rel).length) { passed--; failed++; }
      report.get(rel).push(problem);
    }
  }
  log(`inline formulas wider than their line, scrolling sideways: ${wideMathCount}`);
  await browser.close();
  server.close();
  return { passed, failed, report };
}

// Negative controls: each fixtures/bad-*.html must fail for the reason its <meta
// name="expect"> names; fixtures/good.html (TeX only inside code and typeset math) must pass.
async function selfTest() {
  const root = join(HERE, "fixtures");
  const { report } = await checkSite(root, { quiet: true });
  let passed = 0, failed = 0;
  for (const [rel, problems] of report) {
    const html = await readFile(join(root, rel), "utf8");
    const expect = html.match(/<meta name="expect" content="([^"]*)"/)?.[1] ?? "";
    const ok = expect ? problems.some((p) => p.includes(expect)) : problems.length === 0;
    console.log(`${ok ? "ok  " : "FAIL"} self-test ${rel}: ${expect ? `must fail with "${expect}"`
      : "must pass"}; got ${problems.length ? problems.join("; ") : "no problem"}`);
    if (ok) passed++; else failed++;
  }
  return { passed, failed };
}

const selfTesting = process.argv.includes("--self-test");
const result = selfTesting ? await selfTest()
  : await checkSite(resolve(process.argv[2] ?? "_build/html"),
    { shots: process.env.BROWSER_SHOTS !== "0", only: process.argv.slice(3) });
console.log(`${selfTesting ? "self-test" : "browser"}: ${result.passed} passed, ${result.failed} failed`);
process.exit(result.failed || !result.passed ? 1 : 0);
