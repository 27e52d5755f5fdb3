#!/usr/bin/env node
// Load harness for LangGraph-Platform-compatible HTTP servers (`cairn serve`,
// the LangGraph JS dev server, ...), driven by the official
// @langchain/langgraph-sdk Client. See README.md.
//
// Run mode (default): per concurrency level C, C simulated clients (each its
// own SDK Client) share --runs runs; one run = threads.create() followed by
// runs.wait(thread, assistant, {input}); latency is measured per run.
//
// SSE mode (--sse K --pid PID): K threads, one background run each
// (runs.create) joined with runs.joinStream(), all K held open for --hold-s
// seconds, then VmRSS / VmHWM of process PID are read from /proc.
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { Client } from "@langchain/langgraph-sdk";

const USAGE = `usage:
  node load.mjs --assistant ID [--url URL] [--clients 1,10,100] [--runs N]
                [--input JSON] [--api-key K] [--warmup N] [--json]
  node load.mjs --sse K --pid PID --assistant ID [--url URL] [--hold-s S]
                [--input JSON] [--api-key K] [--json]

  --url URL        server base URL (default http://127.0.0.1:2024)
  --assistant ID   assistant id or graph id to run (required)
  --clients LIST   comma-separated concurrency levels, run in turn (default 1,10,100)
  --runs N         measured runs per level, >= every level's clients (default 200)
  --input JSON     run input (default {})
  --api-key K      sent as x-api-key (environment keys are not used)
  --warmup N       unmeasured runs before each level (default 10)
  --json           print one JSON line per level instead of a table
  --sse K          SSE mode: hold K run streams open at once
  --pid PID        SSE mode: server process whose VmRSS/VmHWM is read
  --hold-s S       SSE mode: seconds to hold the streams open (default 5)
  -h, --help       this text`;

function fail(msg) {
  process.stderr.write(`load.mjs: ${msg}\n${USAGE}\n`);
  process.exit(2);
}

function posInt(name, value, { min = 1 } = {}) {
  if (!/^\d+$/.test(value ?? "")) fail(`--${name} must be an integer >= ${min}, got ${JSON.stringify(value)}`);
  const n = Number.parseInt(value, 10);
  if (n < min) fail(`--${name} must be >= ${min}, got ${n}`);
  return n;
}

function parseFlags(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: "string", default: "http://127.0.0.1:2024" },
        assistant: { type: "string" },
        clients: { type: "string", default: "1,10,100" },
        runs: { type: "string", default: "200" },
        input: { type: "string", default: "{}" },
        "api-key": { type: "string" },
        warmup: { type: "string", default: "10" },
        json: { type: "boolean", default: false },
        sse: { type: "string" },
        pid: { type: "string" },
        "hold-s": { type: "string", default: "5" },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (err) {
    fail(err.message);
  }
  const v = parsed.values;
  if (v.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  let url;
  try {
    url = new URL(v.url);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
  } catch {
    fail(`--url must be an http(s) URL, got ${JSON.stringify(v.url)}`);
  }
  if (!v.assistant) fail("--assistant is required (an assistant id, or a graph id such as 'bench')");
  let input;
  try {
    input = JSON.parse(v.input);
  } catch (err) {
    fail(`--input is not valid JSON (${err.message}): ${v.input}`);
  }
  const opts = {
    url: url.toString().replace(/\/$/, ""),
    assistant: v.assistant,
    input,
    apiKey: v["api-key"],
    json: v.json,
  };
  if (v.sse !== undefined) {
    opts.mode = "sse";
    opts.sse = posInt("sse", v.sse);
    if (v.pid === undefined) fail("--sse needs --pid PID (the server process to measure)");
    opts.pid = posInt("pid", v.pid);
    if (!/^\d+(\.\d+)?$/.test(v["hold-s"])) fail(`--hold-s must be a number of seconds, got ${JSON.stringify(v["hold-s"])}`);
    opts.holdS = Number(v["hold-s"]);
    return opts;
  }
  if (v.pid !== undefined) fail("--pid is only used with --sse");
  opts.mode = "runs";
  const levels = v.clients.split(",").map((s) => s.trim());
  if (levels.length === 0 || levels.some((s) => s === "")) fail(`--clients must be a comma-separated list of integers, got ${JSON.stringify(v.clients)}`);
  opts.levels = levels.map((s) => posInt("clients", s));
  opts.runs = posInt("runs", v.runs);
  const maxC = Math.max(...opts.levels);
  if (opts.runs < maxC) fail(`--runs (${opts.runs}) must be at least the largest --clients level (${maxC})`);
  opts.warmup = posInt("warmup", v.warmup, { min: 0 });
  return opts;
}

function newClient(opts) {
  // One Client per simulated client: the SDK queues requests beyond 4 in
  // flight per Client instance. No retries, so every failure is counted.
  return new Client({
    apiUrl: opts.url,
    apiKey: opts.apiKey ?? null,
    callerOptions: { maxRetries: 0 },
  });
}

function describe(err) {
  if (err == null) return String(err);
  const status = err.status ? `HTTP ${err.status} ` : "";
  const cause = err.cause?.message ? ` (cause: ${err.cause.message})` : "";
  return `${status}${err.message ?? err}${cause}`;
}

async function oneRun(client, opts) {
  const t0 = performance.now();
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, opts.assistant, { input: opts.input });
  return performance.now() - t0;
}

