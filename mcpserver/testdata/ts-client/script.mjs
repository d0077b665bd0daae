// Drives `conch serve` with the official TypeScript MCP client, over stdio
// (StdioClientTransport) and streamable HTTP (StreamableHTTPClientTransport),
// both at once, and prints what it saw as one JSON object on stdout. The Go
// test TestTSClient (cmd/conch) runs it and checks that object.
//
//   node script.mjs <conch binary> <root dir> <denied dir>
//
// <root dir> is offered to the server as the client's only root.
// <denied dir> is a directory outside the servers' writable roots that
// their user may write: their default sandbox denies writing it. The
// client validates every structuredContent against the tool's outputSchema
// (callTool throws when it does not match), so a run that gets through a
// call proves its structured value valid.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, rootDir, deniedDir] = process.argv.slice(2);
if (!bin || !rootDir || !deniedDir) {
  console.error('usage: node script.mjs <conch binary> <root dir> <denied dir>');
  process.exit(2);
}

// The yield window of both servers: longer than the progress scenario,
// shorter than the yield one.
const YIELD_MS = 3000;
const TOKEN = 'ts-client-token';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'conch-ts-'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Five ticks in 2.5 s by the clock, each sleeping until its half second
// since the start: a plain `sleep 0.5` five times adds up five forks'
// scheduling delays under load (2.9-3.5 s seen beside CPU burners), and
// past 3 s the progress scenario's call is moved to the background.
const TICKS = 's=${EPOCHREALTIME/[.,]/}; for i in 1 2 3 4 5; do echo tick; d=$((s + i*500000 - ${EPOCHREALTIME/[.,]/})); ((d < 0)) && d=0; printf -v f %06d $d; sleep 0.$f; done';
const bash = (command, extra = {}) => ({ command, description: 'Run a test command', ...extra });

// Only what the TS stdio client passes by default, plus what the Go test
// needs to find and contain the processes.
function serverEnv() {
  const env = getDefaultEnvironment();
  for (const k of ['CONCHTEST_MARKER', 'TMPDIR', 'XDG_STATE_HOME']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  return env;
}

function newClient(name, errors) {
  const client = new Client({ name, version: '0' }, { capabilities: { roots: { listChanged: true } } });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: 'file://' + rootDir, name: 'root' }],
  }));
  // An error the client reports once its session is being ended by us
  // (DELETE, close) is its own abort of its SSE stream, not the server's.
  client.ending = false;
  client.onerror = (e) => {
    if (!(client.ending && String(e).includes('AbortError'))) errors.push(String(e));
  };
  return client;
}

// Every message the server sends, as the transport delivers it (the
// Protocol chains a handler set before connect).
function record(transport) {
  const seen = [];
  transport.onmessage = (m) => seen.push(m);
  return seen;
}

const texts = (r) => r.content.map((c) => c.text);
const call = (client, name, args, options) => client.callTool({ name, arguments: args }, undefined, options);

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(what, cond, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await sleep(20);
  }
}

// PID_LINE is what a command writes for a process of its own ($$ or $!,
// given as $1): its pid and its PID namespace, "<pid> pid:[<inode>]".
// conch runs commands in a PID namespace of their own (docs/containment.md),
// where a pid is not this process's pid of the same process.
const pidLine = (pid) => `echo "${pid} $(readlink /proc/$$/ns/pid)"`;

// hostPid is the pid, as this process sees it, of the process that is pid
// in the PID namespace ns: the one in ns whose NSpid ends in pid. null
// when there is none (it is gone).
function hostPid(pid, ns) {
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (fs.readlinkSync(`/proc/${d}/ns/pid`) !== ns) continue;
      const m = fs.readFileSync(`/proc/${d}/status`, 'utf8').match(/^NSpid:\s+(.*)$/m);
      if (m && m[1].trim().split(/\s+/).pop() === pid) return Number(d);
    } catch {
      // gone while we looked
    }
  }
  return null;
}

