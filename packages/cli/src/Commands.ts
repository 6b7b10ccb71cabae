/**
 * The `rx` commands. Each is a thin transport: it resolves its settings, builds Layers from
 * them, calls the kernel, and prints. What the command line accepts is in `Usage`, parsed by `Cli`.
 */
import { FileSystem, Path } from "@effect/platform"
import { Builtins, Confinement, HttpFetch, Sandbox } from "@rx/tools"
import { Doctor, SqliteStore } from "@rx/store-sqlite"
import { Control, Event, Goal, GoalSummary, LanguageModel, Options as RunOptions, Replay, Runner, StateStore } from "@rx/kernel"
import { Config as ServerConfig, Server, Toolbox } from "@rx/server"
import { Console, Context, Deferred, Effect, Either, Layer, Option, Schedule, Schema, Stream } from "effect"
import * as Net from "node:net"
import * as Demo from "./Demo.js"
import * as ExitCode from "./ExitCode.js"
import { ExitStatus, note, printer, runGoal, say, sayJson, setExit } from "./internal/goal.js"
import { onTerminate } from "./internal/interrupt.js"
import * as Postgres from "./internal/postgres.js"
import * as Remote from "./internal/remote.js"
import * as Setup from "./internal/setup.js"
import * as Token from "./internal/token.js"
import * as Render from "./Render.js"
import * as Settings from "./Settings.js"
import * as Usage from "./Usage.js"

export { ExitStatus }

/** A usage problem: printed as `rx: <message>`, exit 1. */
export const UsageError = Settings.UsageError
export type UsageError = Settings.UsageError

/**
 * A note on stderr when the default log is used while `./.rx/rx.db`, where an earlier rx kept
 * its log, exists: rx never switches logs silently, nor picks up a log inside a workspace.
 */
const legacyNote = (db: Settings.Database) =>
  Effect.gen(function*() {
    if (db.source !== "default") return
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const legacy = path.resolve(".rx", "rx.db")
    if (legacy === db.file || !(yield* fs.exists(legacy).pipe(Effect.orElseSucceed(() => false)))) return
    yield* Console.error(Render.terminal(
      `rx: note: ${legacy} is a log of an earlier rx, which kept it in the current folder; this rx uses ${db.file}. To keep using the old log, pass --db ${legacy} (or set RX_DB), best after moving it out of the workspace`
    ))
  })

/**
 * How a command uses the log: `create` (only `rx run`: a new log where no file exists), `write`
 * (an existing log: resume, cancel) or `read` (read-only: list, inspect, events, replay).
 */
type Access = "create" | "write" | "read"

/** A refused database as one line a user can act on. */
const explain = (db: Settings.Database) => (error: SqliteStore.DatabaseRefused | StateStore.StoreError) => {
  if (error._tag === "@rx/kernel/StoreError") return error
  switch (error.reason) {
    case "missing":
      return new UsageError({ message: `no rx database at ${db.file} (rx run creates one; pass --db or set RX_DB)` })
    case "damaged":
      return new UsageError({ message: `${error.message} (rx doctor --db ${db.file} reports everything it finds)` })
    default:
      return new UsageError({ message: error.message })
  }
}

/** The log the flags name (see `Settings.database`), with the note about a log of an earlier rx. */
const database = (flag: Option.Option<string>) => Effect.tap(Settings.database(flag), legacyNote)

/**
 * Run `body` with the SQLite log at `db`. Only `create` makes a folder (0700: the log holds
 * every tool output) and a new file.
 */
const withStore = (db: Settings.Database, access: Access) =>
<A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    if (db.postgres) return yield* Effect.provide(body, Postgres.log(db))
    if (access === "create") {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      yield* fs.makeDirectory(path.dirname(db.file), { recursive: true, mode: 0o700 }).pipe(
        Effect.mapError((error) => new UsageError({ message: `cannot create the folder of the database ${db.file}: ${error.message}` }))
      )
    }
    const store = SqliteStore.layer({ filename: db.file, readonly: access === "read", create: access === "create" }).pipe(
      Layer.mapError(explain(db))
    )
    return yield* Effect.provide(body, store)
  })

/** Run `body` with the log the flags name. */
const withLog = (flag: Option.Option<string>, access: Access) =>
<A, E, R>(body: (db: Settings.Database) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(database(flag), (db) => withStore(db, access)(body(db)))

/** A goal the log does not hold, said with the log it looked in. */
const noGoal = (goalId: string, db: Settings.Database) =>
  new UsageError({ message: `no goal with id ${goalId} in the database ${db.label} (rx list${db.source === "flag" ? ` --db ${Render.shellWord(db.label)}` : ""} shows its goals; --db or RX_DB names another)` })

/** Load a goal's log, or fail with a message naming the id and the log. */
const loadGoal = (goalId: string, db: Settings.Database) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const events = yield* store.load(goalId)
    if (events.length === 0) return yield* noGoal(goalId, db)
    return events
  })

/**
 * The log's files (the database and its `-wal`, `-shm` and `-journal` siblings) and the server
 * token beside it (`rx serve`'s, which submits and approves goals), those that lie inside the
 * workspace, as the tools' `hiddenPaths`: every file tool refuses them and the sandbox hides
 * them, so the agent can neither read nor rewrite its own record, nor act as a client of the
 * server. Compared by real paths, so a symlinked workspace or folder does not hide the overlap.
 */
