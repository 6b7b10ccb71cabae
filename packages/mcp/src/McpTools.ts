/**
 * MCP servers as a source of rx tools, on the official `@modelcontextprotocol/sdk` client.
 *
 * Each server is started (stdio) or reached (streamable HTTP, else SSE) once, its `tools/list`
 * read, and each of its tools becomes an rx tool named `NAME__tool`: its JSON Schema checks a call
 * before it is sent (a call that fails it is rejected, not sent), `destructiveHint` puts it in
 * `ask`. The server's hints are claims, not facts: a tool is idempotent (run again when a crash
 * cut a call) only when the user marked its server `safeToRepeat`. A call has a timeout that
 * cancels the request; an `isError` result, a protocol error, a timeout or a server that died are
 * recorded failures the model sees, never defects. Output is capped, and so are the tools a
 * server may offer and the size of each. The servers are stopped when the scope closes.
 *
 * A stdio server is a program the user chose: it runs as the user would run it from a terminal
 * (their PATH and home, the network), in the workspace, with an environment built for it (a small
 * base and the variables the user gives it, never the rest of rx's, which holds rx's own secrets).
 * But the agent writes the workspace: a server whose program, script or `npx`/`uvx` package lies
 * there is refused, and `npx`/`uvx` run in a private folder outside it (`internal/command`).
 * On request (`sandbox` in its settings) it runs in bubblewrap instead: the workspace writable,
 * the system folders and the chosen ones readable, no home folder, the network only if asked.
 * Either way it runs as a `ProcessTree`: it and whatever it starts (a daemon in its own session
 * included) end when rx gives up on it, whatever the reason (a start timeout, a failed
 * initialize, the end of the run, rx stopped by a signal). Its start timeout counts from when
 * its program runs: `npx` installs the package first, bounded apart (`installTimeoutMs`).
 *
 * On resume, `pinned` (the tools the goal recorded) keeps the goal's tool set: a server's tool
 * is offered with its recorded schema, new tools are not offered, and what changed is said.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type CallToolResult, ErrorCode, McpError as ProtocolError, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js"
import { Tool } from "@rx/kernel"
import { ProcessTree, Sandbox } from "@rx/tools"
import { Ajv, type ErrorObject } from "ajv"
import { Effect, Either, Option, Schema, type Scope } from "effect"
import { closeSync, constants, mkdtempSync, openSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as NodePath from "node:path"
import * as Command from "./internal/command.js"
import * as Names from "./internal/names.js"
import * as Output from "./internal/output.js"
import { TreeTransport } from "./internal/transport.js"
import type * as Servers from "./Servers.js"

/** A server could not be started, reached or listed: the run does not start. */
export class McpError extends Schema.TaggedError<McpError>()("@rx/mcp/McpError", {
  server: Schema.String,
  message: Schema.String
}) {}

/** How one server is started, beside what is recorded of it: never recorded (its variables may be secrets). */
export interface Launch {
  /** Variables given to this server, added to its base environment (`baseEnvironment`). */
  readonly env?: Readonly<Record<string, string>>
  /** Time it may take to start and list its tools, once its program runs (an `npx` package is installed first, apart). */
  readonly startTimeoutMs?: number
  /** Where `startTimeoutMs` was set, as a person would change it (default: the `--mcp-start-timeout` flag). */
  readonly startTimeoutFrom?: string
}

export interface Options {
  /** The folder stdio servers run in (and, sandboxed, the only one they may write). */
  readonly workspace: string
  /**
   * The sandbox of servers sandboxed on request (`Sandbox.resolve("bwrap", ...)`): such a server
   * is not started unless it is bubblewrap. Other servers run as the user.
   */
  readonly sandbox?: Sandbox.Sandbox
  /** Protected and hidden paths of the workspace (`Sandbox.guardsOf`), held for sandboxed servers. */
  readonly guards?: ReadonlyArray<Sandbox.Guard>
  /** The tools a resumed goal recorded: offered as recorded, and compared with the servers'. */
  readonly pinned?: ReadonlyArray<Tool.Spec>
  /** Each server's variables and start timeout, by name. */
  readonly launch?: Readonly<Record<string, Launch>>
  /** Where the base environment is taken from (default `process.env`). */
  readonly environment?: Readonly<Record<string, string | undefined>>
  /** Time one call may take; then it is cancelled (default 60 s). */
  readonly timeoutMs?: number
  /** Time a server may take to start and list its tools, unless its `Launch` says (default 10 s). */
  readonly startTimeoutMs?: number
  /** Time `npx` may take to install a server's package before it starts (default 10 minutes). */
  readonly installTimeoutMs?: number
  /** Tools one server may offer, in the order it lists them (default 100); the rest are left out, and said so. */
  readonly maxTools?: number
  /** Characters of one tool's description and input schema, as JSON (default 8,192); a larger tool is left out. */
  readonly maxSchemaChars?: number
  /** Characters of text a result keeps (default 65,536); the rest is cut, and said so. */
  readonly maxOutputChars?: number
  /** rx's version, as the client introduces itself. */
  readonly version?: string
}