// pids reads the pids a command wrote to file (pidLine, one a line), once
// there are n, as this process's pids.
async function pids(file, n) {
  let got = [];
  await waitUntil(`${n} pids in ${file}`, () => {
    try {
      got = fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => hostPid(...l.split(' ')));
    } catch {
      got = [];
    }
    return got.length >= n && got.every((p) => p !== null);
  });
  return got;
}

// msUntilDead waits for every pid to be gone; -1 if one outlives 3 s.
async function msUntilDead(list) {
  const start = Date.now();
  try {
    await waitUntil('processes to die', () => list.every((p) => !alive(p)), 3000);
  } catch {
    return -1;
  }
  return Date.now() - start;
}

// scenarios runs what both transports share, in an order that keeps the
// completion notices where they are expected.
async function scenarios(client, seen, tag) {
  const out = {};
  const listed = await client.listTools();
  out.tools = listed.tools.map((t) => t.name);
  out.bashInputProperties = Object.keys(listed.tools[0].inputSchema.properties);
  out.withOutputSchema = listed.tools.filter((t) => t.outputSchema).map((t) => t.name);
  out.server = client.getServerVersion()?.name;
  const init = seen.find((m) => m.result?.protocolVersion);
  out.protocolVersion = init?.result.protocolVersion;

  let r = await call(client, 'bash', bash('echo hello'));
  out.echo = { texts: texts(r), isError: !!r.isError, structuredContent: r.structuredContent };

  r = await call(client, 'bash', bash('echo out; echo err >&2; exit 3'));
  out.exit3 = { texts: texts(r), isError: !!r.isError, exitCode: r.structuredContent.exitCode };

  r = await call(client, 'bash', { command: 'true' });
  out.invalid = { texts: texts(r), isError: !!r.isError };

  r = await call(client, 'bash', bash('pwd'));
  out.pwd = texts(r);

  r = await call(client, 'bash', bash('sleep 0.3; echo done', { run_in_background: true }));
  out.background = { start: texts(r), startValue: r.structuredContent };
  r = await call(client, 'task_output', { task_id: r.structuredContent.taskId, wait: true });
  out.background.output = texts(r);
  out.background.outputValue = r.structuredContent;

  r = await call(client, 'task_list', {});
  out.taskList = { texts: texts(r), structuredContent: r.structuredContent };

  // A task that finishes on its own and is not read: its notice rides on
  // the next result as an extra text block. That is its start's own
  // result when the task ended before it was made (a loaded machine left
  // the call waiting): the call after it then has none (the Go e2e
  // test's testCompletionNotice does the same).
  r = await call(client, 'bash', bash('echo x', { run_in_background: true }));
  const noticeTask = r.structuredContent.taskId;
  if (texts(r).length > 1) {
    const next = await call(client, 'task_list', {});
    out.notice = { taskId: noticeTask, onStart: true, texts: texts(r), valueText: r.structuredContent.text, nextBlocks: texts(next).length };
  } else {
    let blocks = [];
    let noticeValue;
    await waitUntil('a completion notice', async () => {
      const listed = await call(client, 'task_list', {});
      blocks = texts(listed);
      noticeValue = listed.structuredContent;
      return blocks.length > 1;
    });
    out.notice = { taskId: noticeTask, texts: blocks, valueText: noticeValue.text };
  }

  // Progress: the client's onprogress makes it send a progress token.
  const progress = [];
  r = await call(client, 'bash', bash(TICKS), {
    onprogress: (p) => progress.push({ at: Date.now(), progress: p.progress, message: p.message }),
  });
  out.progress = {
    texts: texts(r),
    count: progress.length,
    // By the server's clock (progress is the elapsed time it sends): the
    // client's own arrival times bunch up when its event loop is late.
    minGapMs: Math.min(...progress.slice(1).map((p, i) => (p.progress - progress[i].progress) * 1000)),
    increasing: progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
    messages: progress.map((p) => p.message),
  };

  // Cancellation: the whole group (a background child included) dies, and
  // the server sends nothing for the call (the client would report it as
  // a response to an unknown message ID).
  const pidFile = path.join(tmp, tag + '-cancel');
  const ac = new AbortController();
  const pending = call(client, 'bash', bash(`${pidLine('$$')} > ${pidFile}; sleep 1031 & ${pidLine('$!')} >> ${pidFile}; wait`), {
    signal: ac.signal,
  });
  const group = await pids(pidFile, 2);
  ac.abort('cancelled by the test');
  out.cancel = {};
  try {
    await pending;
    out.cancel.error = null;
  } catch (e) {
    out.cancel.error = String(e);
  }
  out.cancel.deadAfterMs = await msUntilDead(group);
  // Whatever the server answered to the cancelled request (it should not).
  await sleep(500);
  const aborted = seen.find((m) => m.result?.content?.[0]?.text === 'Error: tool call aborted');
  out.cancel.answer = aborted ? { texts: texts(aborted.result), isError: !!aborted.result.isError } : null;
  r = await call(client, 'bash', bash('echo still here'));
  out.cancel.after = texts(r);

  // task_kill.
  r = await call(client, 'bash', bash('sleep 1033', { run_in_background: true }));
  const killed = r.structuredContent.taskId;
  r = await call(client, 'task_kill', { task_id: killed });
  out.kill = { taskId: killed, texts: texts(r), value: r.structuredContent };
  r = await call(client, 'task_output', { task_id: killed, wait: true });
  out.kill.output = texts(r);

  // Yield: a call still running after the window becomes a task, and no
  // line is lost between the yielded result and the task's reads.
  r = await call(client, 'bash', bash('for i in $(seq 1 40); do echo line$i; sleep 0.1; done'));
  out.yield = { texts: texts(r), value: r.structuredContent, reads: [] };
  for (let i = 0; i < 20; i++) {
    r = await call(client, 'task_output', { task_id: out.yield.value.taskId, wait: true });
    // The value's text is the read, then the status line.
    const read = r.structuredContent.text;
    out.yield.reads.push(read.slice(0, read.lastIndexOf('[status: ')).replace(/^\(no new output\)\n$/, ''));
    if (r.structuredContent.status !== 'running') {
      out.yield.final = texts(r);
      break;
    }
  }

  // The default sandbox denies a write outside the writable roots, in the
  // foreground and in a background task; the values that say so pass the
  // output schemas.
  const denied = `touch ${deniedDir}/${tag}`;
  r = await call(client, 'bash', bash(denied));
  out.denied = { texts: texts(r), sandbox: r.structuredContent.sandbox };
  r = await call(client, 'bash', bash(denied, { run_in_background: true }));
  r = await call(client, 'task_output', { task_id: r.structuredContent.taskId, wait: true });
  out.denied.task = texts(r);
  out.denied.taskSandbox = r.structuredContent.sandbox;

  // 100 MB of mixed stdout and stderr: the result fits the budget, and the
  // structured value, as a host forwards it (JSON.stringify), fits it too
  // and says what the text says, once. Last: on a loaded
  // machine it may pass the yield window, and the task it then becomes
  // must not change the ids the scenarios above expect.
  r = await call(client, 'bash', bash(
    "for i in $(seq 1 5); do head -c 10000000 /dev/zero | tr '\\0' o; head -c 10000000 /dev/zero | tr '\\0' e >&2; done"));
  out.large = {
    textChars: texts(r).join('').length,
    blocks: r.content.length,
    structuredChars: JSON.stringify(r.structuredContent).length,
    valueIsText: r.structuredContent.text === texts(r).join(''),
    cutLines: (texts(r)[0].match(/\[… \d+ bytes \(\d+ lines\) omitted; full output: /g) || []).length,
  };
  return out;
}

async function overStdio() {
  const errors = [];
  const transport = new StdioClientTransport({
    command: bin,
    args: ['serve', '--yield-ms', String(YIELD_MS)],
    env: serverEnv(),
    stderr: 'pipe',
  });
  let logs = '';
  transport.stderr.on('data', (d) => (logs += d));
  const seen = record(transport);
  const client = newClient('conch-ts-stdio', errors);
  const out = {};
  try {
    await client.connect(transport);
    const child = transport._process; // to see how it exits
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    Object.assign(out, await scenarios(client, seen, 'stdio'));
    const start = Date.now();
    await client.close(); // ends stdin, then waits for the exit
    out.exit = await exited;
    out.exit.afterMs = Date.now() - start;
  } catch (e) {
    out.fatal = e.stack || String(e);
    await client.close().catch(() => {});
  }
  out.errors = errors;
  out.logs = logs;
  return out;
}

// startHTTP runs `conch serve --http 127.0.0.1:0` (the kernel picks a free
// port) and returns the process and the URL it logs.
async function startHTTP(state) {
  const child = spawn(bin, ['serve', '--http', '127.0.0.1:0', '--yield-ms', String(YIELD_MS)], {
    env: { ...serverEnv(), CONCH_TOKEN: TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  state.stdout = '';
  state.logs = '';
  child.stdout.on('data', (d) => (state.stdout += d));
  child.stderr.on('data', (d) => (state.logs += d));
  state.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let url;
  await waitUntil('the server to log its URL', () => {
    url = /url=(http:\/\/\S+)/.exec(state.logs)?.[1];
    return !!url;
  });
  return { child, url };
}

async function connectHTTP(url, name, errors) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'Bearer ' + TOKEN } },
  });
  const seen = record(transport);
  const client = newClient(name, errors);
  await client.connect(transport);
  return { client, transport, seen };
}

