// The TypeScript SDK's remote transports (@agentclientprotocol/sdk) drive a live /acp:
// initialize → session/new → streamed prompt → cancel → load, then print one JSON summary line.
// Usage: node acp_remote_client.mjs <http|ws> <base url>   (NODE_PATH: where the SDK is installed)
import { createRequire } from "node:module";
import path from "node:path";

const [kind, base] = process.argv.slice(2);
const root = process.env.ACP_SDK_DIR;
const load = (spec) => import(path.join(root, "node_modules", "@agentclientprotocol", "sdk", spec));
const acp = await load("dist/v1/stable/acp.js");
const { methods } = acp;

async function stream() {
  if (kind === "http") {
    const { createHttpStream } = await load("dist/transports/http-stream.js");
    return createHttpStream(`${base}/acp`);
  }
  const { createWebSocketStream } = await load("dist/transports/ws-stream.js");
  const require = createRequire(path.join(root, "package.json"));
  const options = globalThis.WebSocket ? {} : { WebSocket: require("ws").WebSocket };
  return createWebSocketStream(`${base.replace(/^http/, "ws")}/acp`, options);
}

function recorder() {
  const updates = [];
  let chunk = () => {};
  const chunkArrived = new Promise((resolve) => { chunk = resolve; });
  const app = acp.client({ name: "ts-test" }).onNotification(methods.client.session.update, (arg) => {
    const params = arg && arg.params ? arg.params : arg;
    updates.push(params);
    if (params.update.sessionUpdate === "agent_message_chunk") chunk();
  });
  const text = (kind) =>
    updates.filter((p) => p.update.sessionUpdate === kind).map((p) => p.update.content.text).join("");
  return { app, updates, chunkArrived, text };
}

const summary = {};
const first = recorder();
await first.app.connectWith(await stream(), async (agent) => {
  const init = await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  summary.protocolVersion = init.protocolVersion;
  const session = await agent.request(methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
  summary.sessionId = session.sessionId;
  const answer = await agent.request(methods.agent.session.prompt, {
    sessionId: session.sessionId, prompt: [{ type: "text", text: "hello" }],
  });
  summary.firstStop = answer.stopReason;
  summary.firstText = first.text("agent_message_chunk");
  const long = agent.request(methods.agent.session.prompt, {
    sessionId: session.sessionId, prompt: [{ type: "text", text: "long" }],
  });
  await first.chunkArrived;
  await agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
  summary.cancelledStop = (await long).stopReason;
});
const second = recorder();
await second.app.connectWith(await stream(), async (agent) => {
  await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  await agent.request(methods.agent.session.load, { sessionId: summary.sessionId, cwd: "/tmp", mcpServers: [] });
  summary.replayedUser = second.text("user_message_chunk");
  summary.replayedAgent = second.text("agent_message_chunk");
  summary.replaySessions = [...new Set(second.updates.map((p) => p.sessionId))];
});
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(0);
