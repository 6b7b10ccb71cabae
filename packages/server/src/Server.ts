/**
 * The rx server: `Api` served on Node. Its routes only call the kernel (`Runner.submit`,
 * `resume`, `cancel`, `approve`, `deny`), so a goal behaves over HTTP exactly as in the CLI.
 * Goals run in the background, at most `concurrency` at once, the rest queued in order; at start
 * every open goal that does not wait for a person is resumed; on shutdown the server stops
 * taking goals, ends the event streams and interrupts the runs, whose goals stay open with
 * `Suspended(shutdown)`.
 *
 * ```ts
 * const server = Server.layer({ token, workspace: "/srv/projects" }).pipe(
 *   Layer.provide(Toolbox.layer({ sandbox: "auto" })),
 *   Layer.provide(OpenAiCompatible.layerNode({ baseUrl, model })),
 *   Layer.provide(SqliteStore.layer({ filename: "rx.db" }))
 * )
 * Layer.launch(server).pipe(NodeRuntime.runMain)
 * ```
 */
import { type Etag, HttpApiBuilder, HttpMiddleware, type HttpPlatform, type HttpServer, type HttpServerError, type HttpServerRequest, HttpServerResponse, type OpenApi } from "@effect/platform"
import { type NodeContext, NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Continuation, Control, Goal, type LanguageModel, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { Delegate, Toolbox } from "@rx/tools"
import { Clock, Context, DefaultServices, Effect, FiberRef, Layer, Option, Schema, Tracer } from "effect"
import { createServer, type IncomingMessage, type Server as NodeServer, type ServerResponse } from "node:http"
import * as Api from "./Api.js"
import { BadRequest, Conflict, InternalError, NotFound, Unauthorized, Unavailable } from "./ApiError.js"
import * as Config from "./Config.js"
import * as Assets from "./internal/assets.js"
import * as Body from "./internal/body.js"
import * as Daemon from "./internal/daemon.js"
import * as Events from "./internal/events.js"
import * as Guard from "./internal/guard.js"
import * as Idempotency from "./internal/idempotency.js"
import { shuttingDown } from "./internal/runs.js"
import * as Views from "./internal/views.js"
import * as Workspace from "./internal/workspace.js"

/** Where a running server listens. */
export class Server extends Context.Tag("@rx/server/Server")<Server, {
  readonly host: string
  readonly port: number
  /** The base URL clients use, such as `http://127.0.0.1:7433`. */
  readonly url: string
}>() {}

/** The server could not listen (the port is taken, the address is not this machine's). */
export class ListenError extends Schema.TaggedError<ListenError>()("@rx/server/ListenError", {
  host: Schema.String,
  port: Schema.Number,
  message: Schema.String
}) {}

/** The log failed: a 500 whose message says how. */
const storeFailed = (error: StateStore.StoreError) => new InternalError({ message: `the goal log failed: ${error.message}` })

/** A goal the kernel does not know. */
const notFound = (goalId: string) => new NotFound({ goalId, message: `no goal with id ${goalId}` })

/** The goal's summary, or `NotFound`. */
const summaryOf = (goalId: string) =>
  Effect.flatMap(StateStore.StateStore, (store) => store.goal(goalId)).pipe(
    Effect.mapError(storeFailed),
    Effect.flatMap(Option.match({ onNone: () => Effect.fail(notFound(goalId)), onSome: Effect.succeed }))
  )

/** How many ids `submit` tries when the derived one is taken (the same goal twice in one millisecond). */
const idAttempts = 10

const goalsHandlers = HttpApiBuilder.group(Api.Api, "goals", (handlers) =>
  Effect.gen(function*() {
    const daemon = yield* Daemon.Daemon
    const { config, runs } = daemon

    const view = (goalId: string) =>
      Views.one(goalId, runs.activity).pipe(Effect.catchTag("@rx/kernel/StoreError", (error) => Effect.fail(storeFailed(error))))

    /**
     * Which goal to run for `goalId` to go on: itself, or for a sub-goal, the highest open goal above
     * it, whose run drives its sub-goals (a sub-goal decided on, or cancelled, is then recorded in
     * its parent's call too).
     */
    const driverOf = (goalId: string): Effect.Effect<string, StateStore.StoreError, StateStore.StateStore> =>
      Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        let id = goalId
        for (let depth = 0; depth < 100; depth++) {
          const parent = Option.flatMap(yield* store.goal(id), (summary) => Option.fromNullable(summary.parent))
          if (Option.isNone(parent)) break
          const above = yield* store.goal(parent.value)
          if (!Option.exists(above, (summary) => summary.status === "open")) break
          id = parent.value
        }
        return id
      })

    /** Queue the goal (or the goal whose run drives it) here, unless another process runs it (it obeys the new event itself). */
    const goOn = (target: string) =>
      Effect.gen(function*() {
        const goalId = yield* driverOf(target)
        const store = yield* StateStore.StateStore
        const elsewhere = runs.activity(goalId) === "idle" && Option.isSome(yield* store.runner(goalId))
        if (!elsewhere) yield* runs.admit(goalId)
      }).pipe(Effect.ignore)

    const submit = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        if (!runs.accepting()) return yield* shuttingDown()
        const input = yield* Body.decode(request, Api.SubmitRequest, config.maxBodyBytes)
        // A retry of a submission with the same Idempotency-Key answers the goal its first attempt
        // recorded; the digest of the request, what a retry must repeat, only goes with a key.
        const key = Option.map(yield* Idempotency.keyOf(request.headers), (key) => ({ key, digest: Idempotency.digestOf(input) }))
        if (Option.isSome(key)) {
          const found = yield* Idempotency.recorded(key.value.key, key.value.digest)
          if (Option.isSome(found)) return { goalId: found.value }
        }
        const workspace = yield* Workspace.resolve(daemon.root, input.workspace)
        const slot = yield* runs.reserve
        // The workspace's tools, and the policy they may start with (an MCP server's destructive tools ask; the submission's comes on top).
        const { approval, registry: tools } = yield* daemon.toolbox.tools(workspace).pipe(
          Effect.mapError((error) => new Unavailable({ reason: "tools", message: `the tools cannot be set up: ${error.message}` }))
        )
        // Recorded with `delegate` when the server offers it; its runs give it the working tool.
        const registry = config.delegate ? Delegate.offer(tools) : tools
        const options = {
          ...input.options,
          ...(Object.keys(approval).length === 0 ? {} : { approval: { ...approval, ...input.options?.approval } }),
          settings: { ...config.settings, workspace },
          ...(Option.isSome(key) ? { metadata: Idempotency.recordOf(key.value.digest) } : {})
        }
        const instructions = input.instructions === undefined ? {} : { instructions: input.instructions }
        const base = Runner.deriveGoalId(input.goal, yield* Clock.currentTimeMillis)
        // A continuation takes the ended goal's text; `goal` is its new instruction.
        const record = (goalId: string) =>
          input.continues === undefined
            ? Runner.submit({ goal: input.goal, options, ...instructions, goalId })
            : Continuation.submit({ goalId: input.continues, text: input.goal, options, newGoalId: goalId }).pipe(
              Effect.catchTags({
                "@rx/kernel/GoalNotFound": (error) => Effect.fail(notFound(error.goalId)),
                "@rx/kernel/NotContinuable": (error) => Effect.fail(new Conflict({ goalId: error.goalId, message: error.message }))
              })
            )
        const attempt = (n: number): Effect.Effect<string, Runner.RunError | NotFound | Conflict, StateStore.StateStore> =>
          record(n === 0 ? base : `${base}-${n}`).pipe(
            Effect.catchTag("@rx/kernel/GoalBusy", (busy) => (n + 1 < idAttempts ? attempt(n + 1) : Effect.fail(busy))),
            Effect.provideService(ToolRegistry.ToolRegistry, registry)
          )
        /** With a key: the goal it names, recorded now, or by an attempt that came first (then not queued again). */
        const keyed = ({ digest, key }: { readonly key: string; readonly digest: string }) =>
          record(Idempotency.goalIdOf(key)).pipe(
            Effect.map((goalId) => ({ goalId, fresh: true })),
            Effect.catchTag("@rx/kernel/GoalBusy", (busy) =>
              Effect.flatMap(
                Idempotency.recorded(key, digest),
                Option.match({ onNone: () => Effect.fail(busy), onSome: (goalId) => Effect.succeed({ goalId, fresh: false }) })
              )),
            Effect.provideService(ToolRegistry.ToolRegistry, registry)
          )
        // Recorded (durable) before the reply; the run starts now or waits in the queue.
        const { fresh, goalId } = yield* (Option.isSome(key) ? keyed(key.value) : Effect.map(attempt(0), (goalId) => ({ goalId, fresh: true }))).pipe(
          Effect.catchTags({
            "@rx/kernel/InvalidGoal": (error) => Effect.fail(new BadRequest({ field: "goal", message: error.message })),
            "@rx/kernel/InvalidOptions": (error) => Effect.fail(new BadRequest({ field: "options", message: error.message })),
            "@rx/kernel/GoalBusy": (error) => Effect.fail(new Conflict({ goalId: error.goalId, message: error.message })),
            "@rx/kernel/UnsupportedBehaviour": (error) => Effect.fail(new InternalError({ message: error.message })),
            "@rx/kernel/StoreError": (error) => Effect.fail(storeFailed(error))
          })
        )
        if (fresh) yield* runs.admit(goalId, { slot }).pipe(Effect.ignore)
        return { goalId }
      }).pipe(Effect.scoped)

    const cancel = (goalId: string) =>
      Effect.gen(function*() {
        const outcome = yield* Control.cancel(goalId, "cancelled over HTTP").pipe(
          Effect.catchTags({
            "@rx/kernel/GoalNotFound": () => Effect.fail(notFound(goalId)),
            "@rx/kernel/StoreError": (error) => Effect.fail(storeFailed(error))
          })
        )
        if (outcome === "already_terminated") return yield* new Conflict({ goalId, message: `goal ${goalId} has already terminated` })
        // A goal nobody runs is cancelled when it runs next: now.
        yield* goOn(goalId)
        return yield* view(goalId)
      })

    const decide = (goalId: string, callId: string, request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const decision = yield* Body.decode(request, Api.Decision, config.maxBodyBytes)
        const by = decision.by === undefined ? config.approver : `${decision.by} (via ${config.approver})`
        const outcome = yield* (decision.approve
          ? Control.approve(goalId, by, callId)
          : Control.deny(goalId, by, decision.reason ?? "denied over HTTP", callId)).pipe(
            Effect.catchTags({
              "@rx/kernel/GoalNotFound": () => Effect.fail(notFound(goalId)),
              "@rx/kernel/NothingToDecide": (error) => Effect.fail(new Conflict({ goalId, message: error.message })),
              "@rx/kernel/StoreError": (error) => Effect.fail(storeFailed(error))
            })
          )
        if (outcome === "already_terminated") return yield* new Conflict({ goalId, message: `goal ${goalId} has terminated; there is nothing to decide` })
        // The decision is recorded; the goal goes on here (an approved call runs exactly as requested).
        yield* goOn(goalId)
        return yield* view(goalId)
      })

    /** A message for the goal's next request; a goal that is not running here stays as it is (a suspended one gets it when resumed). */
    const say = (goalId: string, message: Api.Message, key: string | undefined) =>
      Effect.gen(function*() {
        if (key !== undefined) yield* Idempotency.keyOf({ [Idempotency.header]: key })
        const by = message.by === undefined ? config.approver : `${message.by} (via ${config.approver})`
        yield* Control.say(goalId, { text: message.text, by, key }).pipe(
          Effect.catchTags({
            "@rx/kernel/GoalNotFound": () => Effect.fail(notFound(goalId)),
            "@rx/kernel/MessageRefused": (error) => Effect.fail(new Conflict({ goalId, message: error.message })),
            "@rx/kernel/StoreError": (error) => Effect.fail(storeFailed(error))
          })
        )
        return yield* view(goalId)
      })

    const resume = (goalId: string) =>
      Effect.gen(function*() {
        const summary = yield* summaryOf(goalId)
        if (summary.status === "terminated") return yield* new Conflict({ goalId, message: `goal ${goalId} has terminated (${summary.reason ?? "?"})` })
        const state = yield* Goal.restore(goalId).pipe(Effect.mapError(storeFailed))
        if (Views.waitsForPerson(state) && state.awaiting !== null) {
          return yield* new Conflict({
            goalId,
            message: `goal ${goalId} waits for a decision on call ${state.awaiting.callId} (${state.awaiting.tool}): POST /v1/goals/${goalId}/approvals/${state.awaiting.callId}`
          })
        }
        const store = yield* StateStore.StateStore
        const holder = yield* store.runner(goalId).pipe(Effect.mapError(storeFailed))
        if (runs.activity(goalId) === "idle" && Option.isSome(holder)) {
          return yield* new Conflict({ goalId, message: `goal ${goalId} is being run elsewhere (${holder.value})` })
        }
        if ((yield* Workspace.recorded(daemon.root, state.options.settings?.workspace)) === undefined) {
          return yield* new Conflict({ goalId, message: `goal ${goalId} works in a folder outside this server's workspace root; it is not run here` })
        }
        yield* runs.admit(yield* driverOf(goalId).pipe(Effect.mapError(storeFailed)))
        return yield* view(goalId)
      })

    const events = (
      goalId: string,
      after: number | undefined,
      follow: boolean,
      accept: string | undefined,
      request: HttpServerRequest.HttpServerRequest
    ) =>
      Effect.gen(function*() {
        yield* daemon.subscribers.acquire
        return yield* Events.respond({
          goalId,
          after,
          follow,
          sse: accept !== undefined && accept.toLowerCase().includes("text/event-stream"),
          buffer: config.subscriberBuffer,
          stallMs: config.subscriberStallMs,
          closing: daemon.closing,
          connection: NodeHttpServerRequest.toServerResponse(request),
          head: request.method === "HEAD"
        })
      })

    return handlers
      .handleRaw("submit", ({ request }) => submit(request))
      .handle("list", ({ urlParams }) => Views.page(urlParams, runs.activity).pipe(Effect.catchTag("@rx/kernel/StoreError", (e) => Effect.fail(storeFailed(e)))))
      .handle("get", ({ path }) => view(path.id))
      .handle("view", ({ path }) => Views.whole(path.id, runs.activity).pipe(Effect.catchTag("@rx/kernel/StoreError", (error) => Effect.fail(storeFailed(error)))))
      .handle("events", ({ headers, path, request, urlParams }) => events(path.id, headers["last-event-id"] ?? urlParams.from, urlParams.follow, headers.accept, request))
      .handle("cancel", ({ path }) => cancel(path.id))
      .handleRaw("decide", ({ path, request }) => decide(path.id, path.callId, request))
      .handle("resume", ({ path }) => resume(path.id))
      .handle("say", ({ headers, path, payload }) => say(path.id, payload, headers["idempotency-key"]))
  }))

