/**
 * `rx serve` and `rx worker` from their settings: everything checked first (a refused setting or
 * a port in use leaves no database and no token file), then the server or the worker built in the
 * caller's scope, listening until the scope closes.
 */
import { FileSystem, Path } from "@effect/platform"
import type * as McpFlags from "@rx/mcp/Flags"
import { Builtins, HttpFetch, Toolbox } from "@rx/tools"
import { Config as ServerConfig, Server, TokenFile } from "@rx/server"
import type { StateStore } from "@rx/kernel"
import { Context, Effect, Layer, Option, type Scope } from "effect"
import * as Net from "node:net"
import * as Postgres from "./internal/postgres.js"
import * as Log from "./Log.js"
import * as Settings from "./Settings.js"
import { defaultFailover, UsageError } from "./Settings.js"
import * as Setup from "./Setup.js"

/** What `rx serve` is given besides its settings. */
export interface ServeRequest extends McpFlags.McpFlags {
  readonly given: Settings.Given
  readonly host: Option.Option<string>
  readonly allowRemote: boolean
  readonly port: Option.Option<number>
  readonly concurrency: Option.Option<number>
  /** Run no goal here: hand each to the workers of the Postgres log. */
  readonly cluster: boolean
  /** A new token even when the token file holds one. */
  readonly newToken: boolean
  readonly failover: Option.Option<number>
}

/** A server listening. */
export interface Serving {
  readonly url: string
  readonly host: string
  readonly port: number
  readonly workspace: string
  readonly model: string
  readonly db: Settings.Database
  readonly cluster: boolean
  /** Where the token is: `RX_TOKEN`, or the file it was kept in or newly written to. */
  readonly token: { readonly kept: "env" } | { readonly kept: "reused" | "new"; readonly file: string }
}

/** What `rx worker` is given besides its settings. */
export interface WorkerRequest {
  readonly given: Settings.Given
  readonly host: Option.Option<string>
  readonly allowRemote: boolean
  readonly port: Option.Option<number>
  readonly concurrency: Option.Option<number>
  readonly failover: Option.Option<number>
  readonly drain: Option.Option<number>
}

/** A worker running. */
export interface Working {
  readonly host: string
  readonly port: number
  readonly concurrency: number
  readonly model: string
  readonly db: Settings.Database
  readonly volume: { readonly root: string; readonly id: string }
  readonly failoverSeconds: number
  readonly drainSeconds: number
}

/**
 * The server's token: `RX_TOKEN`; else the one in the token file beside the database when rx
 * wrote it there for this user (`TokenFile.read`), so clients and open inspector tabs keep working
 * across restarts; else (or with `--new-token`) a new random one.
 */
const serverToken = (db: Settings.Database, renew: boolean) =>
  Effect.gen(function*() {
    const given = Option.getOrElse(yield* Settings.token, () => "")
    if (given !== "") {
      if (renew) return yield* new UsageError({ message: "--new-token makes a token file; RX_TOKEN is set, so the server uses it and writes none" })
      return given.length < 16 ? yield* new UsageError({ message: "RX_TOKEN must be at least 16 characters long" }) : { token: given, kept: "env" as const }
    }
    const found = renew ? Option.none<string>() : yield* TokenFile.read(yield* Log.tokenFile(db))
    return Option.match(found, {
      onNone: () => ({ token: TokenFile.generate(), kept: "new" as const }),
      onSome: (token) => ({ token, kept: "reused" as const })
    })
  })

/** Write a new token (0600, no link followed) beside the database, where a client on this machine with the user's rights finds it. */
const writeToken = (db: Settings.Database, token: string) =>
  Effect.flatMap(Log.tokenFile(db), (file) =>
    TokenFile.write(file, token).pipe(Effect.as(file), Effect.mapError((error) => new UsageError({ message: error.message }))))

/**
 * Whether `port` on `host` can be listened on now: checked before the database and the token file
 * are made, so a port in use leaves nothing behind. Port 0 (any free one) always can.
 */
const portFree = (host: string, port: number) =>
  port === 0 ? Effect.void : Effect.async<void, UsageError>((resume) => {
    const probe = Net.createServer()
    probe.once("error", (error: NodeJS.ErrnoException) =>
      resume(
        error.code === "EADDRINUSE"
          ? new UsageError({ message: `port ${port} on ${host} is in use (another rx serve?): --port N picks another, --port 0 any free one` })
          : new UsageError({ message: `cannot listen on ${host} port ${port}: ${error.message}` })
      ))
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resume(Effect.void)))
  })

