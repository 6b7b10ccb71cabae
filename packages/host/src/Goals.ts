/**
 * The goals a command works on, wherever they are: in a log on this machine (`layerLocal`), or at
 * an `rx serve` (`layerHttp`, through `@rx/server`'s typed `Client`). Each command is written once
 * against this service; `layer` picks the place the settings name (`--server`, `RX_SERVER`, else
 * the log of `--db`, `RX_DB` or the default).
 */
import { FileSystem, type Path } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Control, type Event, Goal, type GoalSummary, Options as RunOptions, Runner, State, StateStore } from "@rx/kernel"
import { type Api, type ApiError, Client, Config as ServerConfig } from "@rx/server"
import { Delegate } from "@rx/tools"
import { Context, Effect, Layer, Option, Schedule, Stream } from "effect"
import { resolve as resolvePath } from "node:path"
import * as Postgres from "./internal/postgres.js"
import * as Log from "./Log.js"
import * as Settings from "./Settings.js"
import { UsageError } from "./Settings.js"
import * as Setup from "./Setup.js"

/** Where the goals are: a log on this machine, or the rx serve at a URL. */
export type Where = { readonly _tag: "Log"; readonly db: Settings.Database } | { readonly _tag: "Server"; readonly url: string }

/** Why a goals operation failed: each says so in one line. */
export type Failure = UsageError | Runner.RunError | Goal.GoalNotFound

/** A resume's start, before its first step: the goal as it stands, what it goes on with, and the settings changes it recorded. */
export interface Starting {
  readonly state: State.State
  readonly settings: Settings.Recorded
  /** The options before this resume recorded its changes, and the `OptionsChanged` it recorded. */
  readonly before: RunOptions.Options
  readonly changed: ReadonlyArray<Event.Of<"OptionsChanged">>
}

/** What a run calls: each committed event, a person's decision where one is at hand, a resume's start. */
export interface Hooks {
  readonly observe: Runner.Observer
  readonly approve?: Runner.Approver | undefined
  readonly starting?: (start: Starting) => Effect.Effect<void>
}

/** A new goal, as the command line gives it. */
export interface RunRequest extends Setup.McpFlags {
  readonly goal: Option.Option<string>
  readonly goalFile: Option.Option<string>
  readonly given: Setup.Given
}

/** A goal to go on with, and the settings a resume changes. */
export interface ResumeRequest {
  readonly goalId: string
  readonly given: Setup.Given
  readonly mcpEnv: ReadonlyArray<string>
}

/** A decision on the call a goal waits on (or `callId`). */
export interface Decision {
  readonly goalId: string
  readonly approve: boolean
  readonly by: string
  readonly reason: string
  readonly callId: Option.Option<string>
}

/** The call decided on, as it was requested (if the goal still said so). */
export interface Decided {
  readonly callId: string
  readonly call: { readonly tool: string; readonly input: unknown; readonly iteration: number } | null
}

/** An event of a followed goal, or the note that no runner holds it (said once a time). */
export type Followed = { readonly _tag: "Event"; readonly event: Event.Event } | { readonly _tag: "Unattended" }

export interface Service {
  readonly where: Where
  /** Submit a goal and run it to its end or until it must wait. */
  readonly run: (request: RunRequest, hooks: Hooks) => Effect.Effect<Goal.Result, Failure>
  /** Go on with an open goal. */
  readonly resume: (request: ResumeRequest, hooks: Hooks) => Effect.Effect<Goal.Result, Failure>
  /** Every goal, newest first: the log's summaries, or the server's views of them. */
  readonly list: Effect.Effect<ReadonlyArray<GoalSummary.GoalSummary | Api.Goal>, Failure>
  /** The sub-goals a goal delegated, newest first. */
  readonly children: (goalId: string) => Effect.Effect<ReadonlyArray<GoalSummary.GoalSummary | Api.Goal>, Failure>
  /** A goal's events as far as they are recorded; a goal that does not exist is an error. */
  readonly events: (goalId: string) => Effect.Effect<ReadonlyArray<Event.Event>, Failure>
  /** A goal's events as they are appended, until it terminates (or, without `wait`, nothing runs it). */
  readonly follow: (goalId: string, wait: boolean) => Stream.Stream<Followed, Failure>
  /** Ask a goal to stop within one step; `reason` is recorded (a server records its own). */
  readonly cancel: (goalId: string, reason: string) => Effect.Effect<"requested" | "already_terminated", Failure>
  /** Record a decision; it runs nothing. */
  readonly decide: (decision: Decision) => Effect.Effect<Decided, Failure>
}