const healthHandlers = HttpApiBuilder.group(Api.Api, "health", (handlers) =>
  Effect.map(Daemon.Daemon, (daemon) =>
    handlers.handle("health", () => (daemon.runs.accepting() ? Effect.succeed({ status: "ok" as const }) : Effect.fail(shuttingDown())))))

/** What the inspector's files may do: scripts and styles from this server only, nothing inline, no framing, no Referer. */
const uiHeaders = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

/** A file of the inspector, or 304 when the client has it already. */
const uiFile = (path: string, request: HttpServerRequest.HttpServerRequest) => {
  const file = Assets.files[path]
  if (file === undefined) return Effect.fail(new NotFound({ message: `no file ${path}` }))
  if (request.headers["if-none-match"] === file.etag) return Effect.succeed(HttpServerResponse.empty({ status: 304, headers: { ...uiHeaders, etag: file.etag } }))
  return Effect.succeed(HttpServerResponse.text(file.body, { contentType: file.type, headers: { ...uiHeaders, etag: file.etag } }))
}

const uiHandlers = HttpApiBuilder.group(Api.Api, "ui", (handlers) =>
  Effect.succeed(
    handlers
      .handleRaw("page", ({ request }) => uiFile("/", request))
      .handleRaw("asset", ({ path, request }) => uiFile(`/ui/${path.file}`, request))
  ))

