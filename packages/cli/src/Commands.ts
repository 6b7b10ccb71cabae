/**
 * The `rx` commands. Each is a thin transport: it builds Layers from its settings, calls the
 * kernel, and prints. No business logic lives here.
 */
import { Args, type CliApp, Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Builtins } from "@rx/tools"
import { OpenAiCompatible } from "@rx/llm"
import { SqliteStore } from "@rx/store-sqlite"
import { Event, GoalSummary, LanguageModel, Replay, Runner, StateStore } from "@rx/kernel"
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
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** The SQLite log at `db`, creating its folder if needed. */
const storeLayer = (db: string) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const file = path.resolve(db)
      yield* fs.makeDirectory(path.dirname(file), { recursive: true }).pipe(
        Effect.mapError((error) => new UsageError({ message: `cannot create the folder of the database ${file}: ${error.message}` }))
      )
      return SqliteStore.layer({ filename: file })
    })
  )

/** An existing log, opened read-only: commands that only read never create a database. */
const readStoreLayer = (db: string) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const file = path.resolve(db)
      const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false))
      if (!exists) return yield* new UsageError({ message: `no rx database at ${file} (rx run creates one; pass --db or set RX_DB)` })
      return SqliteStore.layer({ filename: file, readonly: true })
    })
  )

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
    if (json) return Console.log(Event.encodeJson(event))
    if (event._tag === "ToolStarted") started.set(event.callId, event)
    if (event._tag === "GoalSubmitted") {
      const m = Settings.recorded(event.options.metadata)
      return Console.log(`goal ${event.goalId}: ${event.goal}\n  model ${m.model ?? "?"} at ${m.baseUrl ?? "?"}, workspace ${m.workspace ?? "?"}, sandbox ${m.sandbox ?? "auto"}`)
    }
    const line = Render.stepLine(event, started)
    return line === undefined ? Effect.void : Console.log(line)
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
    const code = ExitCode.byReason[result.reason]
    if (!json) yield* Console.log(Render.endLine(result, code))
    yield* setExit(code)
  }))

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
  recorded: Settings.Recorded
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
      Builtins.layer({ workspace: settings.workspace, sandbox: settings.sandbox }),
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
      const { services, settings } = yield* prepare(flags, {})
      const options = {
        ...(Option.isSome(flags.maxIterations) ? { maxIterations: flags.maxIterations.value } : {}),
        metadata: settings
      }
      yield* runWithCancel((observe) => Runner.run({ goal: flags.goal, options, observe }).pipe(Effect.provide(services)), flags.json)
    }).pipe(Effect.provide(storeLayer(flags.db)))
).pipe(Command.withDescription("run a goal until it terminates"))

const goalId = Args.text({ name: "goal-id" })

const resume = Command.make("resume", { ...common, goalId }, (flags) =>
  Effect.gen(function*() {
    const state = yield* Runner.restore(flags.goalId)
    if (state.seq === 0) return yield* new UsageError({ message: `no goal with id ${flags.goalId} in this database (rx list shows the goals)` })
    const { services } = yield* prepare(flags, Settings.recorded(state.options.metadata))
    yield* runWithCancel((observe) => Runner.resume(flags.goalId, { observe }).pipe(Effect.provide(services)), flags.json)
  }).pipe(Effect.provide(storeLayer(flags.db)))
).pipe(Command.withDescription("continue an unfinished goal with its recorded settings (flags override model, server, workspace, sandbox)"))

const replay = Command.make("replay", { db: Settings.db, goalId }, (flags) =>
  Effect.gen(function*() {
    const events = yield* loadGoal(flags.goalId)
    const outcome = yield* Effect.either(Replay.verify(events))
    if (outcome._tag === "Right") {
      yield* Console.log(`replay of goal ${flags.goalId}: identical, ${events.length} events, no live calls (${outcome.right.reason})`)
      return yield* setExit(0)
    }
    const error = outcome.left
    yield* Console.log(error._tag === "NonDeterminism" ? error.message : `replay of goal ${flags.goalId} failed: ${error.message}`)
    yield* setExit(ExitCode.diverged)
  }).pipe(Effect.provide(readStoreLayer(flags.db)))
).pipe(Command.withDescription("verify a goal's log by replaying it with no live calls; exit 8 names the first divergence"))