export class Goals extends Context.Tag("@rx/host/Goals")<Goals, Service>() {}

/** `--mcp` and its companions do not apply against a server, which runs goals with its own tools. */
const noMcp = (flags: Partial<Setup.McpFlags>, command: string) =>
  (flags.mcp?.length ?? 0) + (flags.mcpEnv?.length ?? 0) + (flags.mcpSandbox?.length ?? 0) === 0
    ? Effect.void
    : new UsageError({ message: `--mcp, --mcp-env and --mcp-sandbox do not apply to ${command}: the server runs goals with its own MCP servers (rx serve --mcp)` })

/** The recorded settings a resume compares against, and what it runs with: all but the tools, which are the goal's own. */
const recordedKeys = Settings.keys.filter((key): key is keyof Settings.Recorded & Settings.Key => key !== "tools" && ["workspace", "sandbox", "baseUrl", "model", "mode", "modelFile", "threads", "context", "seed", "temperature", "maxOutputTokens", "httpAllow"].includes(key))

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

// ---------------------------------------------------------------------------------------------
// A log on this machine
// ---------------------------------------------------------------------------------------------

/** The goals of the log at `db`. Each operation opens the log as it needs it (only `run` creates one). */
export const makeLocal = (db: Settings.Database) =>
  Effect.map(Effect.context<FileSystem.FileSystem | Path.Path>(), (context): Service => {
    const withLog = (access: Log.Access) => <A, E, R>(body: Effect.Effect<A, E, R>) =>
      body.pipe(Effect.provide(Log.layer(db, access)), Effect.provide(context))
    const noGoal = (goalId: string) => Log.noGoal(goalId, db)
    const load = (goalId: string) =>
      Effect.gen(function*() {
        const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))
        return events.length === 0 ? yield* noGoal(goalId) : events
      })

    const run = (request: RunRequest, hooks: Hooks) =>
      Effect.scoped(Effect.gen(function*() {
        // Everything is checked and built first: a run refused for its settings creates no database and records nothing.
        const { values: v, workspace, mcp } = yield* Setup.resolve(request.given, Settings.runKeys)
        yield* Setup.existingWorkspace(workspace)
        const model = yield* Setup.modelName(v)
        const tools = yield* Setup.toolsConfig({ ...v, workspace }, yield* Log.hidden(db, workspace))
        const servers = yield* Setup.mcpServers(request, mcp)
        const launch = yield* Setup.mcpLaunch(servers, request.mcpEnv, mcp)
        const services = yield* Setup.services(v, model, tools, v.tools !== undefined, { servers, launch })
        const mcpNames = services.mcp.names
        // `delegate` (sub-goals), only when --tools names it.
        const delegating = Setup.delegates(v)
        const offered = [...services.offered, ...(delegating ? [Delegate.name] : [])]
        const chosen = yield* Settings.approval(v.ask ?? [], v.deny ?? [], [...Setup.toolNamesKnown, ...mcpNames], [...offered, ...mcpNames])
        // An MCP server's destructive tools ask a person, unless --deny names them.
        const approval = { ...Object.fromEntries(services.mcp.ask.map((name) => [name, "ask" as const])), ...chosen }
        const settings: Settings.Recorded = {
          ...Setup.recordedSettings(v, workspace, model),
          // The tools offered, when not all the built-ins alone: a resume offers the same ones.
          ...(offered.length === Setup.builtinNames.length && !delegating ? {} : { tools: offered }),
          // The MCP servers: a resume starts them again. Their variables' values are never recorded.
          ...(servers.length === 0 ? {} : { mcp: servers.map(Setup.encodeServer) }),
          // What they listed and were not offered.
          ...(services.mcp.leftOut.length === 0 ? {} : { mcpLeftOut: services.mcp.leftOut })
        }
        const options: RunOptions.Input = { ...Setup.runOptions(v), ...(Object.keys(approval).length === 0 ? {} : { approval }), settings }
        const goal = yield* Setup.goalText(request.goal, request.goalFile, options)
        const instructions = yield* Setup.instructions(v, workspace)
        yield* Setup.tell(services.notes)
        return yield* Runner.submit({ goal, options, observe: hooks.observe, ...(instructions === "" ? {} : { instructions }) }).pipe(
          Effect.flatMap((goalId) => Runner.resume(goalId, hooks)),
          Effect.provide(Setup.delegation(services.layer, tools, delegating ? hooks : undefined)),
          withLog("create")
        )
      })).pipe(Effect.provide(context))

    const resume = (request: ResumeRequest, hooks: Hooks) =>
      Effect.scoped(Effect.gen(function*() {
        const { goalId, given } = request
        const state = yield* Goal.restore(goalId)
        if (state.seq === 0) return yield* noGoal(goalId)
        const recorded = state.options.settings ?? {}
        const { found, values: v, workspace, mcp } = yield* Setup.resolve(given, Settings.resumeKeys, recorded)
        yield* Setup.existingWorkspace(workspace, found.workspace?.source._tag === "recorded")
        if (recorded.volume !== undefined) yield* Postgres.onVolume(goalId, recorded.volume, workspace)
        // The limits of a goal are in its options; only a flag changes them.
        const limitFlags = Settings.values(yield* Settings.fromFlags(given))
        const limits = Setup.runOptions(limitFlags)
        const named = Settings.limitKeys.filter((key) => limitFlags[key] !== undefined).map((key) => `--${Settings.table[key].flag}`).join(", ")
        const changes = Object.entries(limits).filter(([key, value]) => state.options[key as keyof RunOptions.Options] !== value)
        // A terminated goal's log is closed (one Terminated, last): no limit reopens it.
        if (state.terminated !== null && named !== "") {
          return yield* new UsageError({
            message: state.terminated.reason === "max_iterations"
              ? `goal ${goalId} ended at its iteration limit (max_iterations, ${plural(state.completed, "iteration")}) and a terminated goal's log is closed, so ${named} cannot extend it: start a new goal with rx run`
              : `goal ${goalId} has terminated (${state.terminated.reason}) and a terminated goal's log is closed, so ${named} cannot change it: start a new goal with rx run`
          })
        }
        if (limits.maxIterations !== undefined && limits.maxIterations <= state.completed) {
          return yield* new UsageError({
            message: `goal ${goalId} has completed ${plural(state.completed, "iteration")} already; --max-iterations must be more than that (rx cancel ${goalId} stops it)`
          })
        }
        const model = yield* Setup.modelName(v)
        // The tools the goal was offered, as far as they can run here (said at start if not).
        const offered = (recorded.tools ?? Setup.builtinNames).filter((name) => Setup.builtinNames.includes(name))
        const delegating = recorded.tools?.includes(Delegate.name) === true
        const tools = yield* Setup.toolsConfig({ ...v, workspace, tools: offered }, yield* Log.hidden(db, workspace))
        // The goal's MCP servers again; their tools as the goal recorded them.
        const servers = Setup.recordedMcp(recorded)
        const launch = yield* Setup.mcpLaunch(servers, request.mcpEnv, mcp)
        const services = yield* Setup.services(v, model, tools, false, { servers, launch, pinned: state.tools })
        const settings = Setup.recordedSettings(v, workspace, model)
        yield* Setup.tell(services.notes)
        // Other settings or limits than recorded: record what this resume uses before it runs, so
        // the log (and rx inspect) says what each resume ran with.
        const differs = recordedKeys.some((key) => JSON.stringify(recorded[key]) !== JSON.stringify(settings[key]))
        const changed = state.terminated === null && (differs || changes.length > 0)
          ? yield* Control.changeOptions(goalId, (current): RunOptions.Input => ({ ...current, ...limits, settings: { ...current.settings, ...settings } }))
          : "unchanged"
        const appended = changed === "changed"
          ? (yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId, state.seq))).filter((e): e is Event.Of<"OptionsChanged"> => e._tag === "OptionsChanged")
          : []
        if (hooks.starting !== undefined) yield* hooks.starting({ state, settings: { ...recorded, ...settings }, before: state.options, changed: appended })
        return yield* Runner.resume(goalId, hooks).pipe(Effect.provide(Setup.delegation(services.layer, tools, delegating ? hooks : undefined)))
      })).pipe(withLog("write"))

    /** How often a follower checks that a runner still holds the goal. */
    const watchEvery = "1 second"

    const follow = (goalId: string, wait: boolean): Stream.Stream<Followed, Failure> =>
      Stream.unwrap(Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        if (Option.isNone(yield* store.goal(goalId))) return yield* noGoal(goalId)
        // A watch on the goal's runner: twice in a row no runner holds an open goal (and no event
        // came between), and it is said once; without `wait`, following stops there.
        let quiet = 0
        let told = false
        const watch = Stream.repeatEffectWithSchedule(store.runner(goalId), Schedule.spaced(watchEvery)).pipe(
          Stream.filterMap((holder) => {
            quiet = Option.isNone(holder) ? quiet + 1 : 0
            if (quiet < 2) told = false
            if (quiet < 2 || told) return Option.none()
            told = true
            return Option.some<Followed>({ _tag: "Unattended" })
          })
        )
        const events = Stream.map(store.changes(goalId, 0), (event): Followed => {
          quiet = 0
          return { _tag: "Event", event }
        })
        return Stream.merge(events, watch).pipe(
          Stream.takeUntil((item) => (item._tag === "Event" ? item.event._tag === "Terminated" : !wait))
        )
      })).pipe(Stream.provideLayer(Layer.provide(Log.layer(db, "read"), Layer.succeedContext(context))))

    return {
      where: { _tag: "Log", db },
      run,
      resume,
      list: Effect.flatMap(StateStore.StateStore, (store) => store.goals()).pipe(withLog("read")),
      children: (goalId) => Effect.flatMap(StateStore.StateStore, (store) => store.goals({ parent: goalId })).pipe(withLog("read")),
      events: (goalId) => load(goalId).pipe(withLog("read")),
      follow,
      cancel: (goalId, reason) => Control.cancel(goalId, reason).pipe(withLog("write")),
      decide: (d) =>
        Effect.gen(function*() {
          const callId = Option.getOrUndefined(d.callId)
          const outcome = yield* (d.approve ? Control.approve(d.goalId, d.by, callId) : Control.deny(d.goalId, d.by, d.reason, callId)).pipe(
            Effect.catchTags({
              "@rx/kernel/GoalNotFound": () => noGoal(d.goalId),
              "@rx/kernel/NothingToDecide": (error) =>
                Effect.flatMap(Goal.restore(d.goalId), (state) => {
                  const child = state.suspended?.child
                  return new UsageError({
                    message: child === undefined
                      ? `${error.message} (rx inspect ${d.goalId} shows its approvals)`
                      : `goal ${d.goalId} waits on its sub-goal ${child}, not on a call of its own: rx ${d.approve ? "approve" : "deny"} ${child} decides it, then rx resume ${d.goalId} goes on with both`
                  })
                })
            })
          )
          const state = yield* Goal.restore(d.goalId)
          if (outcome === "already_terminated") {
            return yield* new UsageError({ message: `goal ${d.goalId} has terminated (${state.terminated?.reason ?? "?"}); there is nothing to decide` })
          }
          const awaited = state.awaiting
          return {
            callId: awaited?.callId ?? callId ?? "?",
            call: awaited === null ? null : { tool: awaited.tool, input: awaited.input, iteration: state.iteration }
          }
        }).pipe(withLog("write"))
    }
  })

