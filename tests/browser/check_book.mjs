// Headless-browser check of the built book (_build/html).
//
//   node tests/browser/check_book.mjs [_build/html]   check the book
//   node tests/browser/check_book.mjs --self-test     negative controls (tests/browser/fixtures)
//   node tests/browser/check_book.mjs _build/html book/lin/   only the pages under book/lin/
//
// Serves the HTML over loopback, opens every page in Debian's chromium through
// playwright-core (1400 x 900) and checks: the page loads with no 4xx/5xx response, no
// page error or console error (sphinx-thebe's duplicate declaration of THEBE_JS_URL
// included: the book's extension removes it) and no request leaving the machine (the book ships its MathJax, so none is
// needed); all math is typeset by MathJax; no raw TeX (a \command or $...$) is left in
// the visible text outside code and math; every <img> has loaded and every page of an
// executed notebook shows at least one image; no table or display equation of the text is
// wider than the content column and no code or output line of a notebook cell is cut at its
// right edge;
// no internal link points at a missing file or anchor.  Screenshots of a few pages go to
// _build/screenshots/.  Ends with "N passed, N failed".
import { createServer } from "node:http";
import { readFile, readdir, mkdir, stat } from "node:fs/promises";
import { dirname, extname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
const SHOTS = resolve("_build/screenshots");
const SHOT_PAGES = {
  "book/intro.html": "intro.png",
  "book/lin/index.html": "lin-index.png",
  "book/lin/beyond.html": "lin-beyond.png",
  "book/reproducibility.html": "reproducibility.png",
  "book/bibliography.html": "bibliography.png",
  "book/executed/lin-gd-direction.html": "executed-lin-gd-direction.png",
};
// Known, harmless message: pydata-sphinx-theme logs an empty theme mode on the first page
// of a fresh browser profile before falling back to "auto".  (sphinx-thebe's duplicate
// declaration of THEBE_JS_URL is removed by the book's extension, so it fails the check.)
const ALLOWED_CONSOLE = [/Got invalid theme mode: \. Resetting to auto/];
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

// Runs in the page: what a reader sees, measured.
function inspectPage() {
  // Raw TeX in visible text: a \command, \( \[ delimiters, $$ or a $...$ pair, outside code
  // blocks, inline code, MathJax's containers and the (not yet typeset) math nodes.
  const SKIP = "pre, code, kbd, samp, script, style, textarea, noscript, .math, "
    + "mjx-container, .MathJax, .highlight";
  const TEX = /\\[A-Za-z]+|\\[([]|\$\$|\$[^$\s][^$]*\$/;
  const rawTex = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest(SKIP) || !el.checkVisibility()) continue;
    const m = n.textContent.match(TEX);
    if (m) {
      const i = m.index;
      rawTex.push(n.textContent.slice(Math.max(0, i - 30), i + 40).replace(/\s+/g, " ").trim());
    }
  }
  // Tables of the text (not notebook outputs) must fit the content column.
  const column = document.querySelector("article.bd-article") ?? document.querySelector("main")
    ?? document.body;
  const colRight = column.getBoundingClientRect().right;
  const wideTables = [...column.querySelectorAll("table")]
    .filter((t) => !t.closest(".cell_output") && t.checkVisibility())
    .filter((t) => t.getBoundingClientRect().right > colRight + 1
      || t.scrollWidth > (t.parentElement?.clientWidth ?? Infinity) + 1)
    .map((t) => `${Math.round(t.scrollWidth)} px in ${Math.round(column.clientWidth)} px`);
  // Display equations must fit the column (a wider one is clipped or hides behind a scrollbar).
  const wideMath = [...column.querySelectorAll('mjx-container[display="true"]')]
    .filter((m) => m.checkVisibility() && !m.closest(".cell_output")
      && m.scrollWidth > m.clientWidth + 1)
    .map((m) => {
      const label = m.closest(".math")?.querySelector(".eqno")?.textContent.replace("#", "")
        ?? m.closest("[id]")?.id ?? "";
      return `${label} ${Math.round(m.scrollWidth)} px in ${Math.round(m.clientWidth)} px`.trim();
    });
  // Notebook cells: no code or output line runs past the visible width of its block.
  const cutLines = [...document.querySelectorAll("div.cell pre")]
    .filter((p) => p.checkVisibility() && p.scrollWidth > p.clientWidth + 1)
    .map((p) => (p.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a), ""))
      .slice(0, 60));
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
    wideTables,
    wideMath,
    cutLines,
  };
}