// rawInitialize posts an initialize by hand and returns the status.
async function rawInitialize(url, headers) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    }),
  });
  await res.body?.cancel();
  return res.status;
}

async function overHTTP() {
  const errors = [];
  const state = {};
  const out = {};
  let server;
  const clients = [];
  try {
    server = await startHTTP(state);
    out.url = server.url;
    const a = await connectHTTP(server.url, 'conch-ts-http', errors);
    clients.push(a);
    out.sessionId = a.transport.sessionId;
    Object.assign(out, await scenarios(a.client, a.seen, 'http'));
    out.transportProtocolVersion = a.transport.protocolVersion;

    // Refused requests.
    out.noToken = await rawInitialize(server.url, {});
    out.wrongToken = await rawInitialize(server.url, { Authorization: 'Bearer nope' });
    out.foreignOrigin = await rawInitialize(server.url, { Authorization: 'Bearer ' + TOKEN, Origin: 'https://evil.example' });

    // Two sessions do not see each other's tasks.
    const b = await connectHTTP(server.url, 'conch-ts-http-b', errors);
    clients.push(b);
    let r = await call(b.client, 'task_output', { task_id: 'bash-1' });
    out.otherSession = { texts: texts(r), isError: !!r.isError };
    r = await call(b.client, 'task_list', {});
    out.otherSession.list = texts(r);

    // Closing a session (DELETE) kills its tasks.
    const pidFile = path.join(tmp, 'http-dispose');
    r = await call(a.client, 'bash', bash(`${pidLine('$$')} > ${pidFile}; exec sleep 1034`, { run_in_background: true }));
    const [taskPid] = await pids(pidFile, 1);
    const start = Date.now();
    a.client.ending = true;
    await a.transport.terminateSession();
    out.terminate = { deletedAfterMs: Date.now() - start, deadAfterMs: await msUntilDead([taskPid]) };
    await a.client.close();
    b.client.ending = true;
    await b.transport.terminateSession();
    await b.client.close();
  } catch (e) {
    out.fatal = e.stack || String(e);
    for (const c of clients) await c.client.close().catch(() => {});
  }
  if (server) {
    const start = Date.now();
    server.child.kill('SIGTERM');
    out.exit = await state.exited;
    out.exit.afterMs = Date.now() - start;
  }
  out.stdout = state.stdout;
  out.errors = errors;
  out.logs = state.logs;
  return out;
}

const [stdio, http] = await Promise.all([overStdio(), overHTTP()]);
fs.rmSync(tmp, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ stdio, http }, null, 2) + '\n');