const inspect = Command.make(
  "inspect",
  { db: Settings.db, goalId, step: Options.integer("step").pipe(Options.withDescription("show one step in full"), Options.optional) },
  (flags) =>
    Effect.gen(function*() {
      const events = yield* loadGoal(flags.goalId)
      yield* Console.log(Render.inspect(events, Option.getOrUndefined(flags.step)).join("\n"))
    }).pipe(Effect.provide(readStoreLayer(flags.db)))
).pipe(Command.withDescription("the goal, each step, the tool trace and the termination audit"))

const events = Command.make(
  "events",
  { db: Settings.db, goalId, follow: Options.boolean("follow").pipe(Options.withDescription("keep printing events as they are appended, until the goal terminates")) },
  (flags) =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const summary = yield* store.goal(flags.goalId)
      if (Option.isNone(summary)) return yield* new UsageError({ message: `no goal with id ${flags.goalId} in this database (rx list shows the goals)` })
      const stream = flags.follow
        ? store.changes(flags.goalId, 0).pipe(Stream.takeUntil((e) => e._tag === "Terminated"))
        : Stream.fromIterable(yield* store.load(flags.goalId))
      yield* Stream.runForEach(stream, (event) => Console.log(Event.encodeJson(event)))
    }).pipe(Effect.provide(readStoreLayer(flags.db)))
).pipe(Command.withDescription("print a goal's events as JSON lines"))

const encodeSummary = Schema.encodeSync(GoalSummary.GoalSummary)

const list = Command.make("list", { db: Settings.db, json: Settings.json }, (flags) =>
  Effect.gen(function*() {
    const goals = yield* Effect.flatMap(StateStore.StateStore, (store) => store.goals())
    if (flags.json) return yield* Effect.forEach(goals, (g) => Console.log(JSON.stringify(encodeSummary(g))), { discard: true })
    yield* Console.log(goals.length === 0 ? "no goals yet (rx run \"<goal>\" starts one)" : [Render.listHeader, ...goals.map(Render.listLine)].join("\n"))
  }).pipe(Effect.provide(readStoreLayer(flags.db)))
).pipe(Command.withDescription("the goals in the database, newest first"))

const cancel = Command.make("cancel", { db: Settings.db, goalId }, (flags) =>
  Effect.gen(function*() {
    const outcome = yield* Runner.cancel(flags.goalId, "cancelled with rx cancel")
    yield* Console.log(
      outcome === "requested"
        ? `cancel requested: goal ${flags.goalId} stops within one step (a goal no process runs is cancelled when resumed)`
        : `goal ${flags.goalId} has already terminated`
    )
  }).pipe(Effect.provide(storeLayer(flags.db)))
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
    yield* Console.log([
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
      yield* Console.log(`\n${Render.endLine(outcome, ExitCode.byReason[outcome.reason])}\n\n--- rx inspect ${outcome.goalId}\n`)
      yield* Console.log(Render.inspect(log, undefined).join("\n"))
      const replayed = yield* Replay.verify(log)
      yield* Console.log(`\n--- rx replay ${outcome.goalId}\nidentical: ${log.length} events reproduced with no live calls (${replayed.reason})`)
      yield* Console.log(`\nnotes.txt now reads:\n${yield* fs.readFileString(path.join(workspace, "notes.txt"))}`)
      yield* Console.log(`Look again with: rx inspect ${outcome.goalId} --db ${db}`)
      return outcome
    }).pipe(Effect.provide(storeLayer(db)))
    yield* setExit(ExitCode.byReason[result.reason])
  })
).pipe(Command.withDescription("a complete goal with a scripted model, real tools and a real SQLite log, then inspect and replay"))

const rx = Command.make("rx").pipe(
  Command.withDescription(`an autonomous agent kernel: goals in, a recorded log of every step out.\n\nexit codes:\n${ExitCode.table}`),
  Command.withSubcommands([run, resume, replay, inspect, events, list, cancel, demo])
)

/** The `rx` program for the given `process.argv`. */
export const cli: (args: ReadonlyArray<string>) => Effect.Effect<void, unknown, CliApp.CliApp.Environment | ExitStatus> =
  Command.run(rx, { name: "rx", version: "0.1.0" })
