// An elicitation server written with the TypeScript SDK 2.x (`@modelcontextprotocol/server`), which speaks
// 2026-07-28 (tools return `inputRequired(...)`: several input requests at once, several rounds, opaque
// `requestState`) and, through the SDK's legacy shim, the handshake era from the same handlers.
//
//   node ts_sdk2_server.mjs --stdio        talk over stdio (serveStdio: the opening message picks the era)
//   node ts_sdk2_server.mjs --port 0       Streamable HTTP on 127.0.0.1; prints "listening at URL" on stderr;
//                                          2026-07-28 requests go to createMcpHandler, handshake-era ones to a
//                                          session of their own (the shim sends real elicitation/create requests)
//
// Every result is structured content that says which era served it.
// Tools:
//   ask {schema, message?}   one form with `schema` as it is; the answer is checked with the SDK's AJV validator
//                            (fromJsonSchema + acceptedContent) and returned as {era, action, content, valid}
//   book                     round 1 asks for `who` and `when` at once, round 2 for `confirm`; each round's
//                            requestState must come back exactly as sent (it carries odd characters on purpose);
//                            returns {era, rounds: [{state_ok, answers: {key: {action, content}}}]}
//   sign_in {url}            URL mode; returns {era, action}
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import {
  McpServer,
  WebStandardStreamableHTTPServerTransport,
  acceptedContent,
  createMcpHandler,
  fromJsonSchema,
  inputRequired,
  inputResponse,
  isLegacyRequest,
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

// requestState the client must echo verbatim: base64-ish, JSON punctuation, non-ASCII and a long tail.
const STATE_SUFFIX = `+/=~"\\ é 日本 ${'x'.repeat(2000)}`;
const issued = new Set();

function mint(round, extra) {
  const state = JSON.stringify({ round, id: randomUUID(), extra, tail: STATE_SUFFIX });
  issued.add(state);
  return state;
}

function answerOf(ctx, key) {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  return view.kind === 'elicit' ? { action: view.action, content: view.content ?? null } : { action: view.kind };
}

function result(data) {
  return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
}

function makeServer({ era }) {
  const server = new McpServer({ name: 'ts-sdk2-elicit', version: '2.4.0' }, { capabilities: { tools: {} } });

  server.registerTool(
    'ask',
    {
      description: 'Ask the client for the given schema',
      inputSchema: z.object({ schema: z.record(z.string(), z.unknown()), message: z.string().optional() }),
    },
    async ({ schema, message }, ctx) => {
      if (!ctx.mcpReq.inputResponses?.f) {
        return inputRequired({
          inputRequests: { f: inputRequired.elicit({ message: message ?? 'Please answer', requestedSchema: schema }) },
        });
      }
      const { action, content } = answerOf(ctx, 'f');
      // As a TypeScript SDK 2.x tool checks its answer: a Standard Schema over the SDK's AJV validator.
      const checked = acceptedContent(ctx.mcpReq.inputResponses, 'f', fromJsonSchema(schema));
      const valid = action === 'accept' ? checked !== undefined : null;
      return result({ era, action, content, valid });
    },
  );

  server.registerTool('book', { description: 'Two rounds, two questions in the first' }, async (ctx) => {
    const raw = ctx.mcpReq.requestState();
    if (raw === undefined) {
      return inputRequired({
        inputRequests: {
          who: inputRequired.elicit({
            message: 'Who is coming?',
            requestedSchema: {
              type: 'object',
              properties: { name: { type: 'string', minLength: 1 }, guests: { type: 'integer', minimum: 1, maximum: 8 } },
              required: ['name'],
            },
          }),
          when: inputRequired.elicit({
            message: 'Which day?',
            requestedSchema: {
              type: 'object',
              properties: { day: { type: 'string', format: 'date' } },
              required: ['day'],
            },
          }),
        },
        requestState: mint(1, []),
      });
    }
    const state = JSON.parse(raw);
    const round = {
      state_ok: issued.has(raw),
      answers: Object.fromEntries(Object.keys(ctx.mcpReq.inputResponses ?? {}).sort().map((key) => [key, answerOf(ctx, key)])),
    };
    const rounds = [...state.extra, round];
    if (state.round === 1) {
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: 'Book it?',
            requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
          }),
        },
        requestState: mint(2, rounds),
      });
    }
    return result({ era, rounds });
  });

  server.registerTool(
    'sign_in',
    { description: 'URL mode', inputSchema: z.object({ url: z.string() }) },
    async ({ url }, ctx) => {
      if (!ctx.mcpReq.inputResponses?.page) {
        return inputRequired({
          inputRequests: { page: inputRequired.elicitUrl({ message: 'Please sign in on the page', url }) },
        });
      }
      return result({ era, action: answerOf(ctx, 'page').action });
    },
  );
  return server;
}

// -- HTTP: node:http <-> web Request/Response ----------------------------------------------------------------------

function toWebRequest(request, port) {
  const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : Readable.toWeb(request);
  return new Request(`http://127.0.0.1:${port}${request.url}`, {
    method: request.method,
    headers: Object.entries(request.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
    body,
    duplex: 'half',
  });
}

async function sendWebResponse(webResponse, response) {
  response.writeHead(webResponse.status, Object.fromEntries(webResponse.headers));
  response.flushHeaders();
  if (webResponse.body) {
    for await (const chunk of webResponse.body) response.write(chunk);
  }
  response.end();
}

if (process.argv.includes('--stdio')) {
  serveStdio(makeServer);
} else {
  const port = Number(process.argv[process.argv.indexOf('--port') + 1] ?? 0);
  const modern = createMcpHandler(makeServer, { legacy: 'reject' });
  const sessions = new Map();
  async function legacy(request) {
    const sessionId = request.headers.get('mcp-session-id');
    let transport = sessionId ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId || request.method !== 'POST') return new Response(null, { status: 404 });
      transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => sessions.delete(transport.sessionId);
      await makeServer({ era: 'legacy' }).connect(transport);
    }
    return transport.handleRequest(request);
  }
  const http = createServer(async (request, response) => {
    try {
      const web = toWebRequest(request, http.address().port);
      const answer = (await isLegacyRequest(web)) ? await legacy(web) : await modern.fetch(web);
      await sendWebResponse(answer, response);
    } catch (error) {
      process.stderr.write(`request failed: ${error}\n`);
      if (!response.headersSent) response.writeHead(500);
      response.end();
    }
  });
  http.listen(port, '127.0.0.1', () => {
    process.stderr.write(`listening at http://127.0.0.1:${http.address().port}/mcp\n`);
  });
}