/** What a server listed and was not offered. */
export interface LeftOut {
  readonly server: string
  /** Tools it listed, and how many of them are offered. */
  readonly listed: number
  readonly offered: number
  /** The first of those left out, by their MCP names, each with why. */
  readonly tools: ReadonlyArray<string>
}

export interface Source {
  readonly tools: ReadonlyArray<Tool.Tool>
  /** Tools their server marks destructive: a person approves each call unless told otherwise. */
  readonly ask: ReadonlyArray<string>
  /** What a person should know: tools not offered and why, what changed since the goal recorded its tools. */
  readonly notes: ReadonlyArray<string>
  /** The servers that listed more than was offered (past the caps), for the record. */
  readonly leftOut: ReadonlyArray<LeftOut>
}

/** Lines of a stdio server's stderr kept, and shown (stack frames left out), to say why it failed. */
const stderrLines = 40
const stderrShown = 5

/** Names of left-out tools kept for the record and the notes. */
const keptNames = 20

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** `names`, at most `n` of them, then how many more. */
const some = (names: ReadonlyArray<string>, n = 5): string =>
  names.length <= n ? names.join(", ") : `${names.slice(0, n).join(", ")} and ${names.length - n} more`

/** Variables a stdio server gets from rx's environment: what programs need to run as the user, and no secret of rx's. */
const inherited = new Set([
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TMPDIR",
  "XDG_CONFIG_HOME",
  "XDG_CACHE_HOME",
  "XDG_DATA_HOME",
  "XDG_STATE_HOME",
  "XDG_RUNTIME_DIR",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NODE_EXTRA_CA_CERTS"
])

/**
 * The base environment of a stdio server: PATH, HOME, the user and locale (`LANG`, `LC_*`), TMPDIR,
 * the XDG folders, proxies and CA files, from `environment`. Nothing else of rx's: not RX_TOKEN,
 * not the model's API key, not OTEL_* headers. PATH keeps only absolute folders outside the
 * workspace (by path and by real path), so a program the agent wrote there is never what a
 * server's command finds; PYTHONSAFEPATH keeps Python from importing from the folder it runs in.
 */
export const baseEnvironment = (environment: Readonly<Record<string, string | undefined>>, workspace: string): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(environment)) {
    // A value starting with "()" is a shell function, which a shell would run.
    if (value === undefined || value.startsWith("()")) continue
    if (inherited.has(name) || name.startsWith("LC_")) env[name] = value
  }
  const path = Command.safePath(environment["PATH"] ?? "", workspace)
  env["PATH"] = path.length > 0 ? path.join(":") : "/usr/local/bin:/usr/bin:/bin"
  env["PYTHONSAFEPATH"] = "1"
  return env
}

/** A connected client, its transport's stderr so far, and whether its connection is closed. */
interface Connection {
  readonly client: Client
  readonly stderr: () => string
  readonly closed: () => boolean
  /** After each call: what a sandboxed server created at a protected path is moved aside. */
  readonly afterCall: () => void
  /** The last error its transport reported (a message too large to read), if any. */
  readonly transportError: () => string
}

type Stdio = Extract<Servers.Server, { command: unknown }>

/** Whether `folder` is an absolute path to a folder. */
const isFolder = (folder: string) => NodePath.isAbsolute(folder) && Either.getOrElse(Either.try(() => statSync(folder).isDirectory()), () => false)

