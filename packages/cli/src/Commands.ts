/**
 * The `rx` commands. Each is a thin transport: it builds Layers from its settings, calls the
 * kernel, and prints. No business logic lives here.
 */
import { Args, type CliApp, Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Builtins } from "@rx/tools"
import { OpenAiCompatible, Retry } from "@rx/llm"
import { Doctor, SqliteStore } from "@rx/store-sqlite"
import { Event, GoalSummary, LanguageModel, Options as RunOptions, Replay, Runner, StateStore } from "@rx/kernel"
import { Cause, Console, Context, Effect, Exit, Fiber, Layer, Option, Redacted, Ref, Runtime, Schema, Stream } from "effect"
import * as Approval from "./Approval.js"
import * as Demo from "./Demo.js"
import * as ExitCode from "./ExitCode.js"
import { onTerminate, takeOver } from "./internal/interrupt.js"
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

/**
 * Print each committed event: a JSON line, or a human line per step. `options` are the goal's
 * options before the first event printed (a resume), to say what a later change changed.
 */
const printer = (json: boolean, options?: RunOptions.Options) => {
  const started = new Map<string, Event.Of<"ToolStarted">>()
  let current = options
  return (event: Event.Event): Effect.Effect<void> => {
    if (json) return sayJson(event)
    if (event._tag === "ToolStarted") started.set(event.callId, event)
    if (event._tag === "GoalSubmitted") {
      current = event.options
      return say(Render.goalLine(event, Settings.recorded(event.options.metadata)))
    }
    if (event._tag === "OptionsChanged") {
      const before = current
      current = event.options
      return say(`      options changed (seq ${event.seq})${before === undefined ? "" : `: ${Render.optionsDiff(before, event.options)}`}`)
    }
    const line = Render.stepLine(event, started)
    return line === undefined ? Effect.void : say(line)
  }
}

/** What a goal's run is given: the hooks the kernel calls. */
interface RunHooks {
  readonly observe: Runner.Observer
  readonly approve: Runner.Approver | undefined
}

/** The result of a goal whose runner was stopped from outside (SIGTERM), as its log says. */
const stopped = (goalId: string) =>
  Effect.map(Runner.restore(goalId), (state): Runner.Result => {
    const base = { goalId, iterations: state.completed, state }
    if (state.terminated !== null) return { ...base, status: "terminated", ...state.terminated }
    return { ...base, status: "suspended", ...(state.suspended ?? { reason: "shutdown", detail: "rx was stopped before the goal ended" }) }
  })

/**
 * Run a goal (new or resumed), then print how it ended and set the exit code. Ctrl-C becomes a
 * recorded cancel; SIGTERM interrupts the runner, which records the call in flight and
 * `Suspended(shutdown)` (exit 11). With a person at the terminal (and not `--json`), a call that
 * needs approval is asked about in place; otherwise the goal suspends, and the way to decide it
 * is printed.
 */
const runGoal = <E>(
  start: (hooks: RunHooks) => Effect.Effect<Runner.Result, E, StateStore.StateStore>,
  how: { readonly json: boolean; readonly db: Settings.Database; readonly goalId?: string; readonly options?: RunOptions.Options }
) =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<StateStore.StateStore>()
    const store = yield* StateStore.StateStore
    let goalId = how.goalId
    let presses = 0
    yield* takeOver(() => {
      presses++
      if (presses > 1 || goalId === undefined) process.exit(ExitCode.interrupted)
      process.stderr.write(`\ncancelling goal ${goalId}; press Ctrl-C again to stop at once\n`)
      Runtime.runFork(runtime)(Effect.ignore(Runner.cancel(goalId, "cancelled by Ctrl-C")))
    })
    const print = printer(how.json, how.options)
    const observe = (event: Event.Event) => {
      goalId = event.goalId
      return print(event)
    }
    // "always" at the terminal: the tool runs without asking from now on, recorded as an options change.
    const always = (tool: string) =>
      goalId === undefined ? Effect.void : Runner.changeOptions(goalId, (current): RunOptions.Input => ({
        ...current,
        approval: { ...current.approval, [tool]: "auto" }
      })).pipe(
        Effect.provideService(StateStore.StateStore, store),
        Effect.catchAll((error) => Console.error(Render.terminal(`rx: could not record that ${tool} is always allowed (${error.message}); this call is approved`))),
        Effect.asVoid
      )
    const approve = !how.json && Approval.interactive() ? Approval.approver(Approval.stdio, always) : undefined
    const fiber = yield* Effect.fork(start({ observe, approve }))
    let stopping = false
    yield* onTerminate(() => {
      if (stopping) return
      stopping = true
      process.stderr.write(`\nrx: stopping (SIGTERM): the call in flight is recorded and the goal stays open for rx resume\n`)
      Runtime.runFork(runtime)(Fiber.interrupt(fiber))
    })
    const exit = yield* Fiber.await(fiber)
    const result = Exit.isSuccess(exit)
      ? exit.value
      : stopping && goalId !== undefined && Cause.isInterruptedOnly(exit.cause)
      ? yield* stopped(goalId)
      : yield* exit
    const code = ExitCode.of(result)
    const next = Render.nextSteps(result, how.db.source === "flag" ? how.db.file : undefined)
    if (!how.json) yield* say(Render.endLine(result, code))
    if (next !== undefined) yield* how.json ? Console.error(Render.terminal(next)) : say(next)
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

