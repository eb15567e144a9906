// The TypeScript SDK's client against tapebot's MCP server, over stdio or streamable HTTP.
// Usage: node ts_client.mjs http URL [TOKEN]  |  node ts_client.mjs stdio COMMAND [ARGS...]
// Prints one JSON object: what the client saw (tools, a call, resources, a read, prompts, a prompt).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [mode, target, ...rest] = process.argv.slice(2);
let transport;
if (mode === "http") {
  const token = rest[0];
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "ignore" });
}
const client = new Client({ name: "tapebot-interop", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name);
  out.annotations = Object.fromEntries(tools.tools.map((t) => [t.name, t.annotations ?? null]));
  const progress = [];
  const call = await client.callTool(
    { name: "get_market_price", arguments: { code: 600519 } },
    { onprogress: (p) => progress.push(p.progress) },
  );
  out.call = { isError: call.isError ?? false, structured: call.structuredContent ?? null };
  const resources = await client.listResources();
  out.resources = resources.resources.map((r) => r.uri);
  const templates = await client.listResourceTemplates();
  out.templates = templates.resourceTemplates.map((t) => t.uriTemplate);
  const read = await client.readResource({ uri: "tapebot://stock/600519/price" });
  out.read = read.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType, text: c.text }));
  const prompts = await client.listPrompts();
  out.prompts = prompts.prompts.map((p) => p.name);
  const prompt = await client.getPrompt({ name: "report", arguments: { arguments: "600519" } });
  out.prompt = prompt.messages.map((m) => m.content.text ?? "");
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
    out.unknown = "no error";
  } catch (err) {
    out.unknown = { code: err.code ?? null, message: String(err.message ?? err) };
  }
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