const docsHandlers = HttpApiBuilder.group(Api.Api, "docs", (handlers) => {
  let spec: OpenApi.OpenAPISpec | undefined
  return handlers.handle("openapi", () => Effect.sync(() => (spec ??= Api.openApi())))
})

const authorization = Layer.effect(
  Api.Authorization,
  Effect.map(Daemon.Daemon, (daemon) => {
    const matches = Guard.matcher(daemon.config.token)
    return Api.Authorization.of({
      bearer: (token) =>
        matches(token)
          ? Effect.void
          : Effect.fail(new Unauthorized({ message: "this route needs the server's token: Authorization: Bearer <token>" }))
    })
  })
)

const guard = HttpApiBuilder.middleware(Api.Api, Effect.map(Daemon.Daemon, (daemon) => Guard.middleware(daemon)))

/** Stop before the routes go: new requests get 503, streams end, runs are interrupted and recorded. */
const drainFirst = Layer.scopedDiscard(Effect.flatMap(Daemon.Daemon, (daemon) => Effect.addFinalizer(() => daemon.drain)))

/** Connections still open this long after the drain (a request stuck mid-way) are closed regardless. */
const connectionGrace = 2_000

/**
 * A request the routes cannot take: the server listens before its routes are attached (its
 * goals' tools must know the port) and after they are detached, and Node holds a request no
 * listener answers until its `requestTimeout`. It is refused at once instead, as the API's
 * `Unavailable`, so a client that came too early (a tab reconnecting to a restarted server)
 * tries again instead of waiting a minute for nothing.
 */
