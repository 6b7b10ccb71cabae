/**
 * The `rx` commands. Each is a thin transport: it builds Layers from its settings, calls the
 * kernel, and prints. No business logic lives here.
 */
import { Args, type CliApp, Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Builtins } from "@rx/tools"
import { OpenAiCompatible } from "@rx/llm"
import { Doctor, SqliteStore } from "@rx/store-sqlite"
import { Event, GoalSummary, LanguageModel, Options as RunOptions, Replay, Runner, StateStore } from "@rx/kernel"
import { Console, Context, Effect, Layer, Option, Redacted, Ref, Runtime, Schema, Stream } from "effect"
import * as Demo from "./Demo.js"
import * as ExitCode from "./ExitCode.js"
import { takeOver } from "./internal/interrupt.js"
import * as Render from "./Render.js"
import * as Settings from "./Settings.js"

/** The exit code the process ends with. */
export class ExitStatus extends Context.Tag("@rx/cli/ExitStatus")<ExitStatus, Ref.Ref<number>>() {}

const setExit = (code: number) => Effect.flatMap(ExitStatus, (ref) => Ref.set(ref, code))

/** A usage problem: printed as `rx: <message>`, exit 1. */
export const UsageError = Settings.UsageError
export type UsageError = Settings.UsageError

/** Print human text: control characters from the log are shown, never sent to the terminal. */
const say = (text: string) => Console.log(Render.terminal(text))

/** Print one event as a JSON line (the encoding `rx events` prints). */
const sayJson = (event: Event.Event) => Console.log(Render.jsonLine(Event.encodeJson(event)))

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
  if (error._tag === "StoreError") return error
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

/** Load a goal's log, or fail with a message naming the id. */
const loadGoal = (goalId: string) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const events = yield* store.load(goalId)
    if (events.length === 0) return yield* new UsageError({ message: `no goal with id ${goalId} in this database (rx list shows the goals)` })
    return events
  })

/** Print each committed event: a JSON line, or a human line per step. */
const printer = (json: boolean) => {
  const started = new Map<string, Event.Of<"ToolStarted">>()
  return (event: Event.Event): Effect.Effect<void> => {
    if (json) return sayJson(event)
    if (event._tag === "ToolStarted") started.set(event.callId, event)
    if (event._tag === "GoalSubmitted") return say(Render.goalLine(event, Settings.recorded(event.options.metadata)))
    const line = Render.stepLine(event, started)
    return line === undefined ? Effect.void : say(line)
  }
}

/** Run a goal (new or resumed) with Ctrl-C turned into a recorded cancel; then print and set the exit code. */
const runWithCancel = <E>(
  start: (observe: Runner.Observer) => Effect.Effect<Runner.Result, E, StateStore.StateStore>,
  json: boolean
) =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<StateStore.StateStore>()
    let goalId: string | undefined
    let presses = 0
    yield* takeOver(() => {
      presses++
      if (presses > 1 || goalId === undefined) process.exit(ExitCode.interrupted)
      process.stderr.write(`\ncancelling goal ${goalId}; press Ctrl-C again to stop at once\n`)
      Runtime.runFork(runtime)(Effect.ignore(Runner.cancel(goalId, "cancelled by Ctrl-C")))
    })
    const print = printer(json)
    const result = yield* start((event) => {
      goalId = event.goalId
      return print(event)
    })
    const code = ExitCode.of(result)
    if (!json) yield* say(Render.endLine(result, code))
    yield* setExit(code)
  }))

/**
 * The log's files (the database and its `-wal`, `-shm` and `-journal` siblings) when the log
 * lies inside the workspace, as the tools' `hiddenPaths`: every file tool refuses them and the
 * sandbox hides them, so the agent can neither read nor rewrite its own record. Compared by
 * real paths, so a symlinked workspace or folder does not hide the overlap.
 */
