// Drives `conch serve --config <file>` with the official TypeScript MCP
// client and an elicitation handler answering as a user would: accept
// once, accept for the session, decline, cancel, and never. Also a client
// without the elicitation capability, and two HTTP sessions. Prints what
// it saw as one JSON object on stdout; the Go test TestTSClientApproval
// (cmd/conch) runs it and checks that object.
//
//   node approval.mjs <conch binary> <config file> <work dir>
//
// The configuration asks before `touch`; every command touches a file in
// <work dir>, so the Go test sees what ran.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, config, work] = process.argv.slice(2);
if (!bin || !config || !work) {
  console.error('usage: node approval.mjs <conch binary> <config file> <work dir>');
  process.exit(2);
}
const TOKEN = 'ts-client-token';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const touch = (name) => ({ command: 'touch ' + path.join(work, name), description: 'Touch a test file' });
const exists = (name) => fs.existsSync(path.join(work, name));

function serverEnv() {
  const env = getDefaultEnvironment();
  for (const k of ['CONCHTEST_MARKER', 'TMPDIR', 'XDG_STATE_HOME']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  return env;
}

// user is an elicitation handler that answers with the next of answers;
// 'never' leaves the question open until the server withdraws it. Each
// question is recorded, with whether the file existed while it was open.
function user(answers, file) {
  const asked = [];
  const handler = async (request, extra) => {
    const answer = answers.shift();
    const q = {
      message: request.params.message,
      mode: request.params.mode,
      choices: request.params.requestedSchema?.properties?.decision?.enum,
      ranWhileAsked: exists(file()),
    };
    asked.push(q);
    if (answer === 'never') {
      await new Promise((resolve) => extra.signal.addEventListener('abort', resolve));
      q.withdrawn = true;
      throw new Error('withdrawn');
    }
    await sleep(100); // a command that ran anyway would show
    q.ranWhileAsked ||= exists(file());
    return answer;
  };
  return { asked, handler };
}

function newClient(name, u) {
  const caps = u ? { elicitation: { form: {} } } : {};
  const client = new Client({ name, version: '0' }, { capabilities: caps });
  if (u) client.setRequestHandler(ElicitRequestSchema, u.handler);
  return client;
}

async function result(promise) {
  try {
    const r = await promise;
    return { text: r.content[0].text, isError: !!r.isError };
  } catch (e) {
    return { thrown: String(e.message || e) };
  }
}

async function overStdio() {
  const out = { calls: [] };
  let current = '';
  const u = user(
    [
      { action: 'accept', content: { decision: 'Allow once' } },
      { action: 'decline' },
      { action: 'cancel' },
      'never',
      { action: 'accept', content: { decision: 'Allow touch for this session' } },
    ],
    () => current,
  );
  const transport = new StdioClientTransport({ command: bin, args: ['serve', '--config', config], env: serverEnv(), stderr: 'pipe' });
  let logs = '';
  transport.stderr.on('data', (d) => (logs += d));
  const client = newClient('conch-ts-approval', u);
  try {
    await client.connect(transport);
    for (const name of ['once', 'declined', 'cancelled']) {
      current = name;
      out.calls.push({ name, ...(await result(client.callTool({ name: 'bash', arguments: touch(name) }))), ran: exists(name) });
    }
    // Never answered: the client gives up on the call; the server withdraws
    // the question and runs nothing.
    current = 'never';
    const ac = new AbortController();
    const pending = result(client.callTool({ name: 'bash', arguments: touch('never') }, undefined, { signal: ac.signal }));
    await sleep(1000);
    ac.abort();
    out.calls.push({ name: 'never', ...(await pending) });
    await sleep(500);
    out.calls.at(-1).ran = exists('never');
    for (const name of ['session1', 'session2']) {
      current = name;
      out.calls.push({ name, ...(await result(client.callTool({ name: 'bash', arguments: touch(name) }))), ran: exists(name) });
    }
  } catch (e) {
    out.fatal = e.stack || String(e);
  }
  await client.close().catch(() => {});
  out.asked = u.asked;
  out.logs = logs;
  return out;
}

async function withoutCapability() {
  const transport = new StdioClientTransport({ command: bin, args: ['serve', '--config', config], env: serverEnv(), stderr: 'pipe' });
  const client = newClient('conch-ts-no-elicitation', null);
  const out = {};
  try {
    await client.connect(transport);
    Object.assign(out, await result(client.callTool({ name: 'bash', arguments: touch('nocap') })), { ran: exists('nocap') });
  } catch (e) {
    out.fatal = e.stack || String(e);
  }
  await client.close().catch(() => {});
  return out;
}

// Two HTTP sessions of one server: a's "for this session" stays in a.
async function overHTTP() {
  const child = spawn(bin, ['serve', '--config', config, '--http', '127.0.0.1:0'], {
    env: { ...serverEnv(), CONCH_TOKEN: TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let logs = '';
  child.stderr.on('data', (d) => (logs += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const out = {};
  const clients = [];
  try {
    let url;
    for (let i = 0; i < 250 && !url; i++) {
      url = /url=(http:\/\/\S+)/.exec(logs)?.[1];
      if (!url) await sleep(20);
    }
    if (!url) throw new Error('the server logged no URL');
    const connect = async (name, u) => {
      const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: 'Bearer ' + TOKEN } } });
      const client = newClient(name, u);
      await client.connect(transport);
      clients.push(client);
      return client;
    };
    let current = '';
    const ua = user([{ action: 'accept', content: { decision: 'Allow touch for this session' } }], () => current);
    const ub = user([{ action: 'decline' }], () => current);
    const a = await connect('a', ua);
    const b = await connect('b', ub);
    current = 'a1';
    out.a1 = await result(a.callTool({ name: 'bash', arguments: touch('a1') }));
    current = 'a2';
    out.a2 = await result(a.callTool({ name: 'bash', arguments: touch('a2') }));
    current = 'b1';
    out.b1 = await result(b.callTool({ name: 'bash', arguments: touch('b1') }));
    out.askedA = ua.asked.length;
    out.askedB = ub.asked.length;
    out.ran = ['a1', 'a2', 'b1'].filter(exists);
  } catch (e) {
    out.fatal = e.stack || String(e);
  }
  for (const c of clients) await c.close().catch(() => {});
  child.kill('SIGTERM');
  await exited;
  out.logs = logs;
  return out;
}

const [stdio, nocap, http] = await Promise.all([overStdio(), withoutCapability(), overHTTP()]);
console.log(JSON.stringify({ stdio, nocap, http }));