const refuseUnrouted = (node: NodeServer) => {
  let routed = false
  const refuse = (_request: IncomingMessage, response: ServerResponse) => {
    if (node.listenerCount("request") > 1 || response.headersSent) return
    const error = routed
      ? shuttingDown()
      : new Unavailable({ reason: "starting", message: "the server is starting; try again in a moment" })
    response.writeHead(503, { "content-type": "application/json", "retry-after": "1", "cache-control": "no-store" })
    response.end(JSON.stringify(Schema.encodeSync(Unavailable)(error)))
  }
  node.on("request", refuse)
  node.on("newListener", (event: string | symbol) => {
    if (event === "request") routed = true
  })
}

/** The HTTP server, closing every connection still open once the drain has had its time. */
const listen = (config: Config.Config) =>
  Layer.suspend(() => {
    const node = createServer({ requestTimeout: 60_000 })
    refuseUnrouted(node)
    const force = Effect.sync(() => {
      node.closeIdleConnections()
      setTimeout(() => node.closeAllConnections(), connectionGrace).unref()
    })
    // Built after the server, so released before it: the server is then closed with no connection left waiting.
    return Layer.scopedDiscard(Effect.addFinalizer(() => force)).pipe(
      Layer.provideMerge(NodeHttpServer.layer(() => node, { host: config.host, port: config.port })),
      Layer.mapError((error: HttpServerError.ServeError) =>
        new ListenError({
          host: config.host,
          port: config.port,
          message: `cannot listen on ${config.host}:${config.port}: ${error.cause instanceof Error ? error.cause.message : String(error.cause)}`
        })
      )
    )
  })

