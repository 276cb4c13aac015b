// Driver for the TypeScript SDK client (@modelcontextprotocol/client), versionNegotiation `legacy` or `auto`,
// over Streamable HTTP or stdio. The test copies this file into the client's npm project (so that the package
// resolves) and runs it with Node 24; see scenario.py for the config it reads and the report it prints.
import { readFileSync } from 'node:fs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const config = JSON.parse(process.argv[2]);
const steps = {};
let current = '';

function answerFor(step) {
  return step === 'accept' ? 'accept' : 'decline';
}

const client = new Client(
  { name: 'safedb-interop-ts', version: '1.0.0' },
  { versionNegotiation: { mode: config.mode }, capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler('elicitation/create', async (request) => {
  const params = request.params;
  const schema = params.requestedSchema ?? {};
  const action = answerFor(current);
  steps[current].elicitations.push({
    mode: params.mode ?? 'form',
    message: params.message,
    fields: Object.keys(schema.properties ?? {}).sort(),
    required: [...(schema.required ?? [])].sort(),
  });
  steps[current].answered.push(action);
  return action === 'accept' ? { action, content: config.answer } : { action };
});

const transport = config.url
  ? new StreamableHTTPClientTransport(new URL(config.url))
  : new StdioClientTransport({ command: config.command, args: config.args, env: { ...process.env, ...config.env } });

const timer = setTimeout(() => {
  console.error('driver timed out');
  process.exit(3);
}, 120_000);

await client.connect(transport);
const tools = (await client.listTools()).tools.map((tool) => tool.name);
for (const step of ['read', 'accept', 'decline']) {
  current = step;
  steps[step] = { elicitations: [], answered: [], result: null, error: null };
  try {
    const result = await client.callTool({ name: 'execute_query', arguments: { query: config.statements[step] } });
    const text = (result.content ?? []).find((block) => block.type === 'text');
    steps[step].result = {
      is_error: Boolean(result.isError),
      structured: result.structuredContent ?? null,
      text: text ? text.text : '',
    };
  } catch (error) {
    steps[step].error = `${error?.name ?? 'Error'}: ${error?.message ?? error}`;
  }
}
const protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
await client.close();
clearTimeout(timer);

const manifest = new URL('./node_modules/@modelcontextprotocol/client/package.json', import.meta.url);
const report = {
  client: 'TypeScript SDK Client',
  version: JSON.parse(readFileSync(manifest, 'utf8')).version,
  mode: config.mode,
  transport: config.url ? 'http' : 'stdio',
  protocol_version: protocolVersion,
  tools: tools.sort(),
  steps,
};
console.log('INTEROP-REPORT ' + JSON.stringify(report));