const hide = (db: Settings.Database, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const real = (p: string) => fs.realPath(p).pipe(Effect.orElseSucceed(() => path.resolve(p)))
    const root = yield* real(workspace)
    /** `file` with its folder as a real path. */
    const located = (file: string) => Effect.map(real(path.dirname(file)), (folder) => path.join(folder, path.basename(file)))
    const log = db.postgres ? [] : ["", "-wal", "-shm", "-journal"].map((suffix) => `${db.file}${suffix}`)
    const files = yield* Effect.forEach([...log, yield* Remote.tokenFile(db)], located)
    return files.filter((file) => Confinement.below(root, file))
  })

/** What a command is given: its settings' flags, its other flags and its argument. */
export interface Flags {
  readonly settings: Setup.Given
  /** The argument of a command that takes a goal id. */
  readonly goalId: string
  readonly goal: Option.Option<string>
  readonly goalFile: Option.Option<string>
  readonly call: Option.Option<string>
  readonly by: Option.Option<string>
  readonly reason: Option.Option<string>
  readonly step: Option.Option<string>
  readonly json: boolean
  readonly follow: boolean
  readonly wait: boolean
  readonly keep: boolean
  readonly host: Option.Option<string>
  readonly allowRemote: boolean
  readonly port: Option.Option<string>
  readonly concurrency: Option.Option<string>
  readonly cluster: boolean
  /** `rx serve --new-token`: a new token even when the token file holds one. */
  readonly newToken: boolean
  readonly failover: Option.Option<string>
  readonly drain: Option.Option<string>
  /** Each `--mcp NAME=COMMAND|URL` given. */
  readonly mcp: ReadonlyArray<string>
  /** Each `--mcp-env NAME=VAR=VALUE` given. */
  readonly mcpEnv: ReadonlyArray<string>
  /** Each `--mcp-sandbox NAME[=network]` given. */
  readonly mcpSandbox: ReadonlyArray<string>
}

/** What @effect/cli parsed for a command (`Cli`): each option by its flag (a text if given, a switch, or each value of a repeatable one), and the argument. */
export interface Parsed {
  readonly options: Readonly<Record<string, Option.Option<string> | boolean | ReadonlyArray<string>>>
  readonly arg: Option.Option<string>
}

export const flagsOf = (spec: Usage.Spec, parsed: Parsed): Flags => {
  const text = (flag: string) => {
    const value = parsed.options[flag]
    return Option.isOption(value) ? value : Option.none()
  }
  const on = (flag: string) => parsed.options[flag] === true
  const list = (flag: string) => {
    const value = parsed.options[flag]
    return Array.isArray(value) ? value : []
  }
  return {
    settings: Object.fromEntries(spec.settings.map((key) => [key, Settings.isSwitch(key) ? on(Settings.table[key].flag) : text(Settings.table[key].flag)])),
    goalId: Option.getOrElse(parsed.arg, () => ""),
    goal: parsed.arg,
    goalFile: text("goal-file"),
    call: text("call"),
    by: text("by"),
    reason: text("reason"),
    step: text("step"),
    json: on("json"),
    follow: on("follow"),
    wait: on("wait"),
    keep: on("keep"),
    host: text("host"),
    allowRemote: on("allow-remote"),
    port: text("port"),
    concurrency: text("concurrency"),
    cluster: on("cluster"),
    newToken: on("new-token"),
    failover: text("failover"),
    drain: text("drain"),
    mcp: list("mcp"),
    mcpEnv: list("mcp-env"),
    mcpSandbox: list("mcp-sandbox")
  }
}

const dbFlag = (given: Setup.Given): Option.Option<string> => {
  const db = given.db
  return db === undefined || typeof db === "boolean" ? Option.none() : db
}

/**
 * A command against the server `--server` (or `RX_SERVER`) names, or else on the local log. `json`
 * is the command's own `--json`, where it has one.
 */
const local = <A, E, R, A2, E2, R2>(
  flags: Flags,
  remote: (server: Remote.Remote) => Effect.Effect<A2, E2, R2>,
  here: Effect.Effect<A, E, R>
) =>
  Effect.flatMap(
    Remote.serverOf(flags.settings),
    Option.match({
      onNone: (): Effect.Effect<A | A2, E | E2, R | R2> => here,
      onSome: (url) => remote({ url, given: flags.settings, json: flags.json })
    })
  )

/** `--mcp` and its companions do not apply against a server, which runs goals with its own tools. */
const noMcp = (flags: Flags, command: string) =>
  flags.mcp.length + flags.mcpEnv.length + flags.mcpSandbox.length === 0
    ? Effect.void
    : new UsageError({ message: `--mcp, --mcp-env and --mcp-sandbox do not apply to ${command}: the server runs goals with its own MCP servers (rx serve --mcp)` })

/** Say what is not offered and why, once, at the start of a run. */
const tell = (notes: ReadonlyArray<string>) => Effect.forEach(notes, note, { discard: true })