/** The last lines of a stream, kept to say why a program failed. */
const tailOf = (stream: NodeJS.ReadableStream) => {
  const tail: Array<string> = []
  stream.on("data", (chunk: Buffer) => {
    tail.push(...chunk.toString("utf8").split("\n").map((line) => line.trim()).filter((line) => line !== ""))
    tail.splice(0, Math.max(0, tail.length - stderrLines))
  })
  return () => {
    const shown = tail.filter((line) => !/^at\s/.test(line)).slice(-stderrShown)
    return shown.length === 0 ? "" : `; its stderr ends: ${shown.join(" | ").slice(-1_000)}`
  }
}

/**
 * A private folder for `npx` and `uvx` to run in, outside the workspace, removed with the scope:
 * it holds only a `package.json`, so npm looks for no project above it.
 */
const privateFolder = (workspace: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const base = Command.safePath(os.tmpdir(), workspace)[0] ?? "/tmp"
        const dir = mkdtempSync(NodePath.join(base, "rx-mcp-"))
        writeFileSync(NodePath.join(dir, "package.json"), "{\"private\":true}\n")
        return dir
      },
      catch: (error) => `a folder to run it in cannot be made: ${describe(error)}`
    }),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

/**
 * `npx` installs the server's package into its cache first: a download may take minutes on a
 * first run, and is not what the start timeout measures. Bounded by `installTimeoutMs`; its
 * processes are ended with it.
 */
const install = (plan: Command.Plan, args: ReadonlyArray<string>, cwd: string, env: Readonly<Record<string, string>>, timeoutMs: number) =>
  Effect.scoped(Effect.gen(function*() {
    const tree = yield* ProcessTree.spawn({ file: plan.file, args, cwd, env, kind: "mcp" }).pipe(Effect.mapError((error) => `its package cannot be installed: ${error.message}`))
    tree.child.stdin.end()
    tree.child.stdout.resume()
    const stderr = tailOf(tree.child.stderr)
    const exit = yield* Effect.async<{ readonly code: number | null; readonly signal: string | null }>((resume) => {
      if (tree.exited()) return resume(Effect.succeed({ code: tree.child.exitCode, signal: tree.child.signalCode }))
      tree.child.once("exit", (code, signal) => resume(Effect.succeed({ code, signal })))
    }).pipe(Effect.timeout(timeoutMs), Effect.mapError(() => `its package did not install within ${timeoutMs / 1000} s (${NodePath.basename(plan.file)} ${args.join(" ")})${stderr()}`))
    if (exit.code !== 0) {
      return yield* Effect.fail(`its package could not be installed (${NodePath.basename(plan.file)} ${args.join(" ")} ${exit.code === null ? `was ended by ${exit.signal}` : `exited with code ${exit.code}`})${stderr()}`)
    }
  }))

/** Why a stdio server was not started: refused (its code lies in the workspace), or what failed. */
interface Unstarted {
  readonly why: string
  readonly kind: "refused" | "not started" | "cannot start"
}

/**
 * The process tree of a stdio server, ended with the scope, and what to do after each of its
 * calls: the command as the user runs it (found and checked by `Command.plan`), or in bubblewrap
 * when it asks for the sandbox. A sandboxed server lives as long as the run, so the workspace and
 * its guards are bound by path (`Sandbox.hold` without a descriptor); nothing is created in the
 * workspace to hold them.
 */