/** The tracer Effect runs with when none is provided: it keeps spans no one reads. */
const nativeTracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/**
 * A span per request only under a tracer that keeps them (as the runner's spans): with Effect's
 * default one, each request would still build its span (its URL, headers and status as
 * attributes) for no one. Decided where the server is built, with the tracer its requests get.
 */
const untracedWithoutTracer = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.unwrapEffect(Effect.zipWith(Effect.tracer, FiberRef.get(FiberRef.currentTracerEnabled), (tracer, enabled) =>
    enabled && tracer !== nativeTracer ? layer : HttpMiddleware.withTracerDisabledWhen(layer, () => true)))

/** The server with goals run by `runGoal`. */
const make = <R>(
  input: Config.Input,
  runGoal: Daemon.Run<R>
): Layer.Layer<Server, Config.InvalidConfig | ListenError, StateStore.StateStore | Toolbox.Toolbox | Exclude<R, NodeContext.NodeContext | HttpServer.HttpServer | HttpPlatform.HttpPlatform | Etag.Generator>> =>
  Layer.unwrapEffect(
    Effect.map(Config.decode(input), (config) => {
      const api = HttpApiBuilder.api(Api.Api).pipe(
        Layer.provide(Layer.mergeAll(goalsHandlers, healthHandlers, docsHandlers, uiHandlers)),
        Layer.provide(authorization)
      )
      const serve = untracedWithoutTracer(HttpApiBuilder.serve().pipe(Layer.provide(api), Layer.provide(guard)))
      const address = Layer.effect(
        Server,
        Effect.map(Daemon.Daemon, (daemon) => {
          // Listening on every address: clients on this machine use loopback.
          const reachable = daemon.host === "0.0.0.0" || daemon.host === "::" ? "127.0.0.1" : daemon.host
          const host = reachable.includes(":") ? `[${reachable}]` : reachable
          return { host: daemon.host, port: daemon.port, url: `http://${host}:${daemon.port}` }
        })
      )
      return Layer.merge(address, drainFirst.pipe(Layer.provide(serve))).pipe(
        Layer.provide(Daemon.layer(config, runGoal)),
        Layer.provide(listen(config))
      )
    })
  )