/** The model Layer for these settings; `retries` are attempts after the first. */
const modelLayer = (s: {
  readonly baseUrl: string
  readonly model: string
  readonly mode: "tools" | "json"
  readonly apiKey: Option.Option<Redacted.Redacted>
  readonly retries: Option.Option<number>
}) =>
  OpenAiCompatible.layerNode({
    baseUrl: s.baseUrl,
    model: s.model,
    mode: s.mode,
    ...(Option.isSome(s.apiKey) ? { apiKey: s.apiKey.value } : {}),
    ...(Option.isSome(s.retries) ? { retry: { ...Retry.defaultPolicy, maxAttempts: s.retries.value + 1 } } : {})
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
    readonly retries: Option.Option<number>
  },
  recorded: Settings.Recorded,
  db: Settings.Database
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const retries = yield* Settings.within("--retries", flags.retries, 0, 99)
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
      modelLayer({ ...settings, apiKey: flags.apiKey, retries })
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
  retries: Settings.retries,
  json: Settings.json
}

/** The names of the tools a run offers the model (the built-ins). */
const toolNames: ReadonlyArray<string> = Builtins.tools.map((tool) => tool.spec.name)

/** Instruction files larger than this are refused: they would only be cut in every prompt. */
const maxInstructionBytes = 256 * 1024

/** Read one instructions file as text, or fail with one line saying why. */
const readText = (file: string, what: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const why = (error: { readonly _tag: string; readonly reason?: string; readonly message: string }) =>
      new UsageError({
        message: `cannot read ${what} ${file}: ${error._tag === "SystemError" && error.reason === "NotFound" ? "no such file" : error._tag === "SystemError" && error.reason === "PermissionDenied" ? "permission denied" : error.message}`
      })
    const info = yield* fs.stat(file).pipe(Effect.mapError(why))
    if (info.type !== "File") return yield* new UsageError({ message: `cannot read ${what} ${file}: not a regular file` })
    if (Number(info.size) > maxInstructionBytes) {
      return yield* new UsageError({ message: `${what} ${file} is ${info.size} bytes; instructions may be at most ${maxInstructionBytes} bytes` })
    }
    const text = yield* fs.readFileString(file).pipe(Effect.mapError(why))
    if (text.includes("\u0000")) return yield* new UsageError({ message: `cannot read ${what} ${file}: not a text file` })
    return text
  })

/**
 * The run's instructions: AGENTS.md at the workspace root when `--agents-md` asks for it (a note
 * when there is none), then the `--instructions` file. Nothing is read unless asked.
 */
const readInstructions = (file: Option.Option<string>, agentsMd: boolean, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const parts: Array<string> = []
    if (agentsMd) {
      const agents = path.join(workspace, "AGENTS.md")
      if (yield* fs.exists(agents).pipe(Effect.orElseSucceed(() => false))) parts.push(yield* readText(agents, "AGENTS.md"))
      else yield* Console.error(Render.terminal(`rx: note: --agents-md: there is no AGENTS.md at the workspace root (${agents}); running without it`))
    }
    if (Option.isSome(file)) parts.push(yield* readText(path.resolve(file.value), "the --instructions file"))
    const text = parts.map((part) => part.trim()).filter((part) => part !== "").join("\n\n")
    const shown = Math.floor(RunOptions.defaults.promptBudget / 4)
    if (text.length > shown) {
      yield* Console.error(`rx: note: the instructions are ${text.length} characters; each prompt shows the first ${shown}`)
    }
    return text
  })