const hide = (db: Settings.Database, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const real = (p: string) => fs.realPath(p).pipe(Effect.orElseSucceed(() => path.resolve(p)))
    const root = yield* real(workspace)
    const file = path.join(yield* real(path.dirname(db.file)), path.basename(db.file))
    const relative = path.relative(root, file)
    const inside = relative !== "" && relative.split(path.sep)[0] !== ".." && !path.isAbsolute(relative)
    return inside ? { hiddenPaths: ["", "-wal", "-shm", "-journal"].map((suffix) => `${file}${suffix}`) } : {}
  })

/** The model Layer for these settings. */
const modelLayer = (s: { readonly baseUrl: string; readonly model: string; readonly mode: "tools" | "json"; readonly apiKey: Option.Option<Redacted.Redacted> }) =>
  OpenAiCompatible.layerNode({
    baseUrl: s.baseUrl,
    model: s.model,
    mode: s.mode,
    ...(Option.isSome(s.apiKey) ? { apiKey: s.apiKey.value } : {})
  })

/**
 * The settings of a run, flags first, then what the goal recorded, then the defaults; and the
 * Layers they give (the built-in tools and the model).
 */
const prepare = (
  flags: {
    readonly workspace: Option.Option<string>
    readonly sandbox: Option.Option<"auto" | "bwrap" | "none">
    readonly baseUrl: Option.Option<string>
    readonly model: Option.Option<string>
    readonly mode: Option.Option<"tools" | "json">
    readonly apiKey: Option.Option<Redacted.Redacted>
  },
  recorded: Settings.Recorded,
  db: Settings.Database
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const model = Option.orElse(flags.model, () => Option.fromNullable(recorded.model))
    if (Option.isNone(model)) {
      return yield* new UsageError({ message: "which model? pass --model (or set RX_MODEL), e.g. --model qwen2.5-coder:7b for Ollama" })
    }
    const settings = {
      workspace: path.resolve(Option.getOrElse(flags.workspace, () => recorded.workspace ?? ".")),
      sandbox: Option.getOrElse(flags.sandbox, () => recorded.sandbox ?? "auto"),
      baseUrl: Option.getOrElse(flags.baseUrl, () => recorded.baseUrl ?? Settings.defaultBaseUrl),
      model: model.value,
      mode: Option.getOrElse(flags.mode, () => recorded.mode ?? "tools")
    }
    const services = Layer.mergeAll(
      Builtins.layer({ workspace: settings.workspace, sandbox: settings.sandbox, ...(yield* hide(db, settings.workspace)) }),
      modelLayer({ ...settings, apiKey: flags.apiKey })
    )
    return { services, settings }
  })

const common = {
  db: Settings.db,
  workspace: Settings.workspace,
  baseUrl: Settings.baseUrl,
  model: Settings.model,
  apiKey: Settings.apiKey,
  sandbox: Settings.sandbox,
  mode: Settings.mode,
  json: Settings.json
}

const run = Command.make(
  "run",
  { ...common, maxIterations: Settings.maxIterations, goal: Args.text({ name: "goal" }).pipe(Args.withDescription("what to achieve")) },
  (flags) =>
    Effect.gen(function*() {
      // Settings first: a run refused for its flags creates no database.
      const db = yield* database(flags.db)
      const { services, settings } = yield* prepare(flags, {}, db)
      const options = {
        ...(Option.isSome(flags.maxIterations) ? { maxIterations: flags.maxIterations.value } : {}),
        metadata: settings
      }
      yield* withStore(db, "create")(
        runWithCancel((observe) => Runner.run({ goal: flags.goal, options, observe }).pipe(Effect.provide(services)), flags.json)
      )
    })
).pipe(Command.withDescription("run a goal until it terminates"))

const goalId = Args.text({ name: "goal-id" })

/** Whether a resume's settings differ from what the goal recorded. */
const differs = (recorded: Settings.Recorded, settings: Settings.Recorded) =>
  (["workspace", "sandbox", "baseUrl", "model", "mode"] as const).some((key) => recorded[key] !== settings[key])

