#!/usr/bin/env node
// An MCP server that implements what the MCP conformance suite's server
// scenarios call (its tools, resources, prompts, logging, completion, and
// SEP-1699's stream that closes mid-call), written on the official
// TypeScript SDK: the upstream that cli/tests/conformance.rs runs the
// suite against, directly and through `idem gateway`.
//
//   node upstream.mjs --http PORT   streamable HTTP at http://127.0.0.1:PORT/mcp
//   node upstream.mjs --stdio       stdio
//
// Besides the suite's tools, `close_stream_and_hang`,
// `hold_until_released` and `close_standalone_and_notify` are for idem's
// own tests. Over HTTP it keeps every session's events, so that a stream it closes
// mid-call (test_reconnection) can be resumed with Last-Event-ID, and it
// serves only loopback Host names, as a local server must.

import { randomUUID } from "node:crypto";
import { appendFileSync, existsSync } from "node:fs";
import http from "node:http";

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  CreateMessageResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

// A 1x1 PNG and a minimal WAV.
const IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const text = (value) => ({ content: [{ type: "text", text: value }] });
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const noArguments = { type: "object", properties: {} };

// ---- Tools: name -> { description, inputSchema, run(args, extra, server) }

/** What an elicitation asked for, answered as the suite expects to read it. */
async function elicit(server, params, label) {
  try {
    const answer = await server.request({ method: "elicitation/create", params }, ElicitResultSchema);
    return text(`${label}: action=${answer.action}, content=${JSON.stringify(answer.content || {})}`);
  } catch (error) {
    return text(`Elicitation not supported or error: ${error.message}`);
  }
}

const ENUMS = {
  untitledSingle: { type: "string", description: "Select one option", enum: ["option1", "option2", "option3"] },
  titledSingle: {
    type: "string",
    description: "Select one option with titles",
    oneOf: [
      { const: "value1", title: "First Option" },
      { const: "value2", title: "Second Option" },
      { const: "value3", title: "Third Option" },
    ],
  },
  legacyEnum: {
    type: "string",
    description: "Select one option (legacy)",
    enum: ["opt1", "opt2", "opt3"],
    enumNames: ["Option One", "Option Two", "Option Three"],
  },
  untitledMulti: {
    type: "array",
    description: "Select multiple options",
    minItems: 1,
    maxItems: 3,
    items: { type: "string", enum: ["option1", "option2", "option3"] },
  },
  titledMulti: {
    type: "array",
    description: "Select multiple options with titles",
    minItems: 1,
    maxItems: 3,
    items: {
      anyOf: [
        { const: "value1", title: "First Choice" },
        { const: "value2", title: "Second Choice" },
        { const: "value3", title: "Third Choice" },
      ],
    },
  },
};

const DEFAULTS = {
  name: { type: "string", description: "User name", default: "John Doe" },
  age: { type: "integer", description: "User age", default: 30 },
  score: { type: "number", description: "User score", default: 95.5 },
  status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
  verified: { type: "boolean", description: "Verification status", default: true },
};

