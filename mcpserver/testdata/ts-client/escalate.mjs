// Drives `conch serve --sandbox workspace-write` with the official
// TypeScript MCP client: each command writes a file in the home, outside
// the workspace, which the sandbox denies; the elicitation handler then
// answers the question to run it again outside the sandbox with accept,
// decline and cancel; a last command asks to run outside the sandbox
// (outside_sandbox) before it runs, and is accepted. Also a client
// without the elicitation capability.
// Prints what it saw as one JSON object on stdout; the Go test
// TestTSClientEscalation (cmd/conch) runs it and checks that object.
//
//   node escalate.mjs <conch binary> <home> <work dir>
//
// Each command counts its runs in <work dir>/runs-<name>, so the Go test
// and the handler see how often it ran.
import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, home, work] = process.argv.slice(2);
if (!bin || !home || !work) {
  console.error('usage: node escalate.mjs <conch binary> <home> <work dir>');
  process.exit(2);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const command = (name) => {
  const args = {
    command: `echo run >> runs-${name}; echo x > ~/outside-${name}`,
    description: 'Write a file outside the workspace',
  };
  if (name === 'outside') {
    args.outside_sandbox = true;
    args.justification = 'write a file in the home directory';
  }
  return args;
};
const wrote = (name) => fs.existsSync(path.join(home, 'outside-' + name));
const runs = (name) => {
  try {
    return fs.readFileSync(path.join(work, 'runs-' + name), 'utf8').split('\n').length - 1;
  } catch {
    return 0;
  }
};

function serverEnv() {
  const env = getDefaultEnvironment();
  for (const k of ['CONCHTEST_MARKER', 'TMPDIR', 'XDG_STATE_HOME']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  env.HOME = home;
  return env;
}

async function serve(name, answers) {
  const out = { calls: [], asked: [] };
  let current = '';
  const transport = new StdioClientTransport({
    command: bin,
    args: ['serve', '--sandbox', 'workspace-write', '--cwd', work],
    env: serverEnv(),
    stderr: 'pipe',
  });
  let logs = '';
  transport.stderr.on('data', (d) => (logs += d));
  const client = new Client({ name, version: '0' }, { capabilities: answers ? { elicitation: { form: {} } } : {} });
  if (answers) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      const q = {
        message: request.params.message,
        choices: request.params.requestedSchema?.properties?.decision?.enum,
      };
      await sleep(100); // a second run that did not wait would show
      q.runsWhileAsked = runs(current);
      q.wroteWhileAsked = wrote(current);
      out.asked.push(q);
      return answers.shift();
    });
  }
  try {
    await client.connect(transport);
    for (const call of answers ? ['accepted', 'declined', 'cancelled', 'outside'] : ['nocap']) {
      current = call;
      const r = await client.callTool({ name: 'bash', arguments: command(call) });
      out.calls.push({ name: call, text: r.content[0].text, isError: !!r.isError, runs: runs(call), wrote: wrote(call) });
    }
  } catch (e) {
    out.fatal = e.stack || String(e);
  }
  await client.close().catch(() => {});
  out.logs = logs;
  return out;
}

const [elicit, nocap] = await Promise.all([
  serve('conch-ts-escalate', [
    { action: 'accept', content: { decision: 'Allow once' } },
    { action: 'decline' },
    { action: 'cancel' },
    { action: 'accept', content: { decision: 'Allow once' } },
  ]),
  serve('conch-ts-no-elicitation', null),
]);
console.log(JSON.stringify({ elicit, nocap }));
