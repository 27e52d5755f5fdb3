// What the browser suites of clients/ share (no npm package of its own:
// node's built-ins only): the page's own origin — a static server of a
// bundled page (dist/index.html and dist/app.js) on a port of its own, so
// that every call the page makes to cairn serve is cross-origin — and
// how Chromium is launched (CAIRN_CHROMIUM, or Debian's).
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

// servePage serves dir's dist/ and returns its origin and a close.
export async function servePage(dir) {
  const site = createServer(async (req, res) => {
    const name = new URL(req.url, "http://x").pathname === "/app.js" ? "app.js" : "index.html";
    const body = await readFile(join(dir, "dist", name));
    res.writeHead(200, { "content-type": name.endsWith(".js") ? "text/javascript" : "text/html" });
    res.end(body);
  });
  await new Promise((ok) => site.listen(0, "127.0.0.1", ok));
  return { origin: `http://127.0.0.1:${site.address().port}`, close: () => site.close() };
}

// launchOptions are Chromium's, headless.
export const launchOptions = {
  executablePath: process.env.CAIRN_CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
};