const TOOLS = {
  test_simple_text: {
    description: "Tests simple text content response",
    run: async () => text("This is a simple text response for testing."),
  },
  test_image_content: {
    description: "Tests image content response",
    run: async () => ({ content: [{ type: "image", data: IMAGE, mimeType: "image/png" }] }),
  },
  test_audio_content: {
    description: "Tests audio content response",
    run: async () => ({ content: [{ type: "audio", data: AUDIO, mimeType: "audio/wav" }] }),
  },
  test_embedded_resource: {
    description: "Tests embedded resource content response",
    run: async () => ({
      content: [
        {
          type: "resource",
          resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
        },
      ],
    }),
  },
  test_multiple_content_types: {
    description: "Tests response with multiple content types (text, image, resource)",
    run: async () => ({
      content: [
        { type: "text", text: "Multiple content types test:" },
        { type: "image", data: IMAGE, mimeType: "image/png" },
        {
          type: "resource",
          resource: {
            uri: "test://mixed-content-resource",
            mimeType: "application/json",
            text: JSON.stringify({ test: "data", value: 123 }),
          },
        },
      ],
    }),
  },
  test_tool_with_logging: {
    description: "Tests tool that emits log messages during execution",
    run: async (_args, extra) => {
      for (const data of ["Tool execution started", "Tool processing data", "Tool execution completed"]) {
        await extra.sendNotification({ method: "notifications/message", params: { level: "info", data } });
        await pause(50);
      }
      return text("Tool with logging executed successfully");
    },
  },
  test_tool_with_progress: {
    description: "Tests tool that reports progress notifications",
    run: async (_args, extra) => {
      const progressToken = extra._meta?.progressToken ?? 0;
      for (const progress of [0, 50, 100]) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` },
        });
        await pause(50);
      }
      return text(String(progressToken));
    },
  },
  test_error_handling: {
    description: "Tests error response handling",
    run: async () => {
      throw new Error("This tool intentionally returns an error for testing");
    },
  },
  test_reconnection: {
    description:
      "Tests SSE stream disconnection and client reconnection (SEP-1699): closes the stream mid-call and answers after the client reconnects.",
    run: async (_args, extra) => {
      extra.closeSSEStream?.();
      await pause(100);
      return text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.");
    },
  },
  // Not the suite's: for idem's own tests of a stream that cannot be
  // resumed. Writes a line to $IDEM_UPSTREAM_LEDGER, closes the answer
  // stream, and never answers.
  close_stream_and_hang: {
    description: "Writes a line to the ledger, closes its answer stream, and never answers.",
    run: async (_args, extra) => {
      if (process.env.IDEM_UPSTREAM_LEDGER) {
        appendFileSync(process.env.IDEM_UPSTREAM_LEDGER, "close_stream_and_hang\n");
      }
      extra.closeSSEStream?.();
      await new Promise(() => {});
    },
  },
  // Also for idem's own tests: writes a line to $IDEM_UPSTREAM_LEDGER, says
  // so on its stream, then answers once $IDEM_UPSTREAM_LEDGER.release
  // exists (a test cuts the connection in between).
  hold_until_released: {
    description: "Writes a line to the ledger, then answers once released.",
    run: async (_args, extra) => {
      const ledger = process.env.IDEM_UPSTREAM_LEDGER;
      if (ledger) appendFileSync(ledger, "hold_until_released\n");
      await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: "held" } });
      while (ledger && !existsSync(`${ledger}.release`)) await pause(20);
      return text("released");
    },
  },
  // Also for idem's own tests: closes the session's standalone stream, then
  // sends a notification that belongs to no request, which a client has
  // only if it resumed that stream.
  close_standalone_and_notify: {
    description: "Logs a message on the standalone stream, closes it, then logs another.",
    run: async (_args, extra, server) => {
      const log = (data) =>
        server.notification({ method: "notifications/message", params: { level: "info", data } }).catch(() => {});
      await log("before the standalone stream closed");
      await pause(50);
      extra.closeStandaloneSSEStream?.();
      await pause(50);
      await log("after the standalone stream closed");
      return text("closed");
    },
  },
  test_sampling: {
    description: "Tests server-initiated sampling (LLM completion request)",
    inputSchema: {
      type: "object",
      properties: { prompt: { type: "string", description: "The prompt to send to the LLM" } },
      required: ["prompt"],
    },
    run: async (args, _extra, server) => {
      try {
        const answer = await server.request(
          {
            method: "sampling/createMessage",
            params: { messages: [{ role: "user", content: { type: "text", text: args.prompt } }], maxTokens: 100 },
          },
          CreateMessageResultSchema,
        );
        return text(`LLM response: ${answer.content?.text || "No response"}`);
      } catch (error) {
        return text(`Sampling not supported or error: ${error.message}`);
      }
    },
  },
  test_elicitation: {
    description: "Tests server-initiated elicitation (user input request)",
    inputSchema: {
      type: "object",
      properties: { message: { type: "string", description: "The message to show the user" } },
      required: ["message"],
    },
    run: (args, _extra, server) =>
      elicit(
        server,
        {
          message: args.message,
          requestedSchema: {
            type: "object",
            properties: { response: { type: "string", description: "User's response" } },
            required: ["response"],
          },
        },
        "User response",
      ),
  },
  test_elicitation_sep1034_defaults: {
    description: "Tests elicitation with default values per SEP-1034",
    run: (_args, _extra, server) =>
      elicit(
        server,
        {
          message: "Please review and update the form fields with defaults",
          requestedSchema: { type: "object", properties: DEFAULTS, required: [] },
        },
        "Elicitation completed",
      ),
  },
  test_elicitation_sep1330_enums: {
    description: "Tests elicitation with enum schema improvements per SEP-1330",
    run: (_args, _extra, server) =>
      elicit(
        server,
        {
          message: "Please select options from the enum fields",
          requestedSchema: { type: "object", properties: ENUMS, required: [] },
        },
        "Elicitation completed",
      ),
  },
  json_schema_2020_12_tool: {
    description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: {
        address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } },
      },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    },
    run: async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
  },
};

// ---- Resources and prompts

const RESOURCES = {
  "test://static-text": {
    name: "static-text",
    title: "Static Text Resource",
    description: "A static text resource for testing",
    mimeType: "text/plain",
    contents: { text: "This is the content of the static text resource." },
  },
  "test://static-binary": {
    name: "static-binary",
    title: "Static Binary Resource",
    description: "A static binary resource (image) for testing",
    mimeType: "image/png",
    contents: { blob: IMAGE },
  },
  "test://watched-resource": {
    name: "watched-resource",
    title: "Watched Resource",
    description: "A resource that can be subscribed to",
    mimeType: "text/plain",
    contents: { text: "Watched resource content" },
  },
};

const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;

const PROMPTS = {
  test_simple_prompt: {
    title: "Simple Test Prompt",
    description: "A simple prompt without arguments",
    messages: () => [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
  },
  test_prompt_with_arguments: {
    title: "Prompt With Arguments",
    description: "A prompt with required arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
    messages: (a) => [
      { role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'` } },
    ],
  },
  test_prompt_with_embedded_resource: {
    title: "Prompt With Embedded Resource",
    description: "A prompt that includes an embedded resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
    messages: (a) => [
      {
        role: "user",
        content: {
          type: "resource",
          resource: { uri: a.resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." },
        },
      },
      { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
    ],
  },
  test_prompt_with_image: {
    title: "Prompt With Image",
    description: "A prompt that includes image content",
    messages: () => [
      { role: "user", content: { type: "image", data: IMAGE, mimeType: "image/png" } },
      { role: "user", content: { type: "text", text: "Please analyze the image above." } },
    ],
  },
};

/** One MCP server, for one session (or for stdio). */
function newServer() {
  const server = new Server(
    { name: "idem-conformance-upstream", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const log = (data) =>
    server
      .notification({ method: "notifications/message", params: { level: "info", logger: "conformance-upstream", data } })
      .catch(() => {});

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOLS).map(([name, tool]) => ({
      name,
      description: tool.description,
      inputSchema: tool.inputSchema ?? noArguments,
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = TOOLS[request.params.name];
    if (!tool) {
      return { content: [{ type: "text", text: `Unknown tool: ${request.params.name}` }], isError: true };
    }
    try {
      return await tool.run(request.params.arguments ?? {}, extra, server);
    } catch (error) {
      return { content: [{ type: "text", text: error.message }], isError: true };
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: Object.entries(RESOURCES).map(([uri, r]) => ({
      uri,
      name: r.name,
      title: r.title,
      description: r.description,
      mimeType: r.mimeType,
    })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: "test://template/{id}/data",
        name: "template",
        title: "Resource Template",
        description: "A resource template with parameter substitution",
        mimeType: "application/json",
      },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri;
    const resource = RESOURCES[uri];
    if (resource) {
      return { contents: [{ uri, mimeType: resource.mimeType, ...resource.contents }] };
    }
    const templated = TEMPLATE.exec(uri);
    if (templated) {
      const id = templated[1];
      const data = { id, templateTest: true, data: `Data for ID: ${id}` };
      return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(data) }] };
    }
    throw new Error(`Resource ${uri} not found`);
  });
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    log(`Subscribed to resource: ${request.params.uri}`);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    log(`Unsubscribed from resource: ${request.params.uri}`);
    return {};
  });

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: Object.entries(PROMPTS).map(([name, p]) => ({
      name,
      title: p.title,
      description: p.description,
      arguments: p.arguments,
    })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    const prompt = PROMPTS[request.params.name];
    if (!prompt) throw new Error(`Prompt ${request.params.name} not found`);
    return { messages: prompt.messages(request.params.arguments ?? {}) };
  });

  server.setRequestHandler(SetLevelRequestSchema, async (request) => {
    log(`Log level set to: ${request.params.level}`);
    return {};
  });
  server.setRequestHandler(CompleteRequestSchema, async () => ({
    completion: { values: [], total: 0, hasMore: false },
  }));
  return server;
}