const run = (flags: Flags) =>
  local(flags, (server) => Effect.andThen(noMcp(flags, "rx run --server"), Remote.run(server, flags.goal, flags.goalFile)), Effect.scoped(Effect.gen(function*() {
      // Everything is checked and built first: a run refused for its settings creates no database and records nothing.
      const db = yield* database(dbFlag(flags.settings))
      const { values: v, workspace, mcp } = yield* Setup.resolve(flags.settings, Usage.runSettings)
      yield* Setup.existingWorkspace(workspace)
      const model = yield* Setup.modelName(v)
      const tools = yield* Setup.toolsConfig({ ...v, workspace }, yield* hide(db, workspace))
      const servers = yield* Setup.mcpServers(flags, mcp)
      const launch = yield* Setup.mcpLaunch(servers, flags.mcpEnv, mcp)
      const services = yield* Setup.services(v, model, tools, v.tools !== undefined, { servers, launch })
      const mcpNames = services.mcp.names
      const chosen = yield* Settings.approval(v.ask ?? [], v.deny ?? [], [...Setup.builtinNames, ...mcpNames], [...services.offered, ...mcpNames])
      // An MCP server's destructive tools ask a person, unless --deny names them.
      const approval = { ...Object.fromEntries(services.mcp.ask.map((name) => [name, "ask" as const])), ...chosen }
      const metadata: Settings.Recorded & { readonly mcp?: ReadonlyArray<unknown> } = {
        ...Setup.recordedSettings(v, workspace, model),
        // The tools offered, when not all the built-ins: a resume offers the same ones.
        ...(services.offered.length === Setup.builtinNames.length ? {} : { tools: services.offered }),
        // The MCP servers: a resume starts them again. Their variables' values are never recorded.
        ...(servers.length === 0 ? {} : { mcp: servers.map((server) => Setup.encodeServer(server)) }),
        // What they listed and were not offered.
        ...(services.mcp.leftOut.length === 0 ? {} : { mcpLeftOut: services.mcp.leftOut })
      }
      const options: RunOptions.Input = {
        ...Setup.runOptions(v),
        ...(Object.keys(approval).length === 0 ? {} : { approval }),
        metadata
      }
      const goal = yield* Setup.goalText(flags.goal, flags.goalFile, options)
      const instructions = yield* Setup.instructions(v, workspace)
      yield* tell(services.notes)
      yield* withStore(db, "create")(
        runGoal(({ approve, observe }) =>
          Runner.submit({ goal, options, observe, ...(instructions === "" ? {} : { instructions }) }).pipe(
            Effect.flatMap((goalId) => Runner.resume(goalId, { observe, approve })),
            Effect.provide(services.layer)
          ), { json: flags.json, db })
      )
    })))

/** The recorded settings a resume compares against, and what it runs with: all but the tools, which are the goal's own. */
const recordedKeys = Object.keys(Settings.Recorded.fields).filter((key): key is Exclude<keyof Settings.Recorded, "tools"> => key !== "tools")

const resume = (flags: Flags) =>
  local(flags, (server) => Effect.andThen(noMcp(flags, "rx resume --server"), Remote.resume(server, flags.goalId)), withLog(dbFlag(flags.settings), "write")((db) =>
    Effect.scoped(Effect.gen(function*() {
      const state = yield* Goal.restore(flags.goalId)
      if (state.seq === 0) return yield* noGoal(flags.goalId, db)
      const recorded = Settings.recorded(state.options.metadata)
      const { found, values: v, workspace, mcp } = yield* Setup.resolve(flags.settings, Usage.resumeSettings, recorded)
      yield* Setup.existingWorkspace(workspace, found.workspace?.source._tag === "recorded")
      const { volume } = Confinement.placementOf(state.options.metadata)
      if (volume !== undefined) yield* Postgres.onVolume(flags.goalId, volume, workspace)
      // The limits of a goal are in its options; only a flag changes them.
      const limitFlags = Settings.values(yield* Settings.fromFlags(flags.settings))
      const limits = Setup.runOptions(limitFlags)
      const named = Object.keys(limits).length === 0
        ? ""
        : Object.keys(limitFlags).filter((key) => Usage.limits.some((k) => k === key)).map((key) => `--${Settings.table[key as Settings.Key].flag}`).join(", ")
      const changes = Object.entries(limits).filter(([key, value]) => state.options[key as keyof RunOptions.Options] !== value)
      // A terminated goal's log is closed (one Terminated, last): no limit reopens it.
      if (state.terminated !== null && named !== "") {
        return yield* new UsageError({
          message: state.terminated.reason === "max_iterations"
            ? `goal ${flags.goalId} ended at its iteration limit (max_iterations, ${Render.plural(state.completed, "iteration")}) and a terminated goal's log is closed, so ${named} cannot extend it: start a new goal with rx run`
            : `goal ${flags.goalId} has terminated (${state.terminated.reason}) and a terminated goal's log is closed, so ${named} cannot change it: start a new goal with rx run`
        })
      }
      if (limits.maxIterations !== undefined && limits.maxIterations <= state.completed) {
        return yield* new UsageError({
          message: `goal ${flags.goalId} has completed ${Render.plural(state.completed, "iteration")} already; --max-iterations must be more than that (rx cancel ${flags.goalId} stops it)`
        })
      }
      const model = yield* Setup.modelName(v)
      // The tools the goal was offered, as far as they can run here (said at start if not).
      const offered = (recorded.tools ?? Setup.builtinNames).filter((name) => Setup.builtinNames.includes(name))
      const tools = yield* Setup.toolsConfig({ ...v, workspace, tools: offered }, yield* hide(db, workspace))
      // The goal's MCP servers again; their tools as the goal recorded them.
      const servers = Setup.recordedMcp(state.options.metadata)
      const launch = yield* Setup.mcpLaunch(servers, flags.mcpEnv, mcp)
      const services = yield* Setup.services(v, model, tools, false, { servers, launch, pinned: state.tools })
      const settings = Setup.recordedSettings(v, workspace, model)
      yield* tell(services.notes)
      // What goes on, with what (this resume's settings), and from where.
      if (!flags.json) yield* say(Render.resumeLine(state, { ...recorded, ...settings }))
      // Other settings or limits than recorded: record what this resume uses before it runs, so
      // the log (and rx inspect) says what each resume ran with.
      const differs = recordedKeys.some((key) => JSON.stringify(recorded[key]) !== JSON.stringify(settings[key]))
      if (state.terminated === null && (differs || changes.length > 0)) {
        const before = state.options
        const changed = yield* Control.changeOptions(flags.goalId, (current): RunOptions.Input => ({
          ...current,
          ...limits,
          metadata: { ...current.metadata, ...settings }
        }))
        if (changed === "changed") {
          const appended = (yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(flags.goalId, state.seq)))
            .filter((e): e is Event.Of<"OptionsChanged"> => e._tag === "OptionsChanged")
          for (const event of appended) {
            yield* flags.json ? sayJson(event) : say(`settings of this resume, recorded at seq ${event.seq}: ${Render.optionsDiff(before, event.options)}`)
          }
        }
      }
      const options = (yield* Goal.restore(flags.goalId)).options
      yield* runGoal(
        ({ approve, observe }) => Runner.resume(flags.goalId, { observe, approve }).pipe(Effect.provide(services.layer)),
        { json: flags.json, db, goalId: flags.goalId, options }
      )
    }))
  ))

