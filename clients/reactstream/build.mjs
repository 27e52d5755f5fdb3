// Bundles the page (app.jsx, React and @langchain/react) into dist/ with
// esbuild.
import { build } from "esbuild";
import { mkdir, writeFile } from "node:fs/promises";

await mkdir("dist", { recursive: true });
await build({ entryPoints: ["app.jsx"], bundle: true, outfile: "dist/app.js", format: "esm", jsx: "automatic", logLevel: "warning", define: { "process.env.NODE_ENV": '"production"' } });
await writeFile("dist/index.html", '<!doctype html><meta charset="utf-8"><title>@langchain/react on Cairn</title><div id="root"></div><script type="module" src="app.js"></script>\n');