const resume = Command.make("resume", { ...common, goalId }, (flags) =>
  withLog(flags.db, "write")((db) =>
    Effect.gen(function*() {
      const state = yield* Runner.restore(flags.goalId)
      if (state.seq === 0) return yield* new UsageError({ message: `no goal with id ${flags.goalId} in this database (rx list shows the goals)` })
      const recorded = Settings.recorded(state.options.metadata)
      const { services, settings } = yield* prepare(flags, recorded, db)
      // Other settings than recorded: record the ones this resume uses before it runs, so the log
      // (and rx inspect) says what each resume ran with.
      if (state.terminated === null && differs(recorded, settings)) {
        const before = state.options
        const changed = yield* Runner.changeOptions(flags.goalId, (current): RunOptions.Input => ({
          ...current,
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
      yield* runWithCancel((observe) => Runner.resume(flags.goalId, { observe }).pipe(Effect.provide(services)), flags.json)
    })
  )
).pipe(Command.withDescription("continue an unfinished goal with its recorded settings (flags override model, server, workspace, sandbox, mode; the change is recorded)"))

const replay = Command.make("replay", { db: Settings.db, goalId }, (flags) =>
  withLog(flags.db, "read")(() =>
    Effect.gen(function*() {
      const events = yield* loadGoal(flags.goalId)
      const outcome = yield* Effect.either(Replay.check(events))
      if (outcome._tag === "Right") {
        const verified = outcome.right
        yield* say(
          verified._tag === "Complete"
            ? `replay of goal ${flags.goalId}: identical, ${events.length} events, no live calls (${verified.result.reason})`
            : `replay of goal ${flags.goalId}: the goal is still open, so its log is incomplete; its ${events.length} events verify, no live calls`
        )
        return yield* setExit(0)
      }
      const error = outcome.left
      yield* say(Render.cap(error._tag === "NonDeterminism" ? error.message : `replay of goal ${flags.goalId} failed: ${error.message}`, 8_000))
      yield* setExit(ExitCode.diverged)
    })
  )
).pipe(Command.withDescription("verify a goal's log by replaying it with no live calls (an open goal's log as far as it goes); exit 8 names the first divergence"))

const inspect = Command.make(
  "inspect",
  { db: Settings.db, goalId, step: Options.integer("step").pipe(Options.withDescription("show one step in full"), Options.optional) },
  (flags) =>
    withLog(flags.db, "read")(() =>
      Effect.gen(function*() {
        const events = yield* loadGoal(flags.goalId)
        yield* say(Render.inspect(events, Option.getOrUndefined(flags.step)).join("\n"))
      })
    )
).pipe(Command.withDescription("the goal, each step, the tool trace and the termination audit"))

const events = Command.make(
  "events",
  { db: Settings.db, goalId, follow: Options.boolean("follow").pipe(Options.withDescription("keep printing events as they are appended, until the goal terminates")) },
  (flags) =>
    withLog(flags.db, "read")(() =>
      Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const summary = yield* store.goal(flags.goalId)
        if (Option.isNone(summary)) return yield* new UsageError({ message: `no goal with id ${flags.goalId} in this database (rx list shows the goals)` })
        const stream = flags.follow
          ? store.changes(flags.goalId, 0).pipe(Stream.takeUntil((e) => e._tag === "Terminated"))
          : Stream.fromIterable(yield* store.load(flags.goalId))
        yield* Stream.runForEach(stream, sayJson)
      })
    )
).pipe(Command.withDescription("print a goal's events as JSON lines"))

const encodeSummary = Schema.encodeSync(GoalSummary.GoalSummary)

const list = Command.make("list", { db: Settings.db, json: Settings.json }, (flags) =>
  withLog(flags.db, "read")(() =>
    Effect.gen(function*() {
      const goals = yield* Effect.flatMap(StateStore.StateStore, (store) => store.goals())
      if (flags.json) return yield* Effect.forEach(goals, (g) => Console.log(Render.jsonLine(JSON.stringify(encodeSummary(g)))), { discard: true })
      yield* say(goals.length === 0 ? "no goals yet (rx run \"<goal>\" starts one)" : [Render.listHeader, ...goals.map(Render.listLine)].join("\n"))
    })
  )
).pipe(Command.withDescription("the goals in the database, newest first"))

const cancel = Command.make("cancel", { db: Settings.db, goalId }, (flags) =>
  withLog(flags.db, "write")(() =>
    Effect.gen(function*() {
      const outcome = yield* Runner.cancel(flags.goalId, "cancelled with rx cancel")
      yield* say(
        outcome === "requested"
          ? `cancel requested: goal ${flags.goalId} stops within one step (a goal no process runs is cancelled when resumed)`
          : `goal ${flags.goalId} has already terminated`
      )
    })
  )
).pipe(Command.withDescription("ask a running goal to stop; recorded as CancelRequested"))

const demo = Command.make("demo", { json: Settings.json }, (flags) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = yield* fs.makeTempDirectory({ prefix: "rx-demo-" })
    const workspace = path.join(root, "workspace")
    const db = path.join(root, "rx.db")
    yield* fs.makeDirectory(workspace)
    yield* Effect.forEach(Object.entries(Demo.files), ([name, text]) => fs.writeFileString(path.join(workspace, name), text), { discard: true })
    yield* say([
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
      const print = printer(flags.json)
      const outcome = yield* Runner.run({
        goal: Demo.goal,
        options: { maxIterations: 10, metadata: { workspace, sandbox: "none", model: "scripted demo model", baseUrl: "(none)" } },
        observe: print
      }).pipe(Effect.provide(services))
      const log = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(outcome.goalId))
      yield* say(`\n${Render.endLine(outcome, ExitCode.of(outcome))}\n\n--- rx inspect ${outcome.goalId}\n`)
      yield* say(Render.inspect(log, undefined).join("\n"))
      const replayed = yield* Replay.verify(log)
      yield* say(`\n--- rx replay ${outcome.goalId}\nidentical: ${log.length} events reproduced with no live calls (${replayed.reason})`)
      yield* say(`\nnotes.txt now reads:\n${yield* fs.readFileString(path.join(workspace, "notes.txt"))}`)
      yield* say(`Look again with: rx inspect ${outcome.goalId} --db ${db}`)
      return outcome
    }).pipe(Effect.provide(SqliteStore.layer({ filename: db })))
    yield* setExit(ExitCode.of(result))
  })
).pipe(Command.withDescription("a complete goal with a scripted model, real tools and a real SQLite log, then inspect and replay"))