const run = Command.make(
  "run",
  {
    ...common,
    maxIterations: Settings.maxIterations,
    maxCallsPerAnswer: Settings.maxCallsPerAnswer,
    ask: Settings.ask,
    deny: Settings.deny,
    instructions: Settings.instructions,
    agentsMd: Settings.agentsMd,
    goal: Args.text({ name: "goal" }).pipe(Args.withDescription("what to achieve"))
  },
  (flags) =>
    Effect.gen(function*() {
      // Settings first: a run refused for its flags creates no database and records nothing.
      const db = yield* database(flags.db)
      const maxIterations = yield* Settings.within("--max-iterations", flags.maxIterations, 1)
      const maxCallsPerAnswer = yield* Settings.within("--max-calls-per-answer", flags.maxCallsPerAnswer, 1)
      const approval = yield* Settings.approval(flags.ask, flags.deny, toolNames)
      const { services, settings } = yield* prepare(flags, {}, db)
      const instructions = yield* readInstructions(flags.instructions, flags.agentsMd, settings.workspace)
      const options: RunOptions.Input = {
        ...(Option.isSome(maxIterations) ? { maxIterations: maxIterations.value } : {}),
        ...(Option.isSome(maxCallsPerAnswer) ? { maxCallsPerAnswer: maxCallsPerAnswer.value } : {}),
        ...(Object.keys(approval).length === 0 ? {} : { approval }),
        metadata: settings
      }
      yield* withStore(db, "create")(
        runGoal(({ approve, observe }) =>
          Runner.submit({ goal: flags.goal, options, observe, ...(instructions === "" ? {} : { instructions }) }).pipe(
            Effect.flatMap((goalId) => Runner.resume(goalId, { observe, approve })),
            Effect.provide(services)
          ), { json: flags.json, db })
      )
    })
).pipe(Command.withDescription(
  "run a goal until it terminates or must wait (exit 11: suspended, open; rx resume continues it). --ask shell,write_file: those calls wait for approval (asked in place at a terminal: y, n, or a = always for that tool; otherwise the goal suspends: rx approve / rx deny, then rx resume); --deny: never allowed. Ctrl-C cancels the goal (recorded); SIGTERM stops it gracefully, open (the call in flight recorded, then Suspended(shutdown), exit 11)"
))

const goalId = Args.text({ name: "goal-id" })

/** Whether a resume's settings differ from what the goal recorded. */
const differs = (recorded: Settings.Recorded, settings: Settings.Recorded) =>
  (["workspace", "sandbox", "baseUrl", "model", "mode"] as const).some((key) => recorded[key] !== settings[key])