/** Who decides: `--by`, else the OS user name; an empty name is refused. */
const decider = (given: Option.Option<string>) =>
  Effect.flatMap(
    Option.match(given, { onNone: () => Settings.userName, onSome: (name) => Effect.succeed(name.trim()) }),
    (by) => (by === "" ? new UsageError({ message: "--by needs a name" }) : Effect.succeed(by))
  )

/**
 * Record a decision on the call a goal waits on (`rx approve`, `rx deny`). It runs nothing: the
 * goal goes on at `rx resume`.
 */
const decide = (
  flags: Flags,
  approved: boolean,
  reason: string
) =>
  local(
    flags,
    (server) =>
      Effect.flatMap(decider(flags.by), (by) => Remote.decide(server, flags.goalId, approved, flags.call, approved ? undefined : reason, by)),
    withLog(dbFlag(flags.settings), "write")((db) =>
    Effect.gen(function*() {
      const id = flags.goalId
      const by = yield* decider(flags.by)
      const callId = Option.getOrUndefined(flags.call)
      const outcome = yield* (approved ? Control.approve(id, by, callId) : Control.deny(id, by, reason, callId)).pipe(
        Effect.catchTags({
          "@rx/kernel/GoalNotFound": () => noGoal(id, db),
          "@rx/kernel/NothingToDecide": (error) => new UsageError({ message: `${error.message} (rx inspect ${id} shows its approvals)` })
        })
      )
      const state = yield* Goal.restore(id)
      if (outcome === "already_terminated") {
        return yield* new UsageError({ message: `goal ${id} has terminated (${state.terminated?.reason ?? "?"}); there is nothing to decide` })
      }
      const flag = db.source === "flag" ? ` --db ${Render.shellWord(db.label)}` : ""
      const awaited = state.awaiting
      // The call decided on, whole (or how much is not shown, and where), then what happens next.
      const [head, ...input] = awaited === null ? [] : Render.callView(awaited.tool, awaited.input, `rx inspect ${id} --step ${state.iteration}${flag}`)
      yield* say([
        Render.terminal(`${approved ? "approved" : "denied"} call ${awaited?.callId ?? callId ?? "?"} of goal ${id}, by ${by}${head === undefined ? "" : ":"}`),
        ...(head === undefined ? [] : [`  ${head}`, ...input.map((line) => `  ${line}`)]),
        `recorded, nothing run yet: rx resume ${id}${flag} ${approved ? "runs it exactly as requested" : "tells the model"}`
      ].join("\n"))
    })
  ))

const approve = (flags: Flags) => decide(flags, true, "approved")

const deny = (flags: Flags) =>
  decide(flags, false, Option.getOrElse(Option.filter(Option.map(flags.reason, (r) => r.trim()), (r) => r !== ""), () => "denied with rx deny"))

const replay = (flags: Flags) =>
  local(
    flags,
    (server) => Remote.replay(server, flags.goalId, flags.json),
    withLog(dbFlag(flags.settings), "read")((db) => Effect.flatMap(loadGoal(flags.goalId, db), (events) => Remote.replayEvents(flags.goalId, events, flags.json)))
  )

const inspect = (flags: Flags) =>
  Effect.gen(function*() {
    const step = Option.isNone(flags.step) ? undefined : Number(flags.step.value.trim())
    if (step !== undefined && !(Number.isSafeInteger(step) && step >= 1)) {
      return yield* new UsageError({ message: `--step: expected a step number from 1 up, got ${JSON.stringify(Option.getOrElse(flags.step, () => ""))}` })
    }
    const events = yield* local(flags, (server) => Remote.recorded(server, flags.goalId), withLog(dbFlag(flags.settings), "read")((db) => loadGoal(flags.goalId, db)))
    const last = Render.steps(events).length
    if (step !== undefined && step > last) {
      return yield* new UsageError({ message: `goal ${flags.goalId} has no step ${step} (${last === 0 ? "it has no steps yet" : `steps 1 to ${last}`})` })
    }
    yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify(Render.inspectJson(events, step)))) : say(Render.inspect(events, step).join("\n"))
  })