// ---- Transports

/** Every session's events, kept so that a closed stream can be resumed. */
function eventStore() {
  const events = [];
  return {
    async storeEvent(streamId, message) {
      const eventId = `${streamId}::${String(events.length).padStart(8, "0")}`;
      events.push({ eventId, streamId, message });
      return eventId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((e) => e.eventId === lastEventId);
      if (at < 0) throw new Error(`no event ${lastEventId}`);
      const streamId = events[at].streamId;
      for (const event of events.slice(at + 1)) {
        if (event.streamId === streamId) await send(event.eventId, event.message);
      }
      return streamId;
    },
  };
}

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

function refuse(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message } }));
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks).toString("utf8");
  return body ? JSON.parse(body) : undefined;
}

function serveHttp(port) {
  const sessions = new Map();
  const httpServer = http.createServer(async (req, res) => {
    const host = (req.headers.host ?? "").replace(/:\d+$/, "").toLowerCase();
    if (!LOOPBACK.has(host)) return refuse(res, 403, `Host ${req.headers.host} is not served`);
    if (new URL(req.url, "http://localhost").pathname !== "/mcp") return refuse(res, 404, "Not found");
    try {
      const id = req.headers["mcp-session-id"];
      const body = req.method === "POST" ? await readBody(req) : undefined;
      let transport = id ? sessions.get(id) : undefined;
      if (!transport) {
        if (id || req.method !== "POST" || body?.method !== "initialize") {
          return refuse(res, id ? 404 : 400, "Invalid or missing session ID");
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: eventStore(),
          retryInterval: 1000,
          onsessioninitialized: (sessionId) => sessions.set(sessionId, transport),
        });
        transport.onclose = () => sessions.delete(transport.sessionId);
        await newServer().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    } catch (error) {
      if (!res.headersSent) refuse(res, 500, `Internal error: ${error.message}`);
    }
  });
  httpServer.listen(port, "127.0.0.1", () => {
    console.error(`conformance upstream: http://127.0.0.1:${httpServer.address().port}/mcp`);
  });
}

const [mode, port] = process.argv.slice(2);
if (mode === "--http") {
  serveHttp(Number(port ?? 0));
} else if (mode === "--stdio") {
  await newServer().connect(new StdioServerTransport());
} else {
  console.error("usage: upstream.mjs --http PORT | --stdio");
  process.exit(2);
}