// ---------------------------------------------------------------------------------------------
// An rx serve
// ---------------------------------------------------------------------------------------------

/** The server the settings name: `--server`, else `RX_SERVER`; none for a local log. */
export const serverOf = (given: Setup.Given) =>
  Effect.gen(function*() {
    const flag = (yield* Settings.fromFlags({ server: given.server ?? Option.none() })).server
    const found = flag ?? (yield* Settings.fromEnv(["server"])).server
    return Option.fromNullable(found?.value)
  })

/**
 * The bearer token for `url`: `RX_TOKEN`, or, for a server on this machine, the token file next
 * to the log (`--db`, `RX_DB` or the default), which `rx serve` writes when `RX_TOKEN` is unset.
 * A remote server's token never comes from a file here, so the local one cannot leak to it.
 */
const tokenFor = (url: string, given: Setup.Given) =>
  Effect.gen(function*() {
    const env = (process.env["RX_TOKEN"] ?? "").trim()
    if (env !== "") return env
    const howTo = `set RX_TOKEN to the token of the server at ${url}`
    if (!ServerConfig.isLoopback(new URL(url).hostname)) return yield* new UsageError({ message: `${howTo} (rx serve prints where it keeps it)` })
    const file = yield* Log.tokenFile(yield* Settings.database(Setup.dbFlag(given)))
    const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
      Effect.mapError(() => new UsageError({ message: `${howTo}: there is no token file at ${file} (rx serve writes it there when RX_TOKEN is unset, beside the log it uses)` }))
    )
    return text.trim()
  })