/** How often `rx events --follow` checks that a runner still holds the goal. */
const watchEvery = "1 second"

const events = (flags: Flags) =>
  local(
    flags,
    (server) =>
      flags.wait
        ? new UsageError({ message: "--wait does not apply with --server: the server runs the goal, and --follow lasts until it terminates" })
        : Remote.events(server, flags.goalId, flags.follow),
    withLog(dbFlag(flags.settings), "read")((db) =>
      Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const summary = yield* store.goal(flags.goalId)
        if (Option.isNone(summary)) return yield* noGoal(flags.goalId, db)
        if (flags.wait && !flags.follow) return yield* new UsageError({ message: "--wait goes with --follow" })
        if (!flags.follow) return yield* Stream.runForEach(Stream.fromIterable(yield* store.load(flags.goalId)), sayJson)
        // Events, and a watch on the goal's runner: twice in a row no runner holds an open goal
        // (and no event came between), and it is said once; without --wait, following stops.
        let quiet = 0
        let told = false
        let orphaned = false
        const watch = Stream.repeatEffectWithSchedule(store.runner(flags.goalId), Schedule.spaced(watchEvery)).pipe(
          Stream.mapEffect((holder) =>
            Effect.gen(function*() {
              quiet = Option.isNone(holder) ? quiet + 1 : 0
              if (quiet < 2) {
                told = false
                return false
              }
              if (!told) {
                told = true
                yield* note(
                  `no rx runs goal ${flags.goalId} now (its runner stopped or was killed, or it waits to be resumed): rx resume ${flags.goalId} continues it${flags.wait ? "; waiting for a runner (Ctrl-C stops)" : "; rx events --follow --wait keeps waiting"}`
                )
              }
              orphaned = !flags.wait
              return orphaned
            })
          )
        )
        const stream = Stream.mergeEither(store.changes(flags.goalId, 0), watch).pipe(
          Stream.takeUntil((item) => (Either.isLeft(item) ? item.left._tag === "Terminated" : item.right)),
          Stream.tap((item) =>
            Either.isLeft(item)
              ? Effect.zipRight(Effect.sync(() => {
                quiet = 0
              }), sayJson(item.left))
              : Effect.void
          )
        )
        yield* Stream.runDrain(stream)
        if (orphaned) yield* setExit(ExitCode.suspended)
      })
    )
  )

const encodeSummary = Schema.encodeSync(GoalSummary.GoalSummary)

const list = (flags: Flags) =>
  local(flags, Remote.list, withLog(dbFlag(flags.settings), "read")(() =>
    Effect.gen(function*() {
      // Each summary says why an open goal waits: no log is read.
      const goals = yield* Effect.flatMap(StateStore.StateStore, (store) => store.goals())
      if (flags.json) {
        return yield* Effect.forEach(goals, (g) => Console.log(Render.jsonLine(JSON.stringify(encodeSummary(g)))), { discard: true })
      }
      yield* say(
        goals.length === 0
          ? "no goals yet (rx run \"<goal>\" starts one)"
          : [Render.listHeader, ...goals.map(Render.listLine)].join("\n")
      )
    })
  ))

const cancel = (flags: Flags) =>
  local(flags, (server) => Remote.cancel(server, flags.goalId), withLog(dbFlag(flags.settings), "write")(() =>
    Effect.gen(function*() {
      const outcome = yield* Control.cancel(flags.goalId, "cancelled with rx cancel")
      yield* say(
        outcome === "requested"
          ? `cancel requested: goal ${flags.goalId} stops within one step (a goal no process runs is cancelled when resumed)`
          : `goal ${flags.goalId} has already terminated`
      )
    })
  ))

/** A value as `rx config` shows it: the key never, nor a base URL's user and password. */
const showValue = (key: Settings.Key, value: Settings.Value) =>
  key === "apiKey"
    ? "(set)"
    : Array.isArray(value)
    ? value.join(",")
    : key === "baseUrl" || key === "server"
    ? Settings.redactUserinfo(String(value))
    : String(value)

const config = (flags: Flags) =>
  Effect.gen(function*() {
    const db = yield* Settings.database(dbFlag(flags.settings))
    const resolved = yield* Setup.resolve(flags.settings, Usage.runSettings)
    const entries = Usage.runSettings.map((key) => {
      if (key === "db") return { key, value: db.label, from: db.source === "env" ? "env RX_DB" : db.source }
      const found = resolved.found[key]
      const s: Settings.Setting = Settings.table[key]
      // A default is shown as the value it gives; a setting with none is unset.
      return found === undefined
        ? { key, value: s.shownDefault ?? null, from: s.shownDefault === undefined ? "unset" : "default" }
        : { key, value: showValue(key, found.value), from: Settings.describeSource(found.source) }
    })
    // What `auto` means on this machine: the shell in bubblewrap, or no shell offered (and why).
    const mode = resolved.values.sandbox ?? "auto"
    const here = mode !== "auto" ? undefined : yield* Effect.map(Sandbox.resolve("auto", resolved.workspace), (found) =>
      found._tag === "Bwrap"
        ? { sandbox: "bwrap", line: `sandbox auto here: bubblewrap (${found.path}), so shell runs sandboxed` }
        : { sandbox: "unavailable", line: `sandbox auto here: bubblewrap cannot be used, so shell is not offered (${found._tag === "Unavailable" ? found.reason : "no sandbox"}); --sandbox none offers it unsandboxed` })
    if (flags.json) {
      return yield* Console.log(Render.jsonLine(JSON.stringify({
        files: resolved.files.map(({ file, found }) => ({ file, found: Option.isSome(found) })),
        settings: Object.fromEntries(entries.map(({ from, key, value }) => [key, key === "sandbox" && here !== undefined ? { value, from, here: here.sandbox } : { value, from }]))
      })))
    }
    const width = Math.max(...entries.map((e) => e.key.length)) + 2
    yield* say([
      "config files, nearest first:",
      ...resolved.files.map(({ file, found }) => `  ${file}${Option.isSome(found) ? "" : " (none)"}`),
      "",
      `${"setting".padEnd(width)}${"value".padEnd(34)}from`,
      ...entries.map(({ from, key, value }) => `${key.padEnd(width)}${(value ?? "-").padEnd(33)} ${from}`),
      ...(here === undefined ? [] : ["", here.line])
    ].join("\n"))
  })

