// Headless-browser check of the built book (_build/html).
//
// Serves the HTML over loopback, opens every page in Debian's chromium through
// playwright-core and checks: the page loads with no 4xx/5xx response and no page
// error or console error (except the known sphinx-thebe duplicate-declaration message),
// all math is typeset by MathJax (served from node_modules, since CI is offline),
// every <img> has loaded, every page of an executed notebook shows at least one image,
// and no internal link points at a missing file or anchor.  Screenshots of the index
// and of one figure page go to _build/screenshots/.  Ends with "N passed, N failed".
import { createServer } from "node:http";
import { readFile, readdir, mkdir, stat } from "node:fs/promises";
import { extname, join, relative, resolve, sep } from "node:path";
import { chromium } from "playwright-core";

const ROOT = resolve(process.argv[2] ?? "_build/html");
const SHOTS = resolve("_build/screenshots");
const MATHJAX = resolve("node_modules/mathjax/es5");
// Known, harmless messages: sphinx-thebe 0.3.1 declares its config twice (it only affects
// the unused Thebe button); pydata-sphinx-theme logs an empty theme mode on the first page
// of a fresh browser profile before falling back to "auto".
const ALLOWED_CONSOLE = [/THEBE_JS_URL/, /Got invalid theme mode: \. Resetting to auto/];
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

const server = createServer(async (req, res) => {
  const url = new URL(req.url, "http://localhost");
  let path = join(ROOT, decodeURIComponent(url.pathname));
  if (!path.startsWith(ROOT)) { res.writeHead(403); return res.end(); }
  try {
    if ((await stat(path)).isDirectory()) path = join(path, "index.html");
    const body = await readFile(path);
    res.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream" });
    res.end(body);
  } catch { res.writeHead(404); res.end("not found"); }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
// MathJax from the npm copy; every other external request is aborted (CI is offline).
await context.route("**/*", async (route) => {
  const u = new URL(route.request().url());
  if (u.host === new URL(base).host) return route.continue();
  const m = u.pathname.match(/mathjax@3\/es5\/(.*)$/);
  if (m) return route.fulfill({ body: await readFile(join(MATHJAX, m[1])),
    contentType: "text/javascript" });
  return route.abort();
});

const pages = (await walk(ROOT)).filter((p) => p.endsWith(".html"))
  .map((p) => relative(ROOT, p).split(sep).join("/"))
  .filter((p) => !p.startsWith("_static/") && !["genindex.html", "search.html"].includes(p));
const existing = new Set((await walk(ROOT)).map((p) => relative(ROOT, p).split(sep).join("/")));
await mkdir(SHOTS, { recursive: true });

let passed = 0, failed = 0, figureShot = false;
for (const rel of pages.sort()) {
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => {
    if (!ALLOWED_CONSOLE.some((re) => re.test(e.message))) problems.push(`page error: ${e.message}`);
  });
  page.on("console", (msg) => {
    if (msg.type() === "error" && !ALLOWED_CONSOLE.some((re) => re.test(msg.text())))
      problems.push(`console error: ${msg.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400 && r.url().startsWith(base)) problems.push(`HTTP ${r.status()} ${r.url()}`);
  });
  try {
    const html = await readFile(join(ROOT, rel), "utf8");
    const redirect = html.match(/http-equiv="refresh"[^>]*url=([^"]+)"/i);
    if (redirect) {
      // A redirect page (index.html): check its target exists, do not render it.
      const target = new URL(redirect[1], `http://x/${rel}`).pathname.slice(1);
      if (!existing.has(target)) problems.push(`redirect to missing ${target}`);
      console.log(`${problems.length ? "FAIL" : "ok  "} ${rel}  redirect to ${target}`);
      if (problems.length) failed++; else passed++;
      await page.close();
      continue;
    }
    await page.goto(`${base}/${rel}`, { waitUntil: "load", timeout: 30000 });
    const isRedirect = false;
    await page.evaluate(async () => {
      if (window.MathJax?.startup?.promise) await window.MathJax.startup.promise;
    });
    const info = await page.evaluate(() => {
      const imgs = [...document.querySelectorAll("img")];
      return {
        math: document.querySelectorAll(".math").length,
        typeset: document.querySelectorAll("mjx-container").length,
        merror: document.querySelectorAll("mjx-merror").length,
        images: imgs.length,
        badImages: imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.src),
        links: [...document.querySelectorAll("a[href]")].map((a) => a.getAttribute("href")),
        ids: [...document.querySelectorAll("[id]")].map((e) => e.id),
      };
    });
    if (!isRedirect) {
      if (info.typeset < info.math) problems.push(`math ${info.typeset}/${info.math} typeset`);
      if (info.merror) problems.push(`${info.merror} MathJax errors`);
      if (info.badImages.length) problems.push(`images not loaded: ${info.badImages.join(", ")}`);
      if (rel.includes("/executed/") && info.images === 0) problems.push("executed notebook page shows no image");
    }
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
    if (rel === "book/intro.html") await page.screenshot({ path: join(SHOTS, "intro.png"), fullPage: true });
    if (!figureShot && info.images > 0 && rel.includes("/index.html") && rel !== "index.html") {
      await page.screenshot({ path: join(SHOTS, "figure-page.png"), fullPage: true });
      figureShot = true;
    }
    console.log(`${problems.length ? "FAIL" : "ok  "} ${rel}  math ${info.typeset}/${info.math}, images ${info.images - info.badImages.length}/${info.images}`);
  } catch (e) {
    problems.push(`load failed: ${e.message}`);
  }
  for (const p of problems) console.log(`     ${p}`);
  if (problems.length) failed++; else passed++;
  await page.close();
}
await browser.close();
server.close();
console.log(`browser: ${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
