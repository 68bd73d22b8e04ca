// Pyodide's worker for the peer comparison (bench/peers/run.py): CPython compiled to Wasm in
// this Node process, driven over stdin/stdout by the line protocol in bench/peers/README.md.
// A "fresh" run gets a new globals dict in the one interpreter; nothing else is reset.
// usage: node worker.mjs PATH/TO/pyodide.mjs
import { createInterface } from "node:readline";

const PACE_MS = 2;
const TOOL_ANSWER = JSON.stringify({ ok: true, n: 3 });
// The workloads' code and expected output; worker.c and worker.py have the same text.
const COMPUTE = `import json, re, datetime
d = {'items': [{'id': i, 'name': 'item%d' % i, 'tags': ['a', 'b']} for i in range(50)]}
s = json.dumps(d)
back = json.loads(s)
words = re.findall(r'item(\\d+)', s)
day = datetime.date(2024, 1, 1) + datetime.timedelta(days=len(words))
print(len(back['items']), len(words), day.isoformat())
`;
const tools = (n) => `for i in range(${n}):
    r = call_tool('echo', d={'a': 1, 'b': [1, 2]})
assert r == {'ok': True, 'n': 3}
print(i + 1)
`;
const WORKLOADS = {
  fresh: ["print(1)", "1\n", 0],
  paced: ["print(1)", "1\n", PACE_MS],
  compute: [COMPUTE, "50 50 2024-02-20\n", 0],
  tools10: [tools(10), "10\n", 0],
  tools1000: [tools(1000), "1000\n", 0],
};
// Tool calls are JSON text both ways, as in the other workers.
const PRELUDE = `import json
def call_tool(name, **kw):
    return json.loads(_host_call(name, json.dumps(kw)))
`;

const { loadPyodide, version } = await import(process.argv[2]);
let out = [];

async function load() {
  const py = await loadPyodide();
  py.setStdout({ batched: (s) => out.push(s) });
  py.globals.set("_host_call", (name, args) => TOOL_ANSWER);
  py.runPython(PRELUDE);
  return py;
}

function run(py, code, want) {
  out = [];
  const g = py.globals.get("dict")();
  g.set("call_tool", py.globals.get("call_tool"));
  try {
    py.runPython(code, { globals: g });
  } finally {
    g.destroy();
  }
  const got = out.length ? out.join("\n") + "\n" : "";
  if (got !== want) throw new Error(`printed ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function series(py, name, n) {
  const us = [];
  for (let i = 0; i < n; i++) {
    if (name === "cold") {
      const t0 = performance.now();
      run(await load(), "print(1)", "1\n");
      us.push((performance.now() - t0) * 1000);
      continue;
    }
    const [code, want, pace] = WORKLOADS[name];
    if (pace) await sleep(pace);
    const t0 = performance.now();
    run(py, code, want);
    us.push((performance.now() - t0) * 1000);
  }
  return `us=${us.map((x) => x.toFixed(1)).join(",")}`;
}

async function answer(py, name, n) {
  if (name in WORKLOADS || name === "cold") return series(py, name, n);
  if (name === "throughput") return "na=one interpreter on Node's one thread";
  if (name === "memory") return "held=1";
  return `error=${name}: unknown workload`;
}

const oneLine = (e) => String(e && e.message ? e.message : e).replace(/\s+/g, " ");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
process.stdout.write(`hello pid=${process.pid}\n`);
if ((await lines.next()).value !== "start") process.exit(2);
let py;
try {
  py = await load();
  run(py, "print(1)", "1\n");
} catch (e) {
  process.stdout.write(`error ${oneLine(e)}\n`);
  process.exit(1);
}
process.stdout.write(`ready ${JSON.stringify({ version: `pyodide ${version}, node ${process.version}` })}\n`);
for await (const line of lines) {
  const [name, n] = line.trim().split(/\s+/);
  if (!name || name === "quit") break;
  let text;
  try {
    text = await answer(py, name, Number(n || 0));
  } catch (e) {
    text = `error=${name}: ${oneLine(e)}`;
  }
  process.stdout.write(`${text}\nend\n`);
}
process.exit(0);