/** A whole number flag of `rx serve` within bounds, or its default. */
const count = (flag: string, value: Option.Option<string>, min: number, max: number, fallback: number) =>
  Option.match(value, {
    onNone: () => Effect.succeed(fallback),
    onSome: (text) => {
      const n = Number(text.trim())
      return /^\s*\d+\s*$/.test(text) && n >= min && n <= max
        ? Effect.succeed(n)
        : new UsageError({ message: `--${flag}: expected a whole number from ${min} to ${max}, got ${JSON.stringify(text)}` })
    }
  })

/**
 * The server's token: `RX_TOKEN`; else the one in the token file beside the database when rx
 * wrote it there for this user (`Token.reuse`), so clients and open inspector tabs keep working
 * across restarts; else (or with `--new-token`) a new random one, written by `writeToken`.
 */
const serverToken = (db: Settings.Database, renew: boolean) =>
  Effect.gen(function*() {
    const given = (process.env["RX_TOKEN"] ?? "").trim()
    if (given !== "") {
      if (renew) return yield* new UsageError({ message: "--new-token makes a token file; RX_TOKEN is set, so the server uses it and writes none" })
      return given.length < 16 ? yield* new UsageError({ message: "RX_TOKEN must be at least 16 characters long" }) : { token: given, kept: "env" as const }
    }
    const found = renew ? Option.none<string>() : yield* Token.reuse(yield* Remote.tokenFile(db))
    return Option.match(found, {
      onNone: () => ({ token: Token.generate(), kept: "new" as const }),
      onSome: (token) => ({ token, kept: "reused" as const })
    })
  })

/** Write a new token (0600, no link followed) beside the database, where a client on this machine with the user's rights finds it. */
const writeToken = (db: Settings.Database, token: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* Remote.tokenFile(db)
    // Beside a Postgres log's server the folder may not exist yet (the default log's).
    yield* fs.makeDirectory((yield* Path.Path).dirname(file), { recursive: true, mode: 0o700 }).pipe(
      Effect.mapError((error) => new UsageError({ message: `cannot write the server token to ${file}: ${error.message}` }))
    )
    yield* Token.write(file, token)
    return file
  })

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

/** Until SIGTERM (routed here) or Ctrl-C (which interrupts the command, bin.ts). */
const untilStopped = Effect.gen(function*() {
  const stop = yield* Deferred.make<void>()
  yield* onTerminate(() => Effect.runFork(Deferred.succeed(stop, undefined)))
  yield* Deferred.await(stop)
})

/** What a cluster needs of the command line: a Postgres log, and the failover time (the same everywhere). */
const clusterOf = (flags: Flags, db: Settings.Database, command: string) =>
  Effect.gen(function*() {
    if (!db.postgres) {
      return yield* new UsageError({
        message: `${command} needs the Postgres log of the cluster: --db postgres://USER:PASSWORD@HOST/DB (or RX_DB), the same for every worker and rx serve --cluster`
      })
    }
    const failover = yield* count("failover", flags.failover, 1, 3_600, 15)
    return { ...(yield* Postgres.cluster), failoverMs: failover * 1_000 }
  })