const stdio = (
  server: Stdio,
  options: Options,
  env: Readonly<Record<string, string>>
): Effect.Effect<{ readonly tree: ProcessTree.Tree; readonly afterCall: () => void }, Unstarted, Scope.Scope> =>
  Effect.gen(function*() {
    const fail = (why: string) => Effect.fail<Unstarted>({ why, kind: "cannot start" })
    const notStarted = (why: string) => Effect.fail<Unstarted>({ why, kind: "not started" })
    const request = server.sandbox
    if (request === undefined) {
      const planned = Command.plan(server.command, options.workspace, env["PATH"] ?? "")
      if (Either.isLeft(planned)) {
        return yield* Effect.fail<Unstarted>({ why: planned.left.replace("NAME", server.name), kind: planned.left.startsWith("refused:") ? "refused" : "cannot start" })
      }
      const plan = planned.right
      const cwd = plan.runsIn === "workspace" ? options.workspace : yield* privateFolder(options.workspace).pipe(Effect.catchAll(notStarted))
      if (plan.install !== undefined) yield* install(plan, plan.install, cwd, env, options.installTimeoutMs ?? 600_000).pipe(Effect.catchAll(fail))
      const tree = yield* ProcessTree.spawn({ file: plan.file, args: plan.args, cwd, env, kind: "mcp" }).pipe(Effect.catchAll((error) => fail(error.message)))
      return { tree, afterCall: () => undefined }
    }
    const sandbox = options.sandbox
    if (sandbox === undefined || sandbox._tag !== "Bwrap") {
      return yield* notStarted(`it is to run in the sandbox, which cannot be used here${sandbox?._tag === "Unavailable" ? ` (${sandbox.reason})` : ""}; run it without (leave out its sandbox setting)`)
    }
    const notFolder = request.read.find((folder) => !isFolder(folder))
    if (notFolder !== undefined) return yield* notStarted(`the folder its sandbox may read, ${JSON.stringify(notFolder)}, is not an absolute path to a folder`)
    const held = yield* Effect.scoped(Sandbox.hold(options.workspace, options.guards ?? [])).pipe(Effect.catchAll((why) => notStarted(String(why))))
    const tree = yield* ProcessTree.spawn({
      file: sandbox.path,
      args: Sandbox.bwrapArgs(options.workspace, server.command, held.args, undefined, {
        network: request.network,
        readOnly: [...new Set([...Command.sandboxReads(server.command[0], options.workspace, env["PATH"] ?? ""), ...request.read])]
      }),
      cwd: "/",
      // Its home is not there: temporary files go to the sandbox's own /tmp.
      env: { ...env, TMPDIR: "/tmp" },
      kind: "mcp",
      spareFromTerm: "bwrap"
    }).pipe(Effect.catchAll((error) => fail(error.message)))
    return {
      tree,
      afterCall: () => {
        if (held.missing.length === 0) return
        const fd = Either.try(() => openSync(options.workspace, constants.O_RDONLY | constants.O_DIRECTORY))
        if (Either.isLeft(fd)) return
        Sandbox.moveAside(fd.right, held.missing, `mcp-${server.name}`)
        closeSync(fd.right)
      }
    }
  })

/** Why a start or a listing failed, in words: a timeout says how long it waited, and which setting gives more. */
const startFailure = (error: unknown, timeoutMs: number, what: string, setting: string) =>
  error instanceof ProtocolError && error.code === ErrorCode.RequestTimeout
    ? `it did not answer ${what} within ${timeoutMs / 1000} s (a server that builds itself at start may need more: give it a longer ${setting})`
    : error instanceof ProtocolError && error.code === ErrorCode.ConnectionClosed
    ? `it exited (or closed its output) before answering ${what}`
    : describe(error)

/** Connect `client` over `transport`. */
const connectOver = (client: Client, transport: Transport, timeoutMs: number, setting: string) =>
  Effect.tryPromise({
    try: (signal) => client.connect(transport, { timeout: timeoutMs, signal }),
    catch: (error) => startFailure(error, timeoutMs, "initialize", setting)
  })

/** Close `transport` with the scope (the process it started is stopped). */
const closing = (transport: Transport) => Effect.addFinalizer(() => Effect.promise(() => transport.close().catch(() => undefined)))