/**
 * The server, listening on `config.host:config.port` until the Layer's scope closes. It needs the
 * goal log (`StateStore`), the model (`LanguageModel`, the server's own: a request cannot choose
 * another) and the tools of each workspace (`Toolbox`).
 */
export const layer = (
  input: Config.Input
): Layer.Layer<Server, Config.InvalidConfig | ListenError, StateStore.StateStore | LanguageModel.LanguageModel | Toolbox.Toolbox> =>
  make(input, Daemon.here)

/**
 * A server that runs no goal itself: each goal it records, and each it must run again (an
 * approval, a resume, the open goals at start), is handed to `drive`, which returns once the goal
 * is on its way (for a cluster, @rx/cluster's `Workers.drive`). It needs no model; the `Toolbox`
 * still gives the tool specs a goal records when it is submitted.
 */
export const layerDispatching = <E extends { readonly message: string }, R>(
  input: Config.Input,
  drive: (goalId: string) => Effect.Effect<void, E, R>
): Layer.Layer<Server, Config.InvalidConfig | ListenError, StateStore.StateStore | Toolbox.Toolbox | R> =>
  make(input, (goalId) =>
    drive(goalId).pipe(
      Effect.catchAll((error) => Effect.logWarning(`goal ${goalId} could not be handed on: ${error.message}`)),
      Effect.annotateLogs("goalId", goalId)
    ))