const serve = (flags: Flags) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database(dbFlag(flags.settings))
    const spec = Usage.spec("serve")
    const { values: v, workspace, mcp } = yield* Setup.resolve(flags.settings, spec?.settings ?? [])
    yield* Setup.existingWorkspace(workspace)
    const cluster = flags.cluster ? Option.some(yield* clusterOf(flags, db, "rx serve --cluster")) : Option.none()
    if (Option.isNone(cluster) && Option.isSome(flags.failover)) return yield* new UsageError({ message: "--failover applies with --cluster" })
    if (Option.isSome(cluster) && flags.mcp.length + flags.mcpEnv.length + flags.mcpSandbox.length > 0) {
      return yield* new UsageError({ message: "--mcp, --mcp-env and --mcp-sandbox do not apply with --cluster: the workers run the goals with their own tools" })
    }
    // With a cluster the workers' model runs the goals: this one is not needed.
    const model = Option.isSome(cluster) ? (v.model ?? "the workers'") : yield* Setup.modelName(v)
    const port = yield* count("port", flags.port, 0, 65_535, 7_433)
    const concurrency = yield* count("concurrency", flags.concurrency, 1, 1_000, 4)
    const host = Option.getOrElse(Option.map(flags.host, (h) => h.trim()), () => "127.0.0.1")
    const volume = yield* Option.match(cluster, {
      onNone: () => Effect.succeed(Option.none<{ readonly id: string; readonly file: string }>()),
      onSome: ({ Workspaces }) => Effect.asSome(Postgres.volume(Workspaces, workspace))
    })
    const hidden = [...Option.match(volume, { onNone: () => [], onSome: (found) => [found.file] }), ...(yield* hide(db, workspace))]
    const { workspace: _root, ...toolsConfig } = yield* Setup.toolsConfig({ ...v, workspace }, hidden)
    const { kept, token } = yield* serverToken(db, flags.newToken)
    const { workspace: _recordedRoot, ...settings } = Option.isSome(cluster) ? Setup.recordedTools(v, workspace) : Setup.recordedSettings(v, workspace, model)
    const servers = yield* Setup.mcpServers(flags, mcp)
    const launch = yield* Setup.mcpLaunch(servers, flags.mcpEnv, mcp)
    const metadata = {
      ...settings,
      ...(servers.length === 0 ? {} : { mcp: servers.map((server) => Setup.encodeServer(server)) }),
      ...Option.match(volume, { onNone: () => ({}), onSome: (found) => ({ volume: found.id }) })
    }
    const input: ServerConfig.Input = { host, allowRemote: flags.allowRemote, port, concurrency, workspace, token, metadata }
    // Checked before anything is created: a refused setting, or a port in use, leaves no database and no token file.
    yield* ServerConfig.decode(input).pipe(Effect.mapError((error) => new UsageError({ message: error.message })))
    yield* portFree(host, port)
    yield* tell(yield* Setup.toolNotes({ ...toolsConfig, workspace }, v.tools !== undefined))
    // Each workspace's tools: the built-ins, and the MCP servers' (started for that workspace, in its sandbox).
    const toolbox = servers.length === 0 ? Toolbox.layer(toolsConfig) : Toolbox.layerWith((root, serving) =>
      Layer.unwrapScoped(Effect.map(Setup.mcpTools({ servers, launch }, { ...toolsConfig, workspace: root }, v), (source) =>
        Layer.merge(
          Builtins.layerWith(Toolbox.toolsConfig(toolsConfig, root, serving), source.tools),
          Layer.succeed(Toolbox.DefaultApproval, Object.fromEntries(source.ask.map((name) => [name, "ask" as const])))
        )))
    )
    const listen = <R>(server: Layer.Layer<Server.Server, UsageError, R>) =>
      Effect.gen(function*() {
        const file = kept === "env" ? undefined : kept === "new" ? yield* writeToken(db, token) : yield* Remote.tokenFile(db)
        const context = yield* Layer.build(server)
        const where = Context.get(context, Server.Server)
        const address = where.url === `http://${where.host}:${where.port}` ? where.url : `${where.host} port ${where.port} (${where.url} from this machine)`
        yield* say([
          `rx serve: listening on ${address} (goals in ${workspace}, model ${model}, log ${db.label}${Option.isSome(cluster) ? ", run by the cluster's workers" : ""})`,
          file === undefined
            ? "  token: RX_TOKEN"
            : `  token: in ${file}, ${kept === "reused" ? "kept from the last start (--new-token makes a new one)" : "new"} (send it as Authorization: Bearer <token>)`,
          `  inspector: open ${where.url}/ in a browser (it asks for the token once)`,
          Option.isSome(cluster)
            ? "  Ctrl-C or SIGTERM stops it; the workers go on with the goals"
            : "  Ctrl-C or SIGTERM stops it; running goals stay open, recorded, and resume at the next start"
        ].join("\n"))
        yield* untilStopped
        yield* say("rx serve: stopping: the runs in flight record where they are")
      }).pipe(
        Effect.scoped,
        // Said once everything is closed (the runs stopped, the log closed), however it stopped.
        Effect.ensuring(say(`rx serve: stopped; ${Option.isSome(cluster) ? "the workers go on with the goals" : "open goals stay recorded and resume at the next start"}`))
      )
    yield* Option.match(cluster, {
      onNone: () =>
        withStore(db, "create")(listen(Server.layer(input).pipe(Layer.provide(Layer.mergeAll(Setup.modelLayer(v, model), toolbox)), Layer.mapError(Postgres.refused)))),
      // The cluster's client brings the log.
      onSome: ({ Workers, failoverMs }) =>
        listen(Server.layerDispatching(input, Workers.drive).pipe(
          Layer.provide(toolbox),
          Layer.provide(Workers.layerClient({ url: db.file, failoverMs })),
          Layer.mapError(Postgres.refused)
        ))
    })
  }))

/** A loopback address, or `--allow-remote`: the workers' socket has no authentication. */
const workerHost = (flags: Flags) => {
  const host = Option.getOrElse(Option.map(flags.host, (h) => h.trim()), () => "127.0.0.1")
  return flags.allowRemote || ServerConfig.isLoopback(host)
    ? Effect.succeed(host)
    : new UsageError({ message: `--host ${host} lets other machines reach this worker, whose socket has no authentication: pass --allow-remote to mean it, on a private network only` })
}