const doctor = Command.make("doctor", { db: Settings.db, json: Settings.json }, (flags) =>
  Effect.gen(function*() {
    const db = yield* database(flags.db)
    const fs = yield* FileSystem.FileSystem
    if (!(yield* fs.exists(db.file).pipe(Effect.orElseSucceed(() => true)))) {
      return yield* new UsageError({ message: `no rx database at ${db.file} (pass --db or set RX_DB)` })
    }
    const report = yield* Doctor.check(db.file)
    yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify(Schema.encodeSync(Doctor.Report)(report)))) : say(Render.doctor(report, ExitCode.unhealthy))
    yield* setExit(report.healthy ? 0 : ExitCode.unhealthy)
  })
).pipe(Command.withDescription(`check the database (read-only): SQLite's integrity check, every goal's log (seqs, Terminated, events that do not decode), the goal summaries, stale leases; exit ${ExitCode.unhealthy} on problems`))

const rx = Command.make("rx").pipe(
  Command.withDescription(
    `an autonomous agent kernel: goals in, a recorded log of every step out.\n\nthe log: --db, else RX_DB, else ${Settings.defaultDbText} (per user, outside the agent's workspace; a log placed inside the workspace is hidden from the tools)\n\nexit codes:\n${ExitCode.table}`
  ),
  Command.withSubcommands([run, resume, replay, inspect, events, list, cancel, doctor, demo])
)

/** The `rx` program for the given `process.argv`. */
export const cli: (args: ReadonlyArray<string>) => Effect.Effect<void, unknown, CliApp.CliApp.Environment | ExitStatus> =
  Command.run(rx, { name: "rx", version: "0.1.0" })
