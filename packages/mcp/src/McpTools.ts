/**
 * MCP servers as a source of rx tools, on the official `@modelcontextprotocol/sdk` client.
 *
 * Each server is started (stdio, in the run's sandbox) or reached (streamable HTTP, else SSE)
 * once, its `tools/list` read, and each of its tools becomes an rx tool named `NAME__tool`:
 * its JSON Schema checks a call before it is sent (a call that fails it is rejected, not sent),
 * `readOnlyHint`/`idempotentHint` make it idempotent, `destructiveHint` puts it in `ask`. A call
 * has a timeout that cancels the request; an `isError` result, a protocol error, a timeout or a
 * server that died are recorded failures the model sees, never defects. Output is capped. The
 * servers are stopped when the scope closes.
 *
 * On resume, `pinned` (the tools the goal recorded) keeps the goal's tool set: a server's tool
 * is offered with its recorded schema, new tools are not offered, and what changed is said.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type CallToolResult, ErrorCode, McpError as ProtocolError, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js"
import { Tool } from "@rx/kernel"
import { Sandbox } from "@rx/tools"
import { Ajv, type ErrorObject } from "ajv"
import { Effect, Either, Option, Schema, type Scope } from "effect"
import * as Names from "./internal/names.js"
import * as Output from "./internal/output.js"
import type * as Servers from "./Servers.js"

/** A server could not be started, reached or listed: the run does not start. */
export class McpError extends Schema.TaggedError<McpError>()("@rx/mcp/McpError", {
  server: Schema.String,
  message: Schema.String
}) {}

export interface Options {
  /** The folder stdio servers run in (and, sandboxed, the only one they may write). */
  readonly workspace: string
  /** The run's sandbox (`Sandbox.resolve`): stdio servers run in it; none are started without one. */
  readonly sandbox: Sandbox.Sandbox
  /** Protected and hidden paths of the workspace (`Sandbox.guardsOf`), held in the sandbox. */
  readonly guards?: ReadonlyArray<Sandbox.Guard>
  /** The tools a resumed goal recorded: offered as recorded, and compared with the servers'. */
  readonly pinned?: ReadonlyArray<Tool.Spec>
  /** Time one call may take; then it is cancelled (default 60 s). */
  readonly timeoutMs?: number
  /** Time a server may take to start and list its tools (default 30 s). */
  readonly startTimeoutMs?: number
  /** Characters of text a result keeps (default 65,536); the rest is cut, and said so. */
  readonly maxOutputChars?: number
  /** rx's version, as the client introduces itself. */
  readonly version?: string
}

export interface Source {
  readonly tools: ReadonlyArray<Tool.Tool>
  /** Tools their server marks destructive: a person approves each call unless told otherwise. */
  readonly ask: ReadonlyArray<string>
  /** What a person should know: tools not offered and why, what changed since the goal recorded its tools. */
  readonly notes: ReadonlyArray<string>
}

/** Lines of a stdio server's stderr kept, to say why it failed. */
const stderrLines = 20

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** A connected client, its transport's stderr so far, and whether its connection is closed. */
interface Connection {
  readonly client: Client
  readonly stderr: () => string
  readonly closed: () => boolean
}

/**
 * The stdio transport of `server`: the command in the sandbox, or why it cannot run. The server
 * lives as long as the run, so the workspace and its guards are bound by path (`Sandbox.hold`
 * without a descriptor); nothing is created in the workspace to hold them.
 */
const stdio = (server: Extract<Servers.Server, { command: unknown }>, options: Options): Effect.Effect<StdioClientTransport, string> => {
  const [command, ...args] = server.command
  const sandbox = options.sandbox
  switch (sandbox._tag) {
    case "Unavailable":
      return Effect.fail(`it would run without a sandbox (${sandbox.reason}); choose sandbox mode none to run it unsandboxed`)
    case "None":
      return Effect.succeed(new StdioClientTransport({ command, args, cwd: options.workspace, env: getDefaultEnvironment(), stderr: "pipe" }))
    case "Bwrap":
      return Effect.scoped(Sandbox.hold(options.workspace, options.guards ?? [])).pipe(Effect.map((held) =>
        new StdioClientTransport({
          command: sandbox.path,
          args: [...Sandbox.bwrapArgs(options.workspace, server.command, held.args)],
          cwd: "/",
          env: getDefaultEnvironment(),
          stderr: "pipe"
        })
      ))
  }
}