/** An error of the server (or of reaching it) as one line a user can act on. */
const explain = (url: string) => (error: ApiError.ApiError | Client.ClientError): UsageError => {
  switch (error._tag) {
    case "@rx/server/Unauthorized":
      return new UsageError({ message: `the server at ${url} refused the token: set RX_TOKEN to its token (rx serve prints where it keeps it)` })
    case "@rx/server/NotFound":
      return new UsageError({
        message: error.goalId === undefined ? `${error.message} (at ${url})` : `no goal with id ${error.goalId} at ${url} (rx list --server ${url} shows the goals)`
      })
    case "@rx/server/BadRequest":
      return new UsageError({ message: `the server at ${url} refused the request: ${error.message}` })
    case "@rx/server/ClientError":
      return new UsageError({ message: error.message })
    default:
      return new UsageError({ message: `the server at ${url}: ${error.message}` })
  }
}

/** Flags given that are not in `allowed`: each is refused, as the server's own settings apply. */
const refuseOthers = (given: Setup.Given, allowed: ReadonlyArray<Settings.Key>, what: string) => {
  const isGiven = (value: Option.Option<string> | boolean | undefined) => value === true || (typeof value === "object" && Option.isSome(value))
  const other = Settings.keys.find((key) => !allowed.includes(key) && key !== "server" && key !== "db" && isGiven(given[key]))
  return other === undefined
    ? Effect.void
    : new UsageError({ message: `--${Settings.table[other].flag} does not apply with --server: the server runs goals with its own model, tools and sandbox (${what})` })
}