const worker = (flags: Flags) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database(dbFlag(flags.settings))
    const { Workers, Workspaces, failoverMs } = yield* clusterOf(flags, db, "rx worker")
    const spec = Usage.spec("worker")
    const { values: v, workspace } = yield* Setup.resolve(flags.settings, spec?.settings ?? [])
    const model = yield* Setup.modelName(v)
    if (Option.isNone(flags.port)) return yield* new UsageError({ message: "rx worker needs --port N: the port it listens on, which the other workers reach it at" })
    const port = yield* count("port", flags.port, 1, 65_535, 0)
    const concurrency = yield* count("concurrency", flags.concurrency, 1, 1_000, 4)
    const drain = yield* count("drain", flags.drain, 0, 3_600, 15)
    const host = yield* workerHost(flags)
    const volume = yield* Postgres.volume(Workspaces, workspace)
    const { workspace: _root, ...configured } = yield* Setup.toolsConfig({ ...v, workspace }, [volume.file, ...(yield* hide(db, workspace))])
    // The workers' own socket is never a goal's to fetch.
    const toolsConfig = { ...configured, httpDeny: [HttpFetch.endpoint(host, port)] }
    yield* tell(yield* Setup.toolNotes({ ...toolsConfig, workspace }, v.tools !== undefined))
    const workspaces = Layer.unwrapEffect(Effect.map(Toolbox.Toolbox, (toolbox) => Workspaces.layerShared({ root: volume.root, tools: toolbox.registry }))).pipe(
      Layer.provide(Toolbox.layer(toolsConfig))
    )
    const running = Workers.layer({ url: db.file, host, port, concurrency, failoverMs, drainMs: drain * 1_000 }).pipe(
      Layer.provide(Layer.merge(Setup.modelLayer(v, model), workspaces)),
      Layer.mapError(Postgres.refused)
    )
    yield* Layer.build(running)
    yield* say([
      `rx worker: on ${host}:${port}, goals of ${db.label}, ${concurrency} at once, model ${model}`,
      `  workspace root ${volume.root} (volume ${volume.id}); failover ${failoverMs / 1_000} s`,
      `  Ctrl-C or SIGTERM drains it: its goals have ${drain} s to end, then go on on the other workers`
    ].join("\n"))
    yield* untilStopped
  }))

const demo = (flags: Flags) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    // Removed when the demo ends (after its log is closed), unless --keep.
    const root = flags.keep ? yield* fs.makeTempDirectory({ prefix: "rx-demo-" }) : yield* fs.makeTempDirectoryScoped({ prefix: "rx-demo-" })
    const workspace = path.join(root, "workspace")
    const db = path.join(root, "rx.db")
    const human = (text: string) => (flags.json ? Effect.void : say(text))
    yield* fs.makeDirectory(workspace)
    yield* Effect.forEach(Object.entries(Demo.files), ([name, text]) => fs.writeFileString(path.join(workspace, name), text), { discard: true })
    yield* human([
      "rx demo: the model is SCRIPTED (its answers are written in advance), so this runs with no model installed.",
      "Everything else is real: the tools, the workspace, the SQLite log.",
      `  workspace ${workspace}`,
      `  database  ${db}`,
      ""
    ].join("\n"))
    const services = Layer.mergeAll(
      Builtins.layer({ workspace, sandbox: "none" }),
      LanguageModel.layerScripted(Demo.script)
    )
    const result = yield* Effect.gen(function*() {
      const outcome = yield* Runner.run({
        goal: Demo.goal,
        options: { maxIterations: 10, metadata: { workspace, sandbox: "none", model: "scripted demo model", baseUrl: "(none)" } },
        observe: printer(flags.json)
      }).pipe(Effect.provide(services))
      const log = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(outcome.goalId))
      yield* human(`\n${Render.endLine(outcome, ExitCode.of(outcome))}\n\n--- rx inspect ${outcome.goalId}\n`)
      yield* human(Render.inspect(log, undefined).join("\n"))
      const replayed = yield* Replay.verify(log)
      yield* human(`\n--- rx replay ${outcome.goalId}\nidentical: ${log.length} events reproduced with no live calls (${replayed.reason})`)
      yield* human(`\nnotes.txt now reads:\n${yield* fs.readFileString(path.join(workspace, "notes.txt"))}`)
      yield* human(
        flags.keep
          ? `Look again with: rx inspect ${outcome.goalId} --db ${db}`
          : "The demo's folder is removed now; rx demo --keep keeps it, to look again with rx inspect."
      )
      return outcome
    }).pipe(Effect.provide(SqliteStore.layer({ filename: db })))
    if (flags.keep && flags.json) yield* note(`the demo's folder is kept: ${root}`)
    yield* setExit(ExitCode.of(result))
  }))

const doctor = (flags: Flags) =>
  Effect.gen(function*() {
    const db = yield* database(dbFlag(flags.settings))
    if (db.postgres) return yield* new UsageError({ message: "rx doctor checks a SQLite log; Postgres checks its own (rx list, inspect and replay read a Postgres log)" })
    const fs = yield* FileSystem.FileSystem
    if (!(yield* fs.exists(db.file).pipe(Effect.orElseSucceed(() => true)))) {
      return yield* new UsageError({ message: `no rx database at ${db.file} (pass --db or set RX_DB)` })
    }
    const report = yield* Doctor.check(db.file)
    yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify(Schema.encodeSync(Doctor.Report)(report)))) : say(Render.doctor(report, ExitCode.unhealthy))
    yield* setExit(report.healthy ? 0 : ExitCode.unhealthy)
  })

/** Each command, by name. */
export const commands: Record<string, (flags: Flags) => Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path | ExitStatus>> = {
  run,
  resume,
  approve,
  deny,
  replay,
  inspect,
  events,
  list,
  cancel,
  doctor,
  config,
  serve,
  worker,
  demo
}