/** Connect `client` over `transport`; the transport is closed if that fails. */
const connectOver = (client: Client, transport: Transport, timeoutMs: number) =>
  Effect.tryPromise({
    try: (signal) => client.connect(transport, { timeout: timeoutMs, signal }),
    catch: describe
  }).pipe(Effect.tapError(() => Effect.promise(() => transport.close().catch(() => undefined))))

/** Start or reach a server, closed with the scope. */
const connect = (server: Servers.Server, options: Options): Effect.Effect<Connection, McpError, Scope.Scope> =>
  Effect.gen(function*() {
    const timeout = options.startTimeoutMs ?? 30_000
    const fail = (why: string) => new McpError({ server: server.name, message: `MCP server ${server.name}: ${why}` })
    const newClient = () => new Client({ name: "rx", version: options.version ?? "0" }, { capabilities: {} })
    let closed = false
    const tail: Array<string> = []
    const stderr = () => (tail.length === 0 ? "" : ` (its stderr: ${tail.join(" | ").slice(-2_000)})`)
    let client = newClient()
    if ("command" in server) {
      const transport = yield* stdio(server, options).pipe(Effect.mapError((why) => fail(`not started: ${why}`)))
      transport.stderr?.on("data", (chunk: Buffer) => {
        tail.push(...chunk.toString("utf8").split("\n").map((line) => line.trim()).filter((line) => line !== ""))
        tail.splice(0, Math.max(0, tail.length - stderrLines))
      })
      yield* connectOver(client, transport, timeout).pipe(
        Effect.mapError((why) => fail(`cannot start ${JSON.stringify(server.command.join(" "))}: ${why}${stderr()}`))
      )
    } else {
      const url = new URL(server.url)
      // Streamable HTTP first; a server that speaks only the older SSE transport gets that.
      const streamable = yield* Effect.either(connectOver(client, new StreamableHTTPClientTransport(url), timeout))
      if (Either.isLeft(streamable)) {
        client = newClient()
        yield* connectOver(client, new SSEClientTransport(url), timeout).pipe(
          Effect.mapError((why) => fail(`cannot connect to ${server.url}: ${streamable.left} (and over SSE: ${why})`))
        )
      }
    }
    const connected = client
    connected.onclose = () => {
      closed = true
    }
    yield* Effect.addFinalizer(() => Effect.promise(() => connected.close().catch(() => undefined)))
    return { client: connected, stderr, closed: () => closed }
  })

/** Every tool a server lists, page by page. */
const listTools = (server: Servers.Server, connection: Connection, timeoutMs: number) =>
  Effect.tryPromise({
    try: async (signal) => {
      const tools: Array<McpTool> = []
      let cursor: string | undefined
      do {
        const page = await connection.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs, signal })
        tools.push(...page.tools)
        cursor = page.nextCursor
      } while (cursor !== undefined && tools.length < 10_000)
      return tools
    },
    catch: (error) => new McpError({ server: server.name, message: `MCP server ${server.name}: cannot list its tools: ${describe(error)}${connection.stderr()}` })
  })

/** A schema's problems with an input, one line. */
const problems = (errors: ReadonlyArray<ErrorObject> | null | undefined): string =>
  (errors ?? []).slice(0, 5).map((e) => `${e.instancePath === "" ? "input" : e.instancePath.slice(1).replace(/\//g, ".")}: ${e.message ?? "is invalid"}`).join("; ") ||
  "the input does not match the tool's schema"

/** Why a call failed, for the model and the log. */
const callFailure = (server: string, tool: string, timeoutMs: number, connection: Connection, error: unknown): string => {
  if (error instanceof ProtocolError && error.code === ErrorCode.RequestTimeout) {
    return `MCP server ${server}: ${tool} took more than ${timeoutMs} ms; the request was cancelled`
  }
  if (connection.closed() || (error instanceof ProtocolError && error.code === ErrorCode.ConnectionClosed)) {
    return `MCP server ${server} is not running any more (its connection closed)${connection.stderr()}; its tools cannot be called in this run`
  }
  return `MCP server ${server}: ${tool} failed: ${describe(error)}`
}