/** Start or reach a server, closed with the scope; `deadline` is when its start must be over. */
const connect = (server: Servers.Server, options: Options, timeoutMs: number, setting: string): Effect.Effect<Connection & { readonly began: number }, McpError, Scope.Scope> =>
  Effect.gen(function*() {
    const fail = (why: string) => new McpError({ server: server.name, message: `MCP server ${server.name}: ${why}` })
    let transportError = ""
    const newClient = () => {
      const made = new Client({ name: "rx", version: options.version ?? "0" }, { capabilities: {} })
      made.onerror = (error) => {
        transportError = describe(error)
      }
      return made
    }
    let closed = false
    let stderr = () => ""
    let client = newClient()
    let afterCall = () => undefined as void
    let began = Date.now()
    if ("command" in server) {
      const launch = options.launch?.[server.name]
      const env = { ...baseEnvironment(options.environment ?? process.env, options.workspace), ...launch?.env }
      const started = yield* stdio(server, options, env).pipe(
        Effect.mapError(({ kind, why }) => fail(kind === "refused" ? why : kind === "not started" ? `not started: ${why}` : `cannot start ${JSON.stringify(server.command.join(" "))}: ${why}`))
      )
      // The start timeout counts from here: what an install took is not in it.
      began = Date.now()
      afterCall = started.afterCall
      if (server.sandbox !== undefined) yield* Effect.addFinalizer(() => Effect.sync(afterCall))
      stderr = tailOf(started.tree.child.stderr)
      const transport = new TreeTransport(started.tree)
      yield* closing(transport)
      yield* connectOver(client, transport, timeoutMs, setting).pipe(
        Effect.mapError((why) => fail(`cannot start ${JSON.stringify(server.command.join(" "))}: ${why}${stderr()}`))
      )
    } else {
      const url = new URL(server.url)
      // Streamable HTTP first; a server that speaks only the older SSE transport gets that.
      const streamable = new StreamableHTTPClientTransport(url)
      yield* closing(streamable)
      const first = yield* Effect.either(connectOver(client, streamable, timeoutMs, setting))
      if (Either.isLeft(first)) {
        client = newClient()
        const sse = new SSEClientTransport(url)
        yield* closing(sse)
        yield* connectOver(client, sse, timeoutMs, setting).pipe(
          Effect.mapError((why) => fail(`cannot connect to ${server.url}: ${first.left} (and over SSE: ${why})`))
        )
      }
    }
    const connected = client
    connected.onclose = () => {
      closed = true
    }
    yield* Effect.addFinalizer(() => Effect.promise(() => connected.close().catch(() => undefined)))
    return { client: connected, stderr: () => stderr(), closed: () => closed, afterCall, transportError: () => transportError, began }
  })

/** Pages of `tools/list` read at most: a server that pages forever is cut there. */
const maxPages = 100

/** Every tool a server lists, page by page (up to `maxPages`), and whether it listed more. */
const listTools = (server: Servers.Server, connection: Connection, timeoutMs: number, setting: string) =>
  Effect.tryPromise({
    try: async (signal) => {
      const tools: Array<McpTool> = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await connection.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs, signal })
        tools.push(...page.tools)
        cursor = page.nextCursor
      } while (cursor !== undefined && ++pages < maxPages)
      return { tools, more: cursor !== undefined }
    },
    catch: (error) =>
      new McpError({
        server: server.name,
        message: `MCP server ${server.name}: cannot list its tools: ${startFailure(error, timeoutMs, "tools/list", setting)}${connection.transportError() === "" ? "" : ` (${connection.transportError()})`}${connection.closed() ? " (its connection closed)" : ""}${connection.stderr()}`
      })
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
 * started, reached or listed in its start timeout, or two tools would take one name; the servers
 * stop with the scope.
 */