// Closed loop: C workers, each with its own Client, take runs from a shared
// counter until `total` runs were started.
async function drive(clients, total, opts, onError) {
  let next = 0;
  const latencies = [];
  let errors = 0;
  const worker = async (client) => {
    while (next < total) {
      next++;
      try {
        latencies.push(await oneRun(client, opts));
      } catch (err) {
        errors++;
        onError(err);
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(clients.map(worker));
  return { latencies, errors, elapsedMs: performance.now() - t0 };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

const round = (x, d = 2) => (x == null ? null : Math.round(x * 10 ** d) / 10 ** d);

async function runMode(opts) {
  let firstError = null;
  const onError = (err) => {
    if (firstError === null) {
      firstError = err;
      process.stderr.write(`load.mjs: first error: ${describe(err)}\n`);
    }
  };
  const rows = [];
  if (!opts.json) {
    process.stdout.write(`server ${opts.url}  assistant ${opts.assistant}  runs/level ${opts.runs}  warmup ${opts.warmup}\n`);
    process.stdout.write(`${"clients".padStart(8)} ${"runs".padStart(6)} ${"errors".padStart(6)} ${"runs/s".padStart(9)} ${"p50 ms".padStart(9)} ${"p99 ms".padStart(9)} ${"mean ms".padStart(9)}\n`);
  }
  for (const c of opts.levels) {
    const clients = Array.from({ length: c }, () => newClient(opts));
    if (opts.warmup > 0) {
      await drive(clients.slice(0, Math.min(c, opts.warmup)), opts.warmup, opts, onError);
    }
    const { latencies, errors, elapsedMs } = await drive(clients, opts.runs, opts, onError);
    latencies.sort((a, b) => a - b);
    const mean = latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null;
    const row = {
      clients: c,
      runs: opts.runs,
      errors,
      runs_per_s: round(latencies.length / (elapsedMs / 1000)),
      p50_ms: round(percentile(latencies, 50)),
      p99_ms: round(percentile(latencies, 99)),
      mean_ms: round(mean),
    };
    rows.push(row);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(row)}\n`);
    } else {
      const f = (x) => (x == null ? "-" : x.toFixed(1)).padStart(9);
      process.stdout.write(`${String(c).padStart(8)} ${String(opts.runs).padStart(6)} ${String(errors).padStart(6)} ${f(row.runs_per_s)} ${f(row.p50_ms)} ${f(row.p99_ms)} ${f(row.mean_ms)}\n`);
    }
  }
  return rows;
}

async function readMem(pid) {
  let text;
  try {
    text = await readFile(`/proc/${pid}/status`, "utf8");
  } catch (err) {
    throw new Error(`cannot read /proc/${pid}/status (${err.code ?? err.message}): is --pid the server's process id on this machine?`);
  }
  const kb = (key) => {
    const m = new RegExp(`^${key}:\\s+(\\d+)\\s+kB`, "m").exec(text);
    return m ? Number(m[1]) * 1024 : null;
  };
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

async function sseMode(opts) {
  // Fail early if the pid is wrong, before loading the server.
  await readMem(opts.pid);
  const k = opts.sse;
  const abort = new AbortController();
  let firstError = null;
  let errors = 0;
  const onError = (err) => {
    errors++;
    if (firstError === null) {
      firstError = err;
      process.stderr.write(`load.mjs: first error: ${describe(err)}\n`);
    }
  };
  const state = Array.from({ length: k }, () => ({ joined: false, events: 0, done: false }));
  const finished = [];

  // Per stream: threads.create -> runs.create (background) -> runs.joinStream.
  // Each stream has its own Client; at most SETUP_PARALLEL set-ups in flight.
  const SETUP_PARALLEL = 32;
  let next = 0;
  const t0 = performance.now();
  const setupWorker = async () => {
    while (next < k) {
      const i = next++;
      const s = state[i];
      const client = newClient(opts);
      let thread;
      let run;
      try {
        thread = await client.threads.create();
        run = await client.runs.create(thread.thread_id, opts.assistant, { input: opts.input });
      } catch (err) {
        s.done = true;
        onError(err);
        continue;
      }
      s.joined = true;
      const iter = client.runs.joinStream(thread.thread_id, run.run_id, { signal: abort.signal });
      finished.push(
        (async () => {
          try {
            for await (const _chunk of iter) s.events++;
          } catch (err) {
            if (!abort.signal.aborted) onError(err);
          } finally {
            s.done = true;
          }
        })(),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(SETUP_PARALLEL, k) }, setupWorker));
  const setupS = (performance.now() - t0) / 1000;
  const opened = state.filter((s) => s.joined).length;
  if (!opts.json) process.stderr.write(`load.mjs: ${opened}/${k} streams joined in ${setupS.toFixed(1)} s; holding ${opts.holdS} s\n`);

  await new Promise((r) => setTimeout(r, opts.holdS * 1000));

  const open = state.filter((s) => !s.done).length;
  const receiving = state.filter((s) => !s.done && s.events > 0).length;
  const mem = await readMem(opts.pid);
  const row = {
    sse_streams: k,
    open,
    rss_bytes: mem.rss,
    hwm_bytes: mem.hwm,
    open_with_events: receiving,
    errors,
    setup_s: round(setupS),
    hold_s: opts.holdS,
  };
  process.stdout.write(`${JSON.stringify(row)}\n`);
  if (!opts.json) {
    process.stdout.write(`${open}/${k} streams open after ${opts.holdS} s hold; server pid ${opts.pid}: VmRSS ${(mem.rss / 2 ** 20).toFixed(1)} MiB, VmHWM ${(mem.hwm / 2 ** 20).toFixed(1)} MiB\n`);
  }
  abort.abort();
  await Promise.race([Promise.allSettled(finished), new Promise((r) => setTimeout(r, 2000))]);
  return row;
}

const opts = parseFlags(process.argv.slice(2));
try {
  if (opts.mode === "sse") await sseMode(opts);
  else await runMode(opts);
  process.exit(0);
} catch (err) {
  process.stderr.write(`load.mjs: ${describe(err)}\n`);
  process.exit(1);
}