const resume = Command.make("resume", { ...common, maxIterations: Settings.maxIterations, goalId }, (flags) =>
  withLog(flags.db, "write")((db) =>
    Effect.gen(function*() {
      const state = yield* Runner.restore(flags.goalId)
      if (state.seq === 0) return yield* new UsageError({ message: `no goal with id ${flags.goalId} in this database (rx list shows the goals)` })
      const limit = Option.getOrUndefined(yield* Settings.within("--max-iterations", flags.maxIterations, 1))
      // A terminated goal's log is closed (one Terminated, last): no limit reopens it.
      if (state.terminated !== null && limit !== undefined) {
        return yield* new UsageError({
          message: state.terminated.reason === "max_iterations"
            ? `goal ${flags.goalId} ended at its iteration limit (max_iterations, ${state.completed} iterations) and a terminated goal's log is closed, so --max-iterations cannot extend it: start a new goal with rx run`
            : `goal ${flags.goalId} has terminated (${state.terminated.reason}) and a terminated goal's log is closed, so --max-iterations cannot change it: start a new goal with rx run`
        })
      }
      if (limit !== undefined && limit <= state.completed) {
        return yield* new UsageError({
          message: `goal ${flags.goalId} has completed ${state.completed} iterations already; --max-iterations must be more than that (rx cancel ${flags.goalId} stops it)`
        })
      }
      const recorded = Settings.recorded(state.options.metadata)
      const { services, settings } = yield* prepare(flags, recorded, db)
      // Other settings or limit than recorded: record what this resume uses before it runs, so the
      // log (and rx inspect) says what each resume ran with.
      const raised = limit !== undefined && limit !== state.options.maxIterations
      if (state.terminated === null && (differs(recorded, settings) || raised)) {
        const before = state.options
        const changed = yield* Runner.changeOptions(flags.goalId, (current): RunOptions.Input => ({
          ...current,
          ...(limit === undefined ? {} : { maxIterations: limit }),
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
      const options = (yield* Runner.restore(flags.goalId)).options
      yield* runGoal(
        ({ approve, observe }) => Runner.resume(flags.goalId, { observe, approve }).pipe(Effect.provide(services)),
        { json: flags.json, db, goalId: flags.goalId, options }
      )
    })
  )
).pipe(Command.withDescription(
  "continue an open goal (suspended, or stopped by a crash) with its recorded settings; flags override model, server, workspace, sandbox, mode, and --max-iterations changes the limit of an open goal (each change is recorded; a terminated goal's log is closed: start a new goal). An approved call runs as stored, with no new model call"
))

/**
 * Record a decision on the call a goal waits on (`rx approve`, `rx deny`). It runs nothing: the
 * goal goes on at `rx resume`.
 */
const decide = (
  flags: { readonly db: Option.Option<string>; readonly goalId: string; readonly call: Option.Option<string>; readonly by: Option.Option<string> },
  approved: boolean,
  reason: string
) =>
  withLog(flags.db, "write")((db) =>
    Effect.gen(function*() {
      const id = flags.goalId
      const by = Option.isSome(flags.by) ? flags.by.value.trim() : yield* Settings.userName
      if (by === "") return yield* new UsageError({ message: "--by needs a name" })
      const callId = Option.getOrUndefined(flags.call)
      const outcome = yield* (approved ? Runner.approve(id, by, callId) : Runner.deny(id, by, reason, callId)).pipe(
        Effect.catchTags({
          "@rx/kernel/GoalNotFound": () => new UsageError({ message: `no goal with id ${id} in this database (rx list shows the goals)` }),
          "@rx/kernel/NothingToDecide": (error) => new UsageError({ message: `${error.message} (rx inspect ${id} shows its approvals)` })
        })
      )
      const state = yield* Runner.restore(id)
      if (outcome === "already_terminated") {
        return yield* new UsageError({ message: `goal ${id} has terminated (${state.terminated?.reason ?? "?"}); there is nothing to decide` })
      }
      const flag = db.source === "flag" ? ` --db ${Render.shellWord(db.file)}` : ""
      const awaited = state.awaiting
      const what = awaited === null ? "" : ` (${awaited.tool} ${JSON.stringify(awaited.input) ?? "null"})`
      yield* say(Render.cap(
        `${approved ? "approved" : "denied"} call ${awaited?.callId ?? callId ?? "?"}${what} of goal ${id}, by ${by}; recorded, nothing run yet: rx resume ${id}${flag} ${approved ? "runs it exactly as requested" : "tells the model"}`,
        4_000
      ))
    })
  )

const approve = Command.make(
  "approve",
  { db: Settings.db, call: Settings.call, by: Settings.by, goalId },
  (flags) => decide(flags, true, "approved")
).pipe(Command.withDescription("approve the call a goal waits on (recorded as ApprovalDecided, by --by or your user name); rx resume then runs it exactly as requested"))

const deny = Command.make(
  "deny",
  { db: Settings.db, call: Settings.call, by: Settings.by, reason: Settings.reason, goalId },
  (flags) => decide(flags, false, Option.getOrElse(Option.filter(Option.map(flags.reason, (r) => r.trim()), (r) => r !== ""), () => "denied with rx deny"))
).pipe(Command.withDescription("deny the call a goal waits on (recorded as ApprovalDecided with --reason, which the model is told); rx resume goes on without it"))

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
      yield* say(Render.cap(error._tag === "@rx/kernel/NonDeterminism" ? error.message : `replay of goal ${flags.goalId} failed: ${error.message}`, 8_000))
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
      // Why an open goal waits is in its log, not in the store's summary.
      const rows = yield* Effect.forEach(goals, (g) =>
        g.status === "open" ? Effect.map(Runner.restore(g.goalId), (state) => ({ g, suspended: state.suspended })) : Effect.succeed({ g, suspended: null }))
      if (flags.json) {
        return yield* Effect.forEach(rows, ({ g, suspended }) => Console.log(Render.jsonLine(JSON.stringify({ ...encodeSummary(g), suspended }))), { discard: true })
      }
      yield* say(
        goals.length === 0
          ? "no goals yet (rx run \"<goal>\" starts one)"
          : [Render.listHeader, ...rows.map(({ g, suspended }) => Render.listLine(g, suspended?.reason ?? null))].join("\n")
      )
    })
  )
).pipe(Command.withDescription("the goals in the database, newest first: open, suspended(why) or terminated(why)"))

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
    `an autonomous agent kernel: goals in, a recorded log of every step out.\n\nwhile rx run or rx resume runs a goal: Ctrl-C cancels it (recorded, exit 7; a second Ctrl-C stops at once, exit 130); SIGTERM stops it gracefully and leaves it open (the call in flight recorded, then Suspended(shutdown), exit 11). A call that needs approval (--ask) is asked about at a terminal; otherwise the goal suspends (exit 11) until rx approve or rx deny, then rx resume.\n\nthe log: --db, else RX_DB, else ${Settings.defaultDbText} (per user, outside the agent's workspace; a log placed inside the workspace is hidden from the tools)\n\nexit codes:\n${ExitCode.table}`
  ),
  Command.withSubcommands([run, resume, approve, deny, replay, inspect, events, list, cancel, doctor, demo])
)

/** The `rx` program for the given `process.argv`. */
export const cli: (args: ReadonlyArray<string>) => Effect.Effect<void, unknown, CliApp.CliApp.Environment | ExitStatus> =
  Command.run(rx, { name: "rx", version: "0.1.0" })