export const make = (servers: ReadonlyArray<Servers.Server>, options: Options): Effect.Effect<Source, McpError, Scope.Scope> =>
  Effect.gen(function*() {
    const timeoutMs = options.timeoutMs ?? 60_000
    const maxChars = options.maxOutputChars ?? 64 * 1024
    const maxTools = options.maxTools ?? 100
    const maxSchemaChars = options.maxSchemaChars ?? 8_192
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false })
    const pinned = options.pinned === undefined ? undefined : new Map(options.pinned.map((spec) => [spec.name, spec]))
    const tools: Array<Tool.Tool> = []
    const ask: Array<string> = []
    const notes: Array<string> = []
    const leftOut: Array<LeftOut> = []
    const names = new Set<string>()
    for (const server of servers) {
      const launch = options.launch?.[server.name]
      const startTimeoutMs = launch?.startTimeoutMs ?? options.startTimeoutMs ?? 10_000
      const setting = launch?.startTimeoutMs === undefined ? "--mcp-start-timeout" : launch.startTimeoutFrom ?? "--mcp-start-timeout"
      const connection = yield* connect(server, options, startTimeoutMs, setting)
      // One start timeout for both: what the start took is not given to the listing again.
      const listed = yield* listTools(server, connection, Math.max(1_000, startTimeoutMs - (Date.now() - connection.began)), setting)
      const added: Array<string> = []
      const changed: Array<string> = []
      const live = new Set<string>()
      const refused: Array<string> = []
      let pastCap = 0
      let tooLarge = 0
      let offered = 0
      for (const mcp of listed.tools) {
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
          // Its readOnlyHint and idempotentHint are the server's claims: only the user's word makes a cut call run again.
          idempotent: server.safeToRepeat === true
        }
        const recorded = pinned?.get(name)
        if (pinned !== undefined && recorded === undefined) {
          added.push(name)
          continue
        }
        if (recorded === undefined) {
          const size = current.description.length + JSON.stringify(parameters).length
          if (size > maxSchemaChars) {
            tooLarge++
            if (refused.length < keptNames) refused.push(`${mcp.name} (${size} characters)`)
            continue
          }
          if (offered >= maxTools) {
            pastCap++
            if (refused.length < keptNames) refused.push(`${mcp.name} (past the cap)`)
            continue
          }
        }
        if (recorded !== undefined && !sameSpec(recorded, current)) changed.push(name)
        const spec = recorded ?? current
        const validate = Either.try(() => ajv.compile(spec.parameters))
        if (Either.isLeft(validate)) {
          notes.push(`MCP server ${server.name}: ${name} is not offered: its input schema cannot be used (${describe(validate.left)})`)
          continue
        }
        offered++
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
                // Checked before anything walks it: JSON.stringify would overflow the stack.
                if (Output.tooDeep(result, Output.maxDepth + 2)) {
                  return Tool.failure("recoverable", `MCP server ${server.name}: ${mcp.name} answered a result nested more than ${Output.maxDepth} levels deep, which rx does not record`)
                }
                // An old server may answer `toolResult` instead of content.
                const content: CallToolResult = "content" in result && Array.isArray(result.content)
                  ? (result as CallToolResult)
                  : { content: [{ type: "text", text: JSON.stringify("toolResult" in result ? result.toolResult : result) }] }
                return content.isError === true
                  ? Tool.failure("recoverable", `${mcp.name}: ${Output.text(content, maxChars)}`)
                  : { _tag: "Success", output: Output.record(content, maxChars) }
              }),
              Effect.catchAll((message) => Effect.succeed(Tool.failure("recoverable", message))),
              Effect.catchAllDefect((defect) => Effect.succeed(Tool.failure("recoverable", callFailure(server.name, mcp.name, timeoutMs, connection, defect)))),
              Effect.ensuring(Effect.sync(connection.afterCall))
            ),
          recover: () => Effect.succeed(Option.none())
        })
      }
      const more = listed.more ? ` (and it lists more past ${maxPages} pages, not read)` : ""
      if (pastCap + tooLarge > 0 || listed.more) {
        leftOut.push({ server: server.name, listed: listed.tools.length, offered, tools: refused })
        const why = [
          ...(pastCap > 0 ? [`${pastCap} past the cap of ${maxTools} tools per server`] : []),
          ...(tooLarge > 0 ? [`${tooLarge} whose description and schema exceed ${maxSchemaChars} characters`] : [])
        ].join(", ")
        notes.push(`MCP server ${server.name}: ${offered} of its ${listed.tools.length} tools are offered${more}${why === "" ? "" : `; not offered: ${why} (${some(refused)})`}`)
      }
      const gone = [...pinned?.keys() ?? []].filter((name) => name.startsWith(`${server.name}${Names.separator}`) && !live.has(name))
      const differences = [
        ...(added.length > 0 ? [added.length === 1 ? `${some(added)} is new (not offered to this goal)` : `${some(added)} are new (not offered to this goal)`] : []),
        ...(changed.length > 0 ? [`${some(changed)} changed (offered as the goal recorded ${changed.length === 1 ? "it" : "them"})`] : []),
        ...(gone.length > 0 ? [`${some(gone)} ${gone.length === 1 ? "is" : "are"} gone (${gone.length === 1 ? "its" : "their"} calls will fail)`] : [])
      ]
      if (differences.length > 0) notes.push(`MCP server ${server.name}: its tools changed since the goal started: ${differences.join("; ")}`)
    }
    return { tools, ask, notes, leftOut }
  })
