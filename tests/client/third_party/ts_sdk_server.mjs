// An elicitation server written with the TypeScript SDK 1.x (`@modelcontextprotocol/sdk`, handshake era), for
// testing `safedb client` against a stack it did not grow up with.
//
//   node ts_sdk_server.mjs --stdio        talk over stdio
//   node ts_sdk_server.mjs --port 0       Streamable HTTP on 127.0.0.1; prints "listening at URL" on stderr
//
// Tools:
//   ask {schema, message?}    sends `schema` as it is (valid or not) in elicitation/create; the SDK checks an
//                             accepted answer against it with AJV; returns {action, content} as structured content
//   ask_url {url}             URL mode; on accept, reports the elicitation complete
//   needs_url                 fails with URLElicitationRequiredError (-32042) until its page is reported complete
//   busy                      progress and log notifications, sampling and roots requests (which the client
//                             did not declare), then content of every kind
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  UrlElicitationRequiredError,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const TOOLS = [
  {
    name: 'ask',
    description: 'Ask the client for the given schema',
    inputSchema: { type: 'object', properties: { schema: { type: 'object' }, message: { type: 'string' } }, required: ['schema'] },
  },
  { name: 'ask_url', inputSchema: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] } },
  { name: 'needs_url', inputSchema: { type: 'object', properties: {} } },
  { name: 'busy', inputSchema: { type: 'object', properties: {} } },
];

const completedPages = new Set();

function makeServer() {
  const server = new Server({ name: 'ts-sdk-elicit', version: '1.0.0' }, { capabilities: { tools: {}, logging: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {};
    const related = { relatedRequestId: extra.requestId };
    switch (request.params.name) {
      case 'ask': {
        const result = await server.elicitInput(
          { message: args.message ?? 'Please answer', requestedSchema: args.schema },
          related,
        );
        const answer = { action: result.action, content: result.content ?? null };
        return { content: [{ type: 'text', text: JSON.stringify(answer) }], structuredContent: answer };
      }
      case 'ask_url': {
        const elicitationId = randomUUID();
        const result = await server.elicitInput(
          { mode: 'url', message: 'Please sign in on the page', url: args.url, elicitationId },
          related,
        );
        if (result.action === 'accept') {
          setTimeout(() => server.createElicitationCompletionNotifier(elicitationId)().catch(() => {}), 200);
        }
        return { content: [{ type: 'text', text: `url ${result.action}` }], structuredContent: { action: result.action } };
      }
      case 'needs_url': {
        if (completedPages.has('needs-url-page')) {
          return { content: [{ type: 'text', text: 'page was completed; the call goes through' }] };
        }
        setTimeout(() => {
          completedPages.add('needs-url-page');
          server.createElicitationCompletionNotifier('needs-url-page')().catch(() => {});
        }, 500);
        throw new UrlElicitationRequiredError([
          { mode: 'url', message: 'Authorize on the page first', url: 'https://example.com/authorize', elicitationId: 'needs-url-page' },
        ]);
      }
      case 'busy': {
        const token = request.params._meta?.progressToken ?? 'unasked-token';
        for (let step = 1; step <= 3; step++) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: step, total: 3, message: `step ${step}` } });
        }
        for (const level of ['debug', 'info', 'warning', 'error', 'emergency']) {
          await extra.sendNotification({ method: 'notifications/message', params: { level, logger: 'busy', data: { level, text: `log at ${level}` } } });
        }
        const outcomes = {};
        for (const [method, params] of [
          ['sampling/createMessage', { messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 5 }],
          ['roots/list', {}],
        ]) {
          try {
            await extra.sendRequest({ method, params }, z.object({}).passthrough());
            outcomes[method] = 'answered';
          } catch (error) {
            outcomes[method] = `error ${error.code}`;
          }
        }
        return {
          content: [
            { type: 'text', text: 'busy done' },
            { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
            { type: 'resource_link', uri: 'file:///tmp/x.txt', name: 'x.txt' },
            { type: 'resource', resource: { uri: 'file:///tmp/y.txt', text: 'embedded' } },
          ],
          structuredContent: { outcomes },
        };
      }
      default:
        throw new Error(`unknown tool ${request.params.name}`);
    }
  });
  return server;
}

async function readBody(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
}

if (process.argv.includes('--stdio')) {
  await makeServer().connect(new StdioServerTransport());
} else {
  const port = Number(process.argv[process.argv.indexOf('--port') + 1] ?? 0);
  const transports = new Map();
  const http = createServer(async (request, response) => {
    try {
      const sessionId = request.headers['mcp-session-id'];
      let transport = sessionId ? transports.get(sessionId) : undefined;
      const body = request.method === 'POST' ? await readBody(request) : undefined;
      if (!transport) {
        if (sessionId || request.method !== 'POST') {
          response.writeHead(404).end();
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => transports.delete(transport.sessionId);
        await makeServer().connect(transport);
      }
      await transport.handleRequest(request, response, body);
    } catch (error) {
      process.stderr.write(`request failed: ${error}\n`);
      if (!response.headersSent) response.writeHead(500).end();
    }
  });
  http.listen(port, '127.0.0.1', () => {
    process.stderr.write(`listening at http://127.0.0.1:${http.address().port}/mcp\n`);
  });
}