// Checks every page under root; returns { passed, failed, problems: Map(rel -> [..]) }.
async function checkSite(root, { shots = false, quiet = false, only = [] } = {}) {
  const server = await serve(root);
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  // Offline: every request that would leave the machine is refused and reported.
  let external = [];
  await context.route("**/*", (route) => {
    const u = new URL(route.request().url());
    if (u.host === new URL(base).host || u.protocol === "data:") return route.continue();
    external.push(u.href);
    return route.abort();
  });

  const all = (await walk(root)).map((p) => relative(root, p).split(sep).join("/"));
  const existing = new Set(all);
  const pages = all.filter((p) => p.endsWith(".html"))
    .filter((p) => !p.startsWith("_static/") && !["genindex.html", "search.html"].includes(p))
    .filter((p) => !only.length || only.some((o) => p.startsWith(o)));
  if (shots) await mkdir(SHOTS, { recursive: true });
  const log = quiet ? () => {} : console.log;

  let passed = 0, failed = 0, figureShot = false;
  const report = new Map();
  for (const rel of pages.sort()) {
    const page = await context.newPage();
    const problems = [];
    external = [];
    page.on("pageerror", (e) => {
      if (!ALLOWED_CONSOLE.some((re) => re.test(e.message))) problems.push(`page error: ${e.message}`);
    });
    page.on("console", (msg) => {
      if (msg.type() === "error" && !ALLOWED_CONSOLE.some((re) => re.test(msg.text()))
        && !/net::ERR_FAILED/.test(msg.text()))
        problems.push(`console error: ${msg.text()}`);
    });
    page.on("response", (r) => {
      if (r.status() >= 400 && r.url().startsWith(base)) problems.push(`HTTP ${r.status()} ${r.url()}`);
    });
    let summary = "";
    try {
      const html = await readFile(join(root, rel), "utf8");
      const redirect = html.match(/http-equiv="refresh"[^>]*url=([^"]+)"/i);
      if (redirect) {
        // A redirect page (index.html): check its target exists, do not render it.
        const target = new URL(redirect[1], `http://x/${rel}`).pathname.slice(1);
        if (!existing.has(target)) problems.push(`redirect to missing ${target}`);
        summary = `redirect to ${target}`;
      } else {
        await page.goto(`${base}/${rel}`, { waitUntil: "load", timeout: 30000 });
        await page.evaluate(async () => {
          if (window.MathJax?.startup?.promise) await window.MathJax.startup.promise;
        });
        const info = await page.evaluate(inspectPage);
        if (info.typeset < info.math) problems.push(`math ${info.typeset}/${info.math} typeset`);
        if (info.merror) problems.push(`${info.merror} MathJax errors`);
        for (const t of info.rawTex) problems.push(`raw TeX in the text: ${t}`);
        for (const t of info.wideTables) problems.push(`table wider than the column: ${t}`);
        for (const t of info.wideMath) problems.push(`equation wider than the column: ${t}`);
        for (const l of info.cutLines) problems.push(`notebook line cut at the right edge: ${l}`);
        if (info.badImages.length) problems.push(`images not loaded: ${info.badImages.join(", ")}`);
        if (rel.includes("/executed/") && info.images === 0)
          problems.push("executed notebook page shows no image");
        for (const u of new Set(external)) problems.push(`request leaves the machine: ${u}`);
        const dir = rel.includes("/") ? rel.slice(0, rel.lastIndexOf("/") + 1) : "";
        for (const href of info.links) {
          if (/^[a-z]+:/i.test(href) || href.startsWith("//")) continue;
          const [pathPart, anchor] = href.split("#");
          const target = pathPart ? new URL(pathPart, `http://x/${dir}`).pathname.slice(1) : rel;
          const file = target.endsWith("/") || target === "" ? `${target}index.html` : target;
          if (pathPart && !existing.has(decodeURIComponent(file))) problems.push(`broken link ${href}`);
          else if (anchor && !pathPart && !info.ids.includes(decodeURIComponent(anchor)))
            problems.push(`broken anchor #${anchor}`);
        }
        if (shots && SHOT_PAGES[rel])
          await page.screenshot({ path: join(SHOTS, SHOT_PAGES[rel]), fullPage: true });
        if (shots && !figureShot && info.images > 0 && rel.includes("/index.html")) {
          await page.screenshot({ path: join(SHOTS, "figure-page.png"), fullPage: true });
          figureShot = true;
        }
        summary = `math ${info.typeset}/${info.math}, images ${info.images - info.badImages.length}/${info.images}`;
      }
    } catch (e) {
      problems.push(`load failed: ${e.message}`);
    }
    log(`${problems.length ? "FAIL" : "ok  "} ${rel}  ${summary}`);
    for (const p of problems) log(`     ${p}`);
    report.set(rel, problems);
    if (problems.length) failed++; else passed++;
    await page.close();
  }
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
    { shots: true, only: process.argv.slice(3) });
console.log(`${selfTesting ? "self-test" : "browser"}: ${result.passed} passed, ${result.failed} failed`);
process.exit(result.failed || !result.passed ? 1 : 0);
