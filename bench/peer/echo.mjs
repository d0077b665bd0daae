// Drives conch serve (defaults, and --containment off) and
// mcp-server-commands (pinned in package.json) with the official
// TypeScript MCP client over stdio: after a warm-up, N rounds, each one
// `echo hi` call to every server in turn, so that the servers share the
// machine's state. Prints one JSON object: each server's p50 and p90 in
// milliseconds. The Go benchmark BenchmarkPeerEcho (bench/) runs it.
//
//   node echo.mjs <conch binary> <rounds>
//
// CONCH_BENCH_PAUSE_MS: an idle pause after every call (default 0, back
// to back), for an agent's pace: a server's work between calls (conch's
// warm shell, docs/executor.md#warm-shells) then falls in no measurement.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const [bin, roundsArg] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node echo.mjs <conch binary> [rounds]');
  process.exit(2);
}
const rounds = Number(roundsArg || 200);
const here = path.dirname(fileURLToPath(import.meta.url));

function env() {
  const e = getDefaultEnvironment();
  for (const k of ['CONCHTEST_MARKER', 'TMPDIR', 'XDG_STATE_HOME', 'HOME']) {
    if (process.env[k] !== undefined) e[k] = process.env[k];
  }
  return e;
}

const servers = [
  { name: 'conch', command: bin, args: ['serve'], tool: 'bash', args_: { command: 'echo hi', description: 'Print hi' } },
  { name: 'conch-containment-off', command: bin, args: ['serve', '--containment', 'off', '--sandbox', 'full-access'], tool: 'bash', args_: { command: 'echo hi', description: 'Print hi' } },
  { name: 'mcp-server-commands', command: process.execPath, args: [path.join(here, 'node_modules/mcp-server-commands/build/index.js')], tool: 'run_command', args_: { command: 'echo hi' } },
];

for (const s of servers) {
  s.client = new Client({ name: 'conch-bench-peer', version: '0' });
  await s.client.connect(new StdioClientTransport({ command: s.command, args: s.args, env: env(), stderr: 'ignore' }));
  s.times = [];
}
async function once(s) {
  const t0 = process.hrtime.bigint();
  const r = await s.client.callTool({ name: s.tool, arguments: s.args_ });
  const t1 = process.hrtime.bigint();
  const text = r.content.map((c) => c.text ?? '').join('');
  if (r.isError || !text.includes('hi')) throw new Error(`${s.name}: ${JSON.stringify(r)}`);
  return Number(t1 - t0) / 1e6;
}
const pause = Number(process.env.CONCH_BENCH_PAUSE_MS || 0);
const idle = () => new Promise((resolve) => setTimeout(resolve, pause));
for (let i = 0; i < 20; i++) for (const s of servers) { await once(s); await idle(); }
for (let i = 0; i < rounds; i++) for (const s of servers) { s.times.push(await once(s)); await idle(); }
const pct = (a, p) => { const b = [...a].sort((x, y) => x - y); return b[Math.min(b.length - 1, Math.floor(b.length * p))]; };
const out = {};
for (const s of servers) {
  out[s.name] = { p50: pct(s.times, 0.5), p90: pct(s.times, 0.9) };
  await s.client.close();
}
console.log(JSON.stringify(out));