const sameSpec = (a: Tool.Spec, b: Tool.Spec) =>
  a.description === b.description && a.idempotent === b.idempotent && JSON.stringify(a.parameters) === JSON.stringify(b.parameters)

/**
 * Start or reach every server and make its tools. Fails with `McpError` when a server cannot be
 * started, reached or listed, or two tools would take one name; the servers stop with the scope.
 */
export const make = (servers: ReadonlyArray<Servers.Server>, options: Options): Effect.Effect<Source, McpError, Scope.Scope> =>
  Effect.gen(function*() {
    const timeoutMs = options.timeoutMs ?? 60_000
    const maxChars = options.maxOutputChars ?? 64 * 1024
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false })
    const pinned = options.pinned === undefined ? undefined : new Map(options.pinned.map((spec) => [spec.name, spec]))
    const tools: Array<Tool.Tool> = []
    const ask: Array<string> = []
    const notes: Array<string> = []
    const names = new Set<string>()
    for (const server of servers) {
      const connection = yield* connect(server, options)
      const listed = yield* listTools(server, connection, options.startTimeoutMs ?? 30_000)
      const changed: Array<string> = []
      const live = new Set<string>()
      for (const mcp of listed) {
        const name = Names.rxName(server.name, mcp.name)
        if (names.has(name)) return yield* new McpError({ server: server.name, message: `MCP server ${server.name}: two tools would both be named ${name}` })
        names.add(name)
        live.add(name)
        const annotations = mcp.annotations ?? {}
        const { $schema: _, ...parameters } = mcp.inputSchema as Record<string, unknown>
        const current: Tool.Spec = {
          name,
          description: `${mcp.description ?? mcp.title ?? mcp.name} (tool ${mcp.name} of MCP server ${server.name})`,
          parameters,
          idempotent: annotations.readOnlyHint === true || annotations.idempotentHint === true
        }
        const recorded = pinned?.get(name)
        if (pinned !== undefined && recorded === undefined) {
          changed.push(`${name} is new (not offered to this goal)`)
          continue
        }
        if (recorded !== undefined && !sameSpec(recorded, current)) changed.push(`${name} changed (offered as the goal recorded it)`)
        const spec = recorded ?? current
        const validate = Either.try(() => ajv.compile(spec.parameters))
        if (Either.isLeft(validate)) {
          notes.push(`MCP server ${server.name}: ${name} is not offered: its input schema cannot be used (${describe(validate.left)})`)
          continue
        }
        const check = validate.right
        if (annotations.destructiveHint === true && annotations.readOnlyHint !== true) ask.push(name)
        tools.push({
          spec,
          decode: (input) => (check(input) ? Either.right(input) : Either.left(problems(check.errors))),
          run: (input) =>
            Effect.tryPromise({
              try: (signal) =>
                connection.client.callTool({ name: mcp.name, arguments: input as Record<string, unknown> }, undefined, { signal, timeout: timeoutMs }),
              catch: (error) => callFailure(server.name, mcp.name, timeoutMs, connection, error)
            }).pipe(
              Effect.map((result): Tool.Outcome => {
                // An old server may answer `toolResult` instead of content.
                const content: CallToolResult = "content" in result && Array.isArray(result.content)
                  ? (result as CallToolResult)
                  : { content: [{ type: "text", text: JSON.stringify("toolResult" in result ? result.toolResult : result) }] }
                return content.isError === true
                  ? Tool.failure("recoverable", `${mcp.name}: ${Output.text(content, maxChars)}`)
                  : { _tag: "Success", output: Output.record(content, maxChars) }
              }),
              Effect.catchAll((message) => Effect.succeed(Tool.failure("recoverable", message))),
              Effect.catchAllDefect((defect) => Effect.succeed(Tool.failure("recoverable", callFailure(server.name, mcp.name, timeoutMs, connection, defect))))
            ),
          recover: () => Effect.succeed(Option.none())
        })
      }
      for (const name of pinned?.keys() ?? []) {
        if (name.startsWith(`${server.name}${Names.separator}`) && !live.has(name)) changed.push(`${name} is gone (its calls will fail)`)
      }
      if (changed.length > 0) notes.push(`MCP server ${server.name}: its tools changed since the goal started: ${changed.join("; ")}`)
    }
    return { tools, ask, notes }
  })