/** What a cluster needs: a Postgres log, and the failover time (the same everywhere). */
const clusterOf = (failover: Option.Option<number>, db: Settings.Database, command: string) =>
  Effect.gen(function*() {
    if (!db.postgres) {
      return yield* new UsageError({
        message: `${command} needs the Postgres log of the cluster: --db postgres://USER:PASSWORD@HOST/DB (or RX_DB), the same for every worker and rx serve --cluster`
      })
    }
    const seconds = Option.getOrElse(failover, () => defaultFailover)
    return { ...(yield* Postgres.cluster), failoverMs: seconds * 1_000 }
  })

/** `rx serve`: the rx HTTP API and inspector, running goals here or handing them to a cluster's workers. */
export const serve = (request: ServeRequest): Effect.Effect<Serving, UsageError | StateStore.StoreError, Scope.Scope | FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const db = yield* Log.database(Settings.dbFlag(request.given))
    const cluster = request.cluster ? Option.some(yield* clusterOf(request.failover, db, "rx serve --cluster")) : Option.none()
    if (Option.isNone(cluster) && Option.isSome(request.failover)) return yield* new UsageError({ message: "--failover applies with --cluster" })
    if (Option.isSome(cluster) && request.mcp.length + request.mcpEnv.length + request.mcpSandbox.length > 0) {
      return yield* new UsageError({ message: "--mcp, --mcp-env and --mcp-sandbox do not apply with --cluster: the workers run the goals with their own tools" })
    }
    // With a cluster the workers' model runs the goals: this one is not needed.
    const { values: v, workspace, mcp, tools, volume, model } = yield* Setup.prepare(db, request.given, Settings.serveKeys, {
      workers: request.cluster,
      volume: (root) => Option.match(cluster, { onNone: () => Effect.succeed(undefined), onSome: ({ Workspaces }) => Postgres.volume(Workspaces, root) })
    })
    const port = Option.getOrElse(request.port, () => 7_433)
    const concurrency = Option.getOrElse(request.concurrency, () => 4)
    const host = Option.getOrElse(Option.map(request.host, (h) => h.trim()), () => "127.0.0.1")
    const { workspace: _root, ...toolsConfig } = tools
    const { kept, token } = yield* serverToken(db, request.newToken)
    const { workspace: _recordedRoot, ...recorded } = Option.isSome(cluster) ? Setup.recordedTools(v, workspace) : Setup.recordedSettings(v, workspace, model)
    const mcpServers = yield* Setup.mcpGiven(request, mcp)
    const settings: Settings.Recorded = {
      ...recorded,
      ...(mcpServers.recorded.length === 0 ? {} : { mcp: mcpServers.recorded }),
      ...(volume === undefined ? {} : { volume: volume.id })
    }
    const input: ServerConfig.Input = { host, allowRemote: request.allowRemote, port, concurrency, workspace, token, settings, delegate: Setup.delegates(v) }
    // Checked before anything is created: a refused setting, or a port in use, leaves no database and no token file.
    yield* ServerConfig.decode(input).pipe(Effect.mapError((error) => new UsageError({ message: error.message })))
    yield* portFree(host, port)
    yield* Setup.tell(yield* Setup.toolNotes(tools, v.tools !== undefined))
    // Each workspace's tools: the built-ins, and the MCP servers' (started for that workspace, in its sandbox).
    const toolbox = mcpServers.servers.length === 0 ? Toolbox.layer(toolsConfig) : Toolbox.layerWith((root, serving) =>
      Layer.unwrapScoped(Effect.map(Setup.mcpTools(mcpServers, { ...toolsConfig, workspace: root }, v), (source) =>
        Layer.merge(
          Builtins.layerWith(Toolbox.toolsConfig(toolsConfig, root, serving), source.tools),
          Layer.succeed(Toolbox.DefaultApproval, Object.fromEntries(source.ask.map((name) => [name, "ask" as const])))
        ))), { protection: { protectedPaths: toolsConfig.protectedPaths ?? [".git"], hiddenPaths: toolsConfig.hiddenPaths ?? [] } }
    )
    // The log is opened (or created) before the token file is written: a log that cannot be opened leaves nothing behind.
    const log = Option.isNone(cluster) ? yield* Layer.build(Log.layer(db, "create")) : undefined
    const server = Option.match(cluster, {
      onNone: () =>
        Server.layer(input).pipe(
          Layer.provide(Layer.mergeAll(Setup.modelLayer(v, model), toolbox)),
          Layer.provide(log === undefined ? Log.layer(db, "create") : Layer.succeedContext(log)),
          Layer.mapError(Postgres.refused)
        ),
      // The cluster's client brings the log.
      onSome: ({ Workers, failoverMs }) =>
        Server.layerDispatching(input, Workers.drive).pipe(
          Layer.provide(toolbox),
          Layer.provide(Workers.layerClient({ url: db.file, failoverMs })),
          Layer.mapError(Postgres.refused)
        )
    })
    const file = kept === "env" ? undefined : kept === "new" ? yield* writeToken(db, token) : yield* Log.tokenFile(db)
    const where = Context.get(yield* Layer.build(server), Server.Server)
    const serving: Serving = {
      url: where.url,
      host: where.host,
      port: where.port,
      workspace,
      model,
      db,
      cluster: Option.isSome(cluster),
      token: kept === "env" || file === undefined ? { kept: "env" } : { kept, file }
    }
    return serving
  })