/** What `rx run --server` may set: the limits, the approval policy, the folder and instructions. */
const remoteRunKeys: ReadonlyArray<Settings.Key> = [...Settings.limitKeys, "ask", "deny", "workspace", "instructions"]

/** The goals of the rx serve at `url`, with the token the settings name. */
export const makeHttp = (url: string, given: Setup.Given) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
    const connect = Effect.flatMap(tokenFor(url, given), (token) => Effect.provide(Client.make({ url, token }), NodeHttpClient.layer)).pipe(
      Effect.provide(context),
      Effect.cached
    )
    const rx = yield* connect
    const http = <A, R>(effect: (client: Client.Service) => Effect.Effect<A, ApiError.ApiError | Client.ClientError, R>) =>
      Effect.flatMap(rx, (client) => Effect.mapError(effect(client), explain(url)))
    /** The goal's events from the start, each from `from` on observed, until it ends or suspends. */
    const follow = (goalId: string, from: number, hooks: Hooks) =>
      Effect.gen(function*() {
        const client = yield* rx
        let state = State.empty(goalId)
        yield* client.events(goalId).pipe(
          Stream.takeUntil((event) => event._tag === "Terminated" || (event._tag === "Suspended" && event.seq >= from)),
          Stream.runForEach((event) =>
            Effect.suspend(() => {
              state = State.reduce(state, event)
              return event.seq >= from ? hooks.observe(event) : Effect.void
            })
          ),
          Effect.mapError(explain(url))
        )
        return Goal.result(state, { reason: "shutdown", detail: "the server ended the events before the goal ended" })
      })

    const service: Service = {
      where: { _tag: "Server", url },
      run: (request, hooks) =>
        Effect.gen(function*() {
          yield* noMcp(request, "rx run --server")
          yield* refuseOthers(request.given, remoteRunKeys, "rx run --server takes the limits, --ask, --deny, --workspace (a folder inside the server's root) and --instructions")
          const flags = yield* Settings.fromFlags(request.given)
          // The limits and approvals of the environment apply as in a local run; a workspace only from the flag.
          const values = Settings.values(Settings.merge(flags, yield* Settings.fromEnv(remoteRunKeys.filter((key) => key !== "workspace" && key !== "instructions"))))
          const approval = yield* Settings.approval(values.ask ?? [], values.deny ?? [], Setup.builtinNames, Setup.builtinNames)
          const options = { ...Setup.runOptions(values), ...(Object.keys(approval).length === 0 ? {} : { approval }) }
          const text = yield* Setup.goalText(request.goal, request.goalFile, options)
          const instructions = values.instructions === undefined
            ? ""
            : (yield* Setup.readText(resolvePath(values.instructions), "the --instructions file", Setup.maxInstructionBytes)).trim()
          const { goalId } = yield* http((client) =>
            client.submit({
              goal: text,
              options,
              ...(instructions === "" ? {} : { instructions }),
              ...(flags.workspace === undefined ? {} : { workspace: flags.workspace.value })
            })
          )
          return yield* follow(goalId, 0, hooks)
        }).pipe(Effect.provide(context)),
      resume: (request, hooks) =>
        Effect.gen(function*() {
          yield* noMcp(request, "rx resume --server")
          yield* refuseOthers(request.given, [], "the goal goes on with the settings it recorded")
          const before = yield* http((client) => client.goal(request.goalId))
          yield* http((client) => client.resume(request.goalId))
          return yield* follow(request.goalId, before.nextSeq, hooks)
        }),
      list: http((client) => Stream.runCollect(client.goals())).pipe(Effect.map((goals) => Array.from(goals))),
      children: (goalId) => http((client) => Stream.runCollect(client.goals({ parent: goalId }))).pipe(Effect.map((goals) => Array.from(goals))),
      events: (goalId) => http((client) => Stream.runCollect(client.events(goalId, { follow: false }))).pipe(Effect.map((events) => Array.from(events))),
      follow: (goalId, wait) =>
        wait
          ? Stream.fail(new UsageError({ message: "--wait does not apply with --server: the server runs the goal, and --follow lasts until it terminates" }))
          : Stream.unwrap(Effect.map(rx, (client) =>
            client.events(goalId, { follow: true }).pipe(
              Stream.map((event): Followed => ({ _tag: "Event", event })),
              Stream.mapError(explain(url))
            ))),
      cancel: (goalId) =>
        Effect.flatMap(rx, (client) =>
          client.cancel(goalId).pipe(
            Effect.as("requested" as const),
            Effect.catchTag("@rx/server/Conflict", () => Effect.succeed("already_terminated" as const)),
            Effect.mapError(explain(url))
          )),
      decide: (d) =>
        Effect.gen(function*() {
          const goal = yield* http((client) => client.goal(d.goalId))
          const callId = Option.getOrElse(d.callId, () => goal.approval?.callId ?? "")
          if (callId === "") {
            return yield* new UsageError({
              message: goal.status === "terminated"
                ? `goal ${d.goalId} has terminated (${goal.reason ?? "?"}); there is nothing to decide`
                : `goal ${d.goalId} waits for no decision (rx inspect ${d.goalId} --server ${url} shows its approvals)`
            })
          }
          // The server records who decided as `<by> (via http)`.
          yield* http((client) => client.decide(d.goalId, callId, { approve: d.approve, by: d.by, ...(d.approve ? {} : { reason: d.reason }) }))
          const asked = goal.approval !== null && goal.approval.callId === callId ? goal.approval : null
          return { callId, call: asked === null ? null : { tool: asked.tool, input: asked.input, iteration: 0 } }
        })
    }
    return service
  })

/** The goals at the server the settings name, else in the log they name. */
export const make = (given: Setup.Given) =>
  Effect.flatMap(
    serverOf(given),
    Option.match({
      onNone: () => Effect.flatMap(Log.database(Setup.dbFlag(given)), makeLocal),
      onSome: (url) => makeHttp(url, given)
    })
  )

export const layer = (given: Setup.Given) => Layer.effect(Goals, make(given))
export const layerLocal = (db: Settings.Database) => Layer.effect(Goals, makeLocal(db))
export const layerHttp = (url: string, given: Setup.Given = {}) => Layer.effect(Goals, makeHttp(url, given))

/** A goal's state as far as its events go: what a run's closing line says of a goal stopped from outside. */
export const stateOf = (goalId: string) =>
  Effect.flatMap(Goals, (goals) => Effect.map(goals.events(goalId), (events) => State.fromEvents(goalId, events)))