/** A loopback address, or `--allow-remote`: the workers' socket has no authentication. */
const workerHost = (request: WorkerRequest) => {
  const host = Option.getOrElse(Option.map(request.host, (h) => h.trim()), () => "127.0.0.1")
  return request.allowRemote || ServerConfig.isLoopback(host)
    ? Effect.succeed(host)
    : new UsageError({ message: `--host ${host} lets other machines reach this worker, whose socket has no authentication: pass --allow-remote to mean it, on a private network only` })
}

/** `rx worker`: one of the workers that run the goals of a Postgres log. */
export const worker = (request: WorkerRequest) =>
  Effect.gen(function*() {
    const db = yield* Log.database(Settings.dbFlag(request.given))
    const { Workers, Workspaces, failoverMs } = yield* clusterOf(request.failover, db, "rx worker")
    if (Option.isNone(request.port)) return yield* new UsageError({ message: "rx worker needs --port N: the port it listens on, which the other workers reach it at" })
    const port = request.port.value
    const concurrency = Option.getOrElse(request.concurrency, () => 4)
    const drain = Option.getOrElse(request.drain, () => 15)
    const host = yield* workerHost(request)
    // The workspace root's volume file is made once every flag is known to be good.
    const { values: v, tools, volume, model } = yield* Setup.prepare(db, request.given, Settings.workerKeys, { volume: (root) => Postgres.volume(Workspaces, root) })
    const { workspace, ...configured } = tools
    // The workers' own socket is never a goal's to fetch.
    const toolsConfig = { ...configured, httpDeny: [HttpFetch.endpoint(host, port)] }
    yield* Setup.tell(yield* Setup.toolNotes({ ...toolsConfig, workspace }, v.tools !== undefined))
    const workspaces = Layer.unwrapEffect(Effect.map(Toolbox.Toolbox, (toolbox) => Workspaces.layerShared({ root: volume.root, tools: toolbox.registry }))).pipe(
      Layer.provide(Toolbox.layer(toolsConfig))
    )
    const running = Workers.layer({ url: db.file, host, port, concurrency, failoverMs, drainMs: drain * 1_000 }).pipe(
      Layer.provide(Layer.merge(Setup.modelLayer(v, model), workspaces)),
      Layer.mapError(Postgres.refused)
    )
    yield* Layer.build(running)
    const working: Working = { host, port, concurrency, model, db, volume: { root: volume.root, id: volume.id }, failoverSeconds: failoverMs / 1_000, drainSeconds: drain }
    return working
  })

/** The server listening, for as long as the Layer lasts. */
export class Listening extends Context.Tag("@rx/host/Serve/Listening")<Listening, Serving>() {}

/** A worker running, for as long as the Layer lasts. */
export class Worker extends Context.Tag("@rx/host/Serve/Worker")<Worker, Working>() {}

/** `rx serve` as a Layer: built, it listens; released, the runs in flight record where they are. */
export const layer = (request: ServeRequest) => Layer.scoped(Listening, serve(request))

/** `rx worker` as a Layer: built, it takes goals; released, it drains. */
export const layerWorker = (request: WorkerRequest) => Layer.scoped(Worker, worker(request))
