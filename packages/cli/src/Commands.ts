/**
 * The `rx` commands, each written once against `@rx/host`'s `Goals` (a local log or an rx serve):
 * call the host, print. What the command line accepts is in `Usage`, parsed by `Cli`.
 */
import { FileSystem, Path } from "@effect/platform"
import * as Goals from "@rx/host/Goals"
import type * as Serve from "@rx/host/Serve"
import * as Log from "@rx/host/Log"
import * as Settings from "@rx/host/Settings"
import { Doctor } from "@rx/store-sqlite"
import { Console, Effect, Option, Schema, Stream } from "effect"
import * as ExitCode from "./ExitCode.js"
import { ExitStatus, note, runGoal, say, sayJson, setExit, whereOf } from "./internal/goal.js"
import * as Render from "./Render.js"
import * as Usage from "./Usage.js"

export { ExitStatus }

/** A usage problem: printed as `rx: <message>`, exit 1. */
export const UsageError = Settings.UsageError
export type UsageError = Settings.UsageError

/** What a command is given: its settings' flags, its other flags and its argument. */
export interface Flags extends Omit<Serve.ServeRequest, "given">, Omit<Serve.WorkerRequest, "given"> {
  readonly settings: Settings.Given
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

/** Run `body` with the goals the command's settings name: at `--server`, else in the log. */
const withGoals = <A, E, R>(flags: Flags, body: (goals: Goals.Service) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(Goals.make(flags.settings, { cluster: flags.cluster, failover: flags.failover }), body)

const run = (flags: Flags) =>
  withGoals(flags, (goals) =>
    runGoal(goals, (hooks) =>
      goals.run({ goal: flags.goal, goalFile: flags.goalFile, given: flags.settings, mcp: flags.mcp, mcpEnv: flags.mcpEnv, mcpSandbox: flags.mcpSandbox }, hooks), {
      json: flags.json
    }))

const resume = (flags: Flags) =>
  withGoals(flags, (goals) =>
    runGoal(goals, (hooks) => goals.resume({ goalId: flags.goalId, given: flags.settings, mcpEnv: flags.mcpEnv }, hooks), { json: flags.json, goalId: flags.goalId }))

/** Who decides: `--by`, else the OS user name; an empty name is refused. */
const decider = (given: Option.Option<string>) =>
  Effect.flatMap(
    Option.match(given, { onNone: () => Settings.userName, onSome: (name) => Effect.succeed(name.trim()) }),
    (by) => (by === "" ? new UsageError({ message: "--by needs a name" }) : Effect.succeed(by))
  )

/**
 * Record a decision on the call a goal waits on (`rx approve`, `rx deny`). On a local log it runs
 * nothing: the goal goes on at `rx resume`; a server goes on with the goal by itself.
 */
const decide = (flags: Flags, approve: boolean, reason: string) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const id = flags.goalId
      const by = yield* decider(flags.by)
      const decided = yield* goals.decide({ goalId: id, approve, by, reason, callId: flags.call })
      const where = whereOf(goals.where)
      const flag = where !== undefined && "db" in where ? ` --db ${Render.shellWord(where.db)}` : ""
      const server = goals.where._tag === "Server" ? goals.where.url : undefined
      const whole = server === undefined ? `rx inspect ${id} --step ${decided.call?.iteration ?? 0}${flag}` : `rx events ${id} --server ${Render.shellWord(server)}`
      // The call decided on, whole (or how much is not shown, and where), then what happens next.
      const [head, ...input] = decided.call === null ? [] : Render.callView(decided.call.tool, decided.call.input, whole)
      // A sub-goal's call: the goal that delegated it goes on with both, as its suspension said.
      const parent = server === undefined ? yield* Effect.map(goals.summary(id), (g) => g.parent) : null
      yield* say([
        Render.terminal(`${approve ? "approved" : "denied"} call ${decided.callId} of goal ${id}${server === undefined ? `, by ${by}` : ""}${head === undefined ? "" : ":"}`),
        ...(head === undefined ? [] : [`  ${head}`, ...input.map((line) => `  ${line}`)]),
        server === undefined
          ? Render.decidedNext(id, parent, approve, flag)
          : Render.terminal(`recorded at ${server}, which goes on with the goal ${approve ? "and runs the call exactly as requested" : "and tells the model"}`)
      ].join("\n"))
    }))

const approve = (flags: Flags) => decide(flags, true, "approved")

const deny = (flags: Flags) =>
  decide(flags, false, Option.getOrElse(Option.filter(Option.map(flags.reason, (r) => r.trim()), (r) => r !== ""), () => "denied with rx deny"))

/** Replay a goal's log and say whether it verifies (exit 0) or where it diverges. */
const replay = (flags: Flags) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const goalId = flags.goalId
      const events = yield* goals.events(goalId)
      // The replayer (and the runner it drives) is loaded by this command only.
      const { Replay } = yield* Effect.promise(() => import("@rx/kernel"))
      const outcome = yield* Effect.either(Replay.check(events))
      if (flags.json) {
        // One object: identical (with how the goal ended, or null while it is open), or where it diverged.
        const verdict = outcome._tag === "Right"
          ? { goalId, identical: true, events: events.length, complete: outcome.right._tag === "Complete", reason: outcome.right._tag === "Complete" ? outcome.right.result.reason : null }
          : outcome.left._tag === "@rx/kernel/NonDeterminism"
          ? { goalId, identical: false, events: events.length, divergedAt: outcome.left.seq, expected: outcome.left.expected, actual: outcome.left.actual, message: outcome.left.message }
          : { goalId, identical: false, events: events.length, divergedAt: null, message: outcome.left.message }
        yield* Console.log(Render.jsonLine(JSON.stringify(verdict)))
        return yield* setExit(outcome._tag === "Right" ? 0 : ExitCode.diverged)
      }
      if (outcome._tag === "Right") {
        const verified = outcome.right
        yield* say(
          verified._tag === "Complete"
            ? `replay of goal ${goalId}: identical, ${Render.plural(events.length, "event")}, no live calls (${verified.result.reason})`
            : `replay of goal ${goalId}: the goal is still open, so its log is incomplete; its ${Render.plural(events.length, "event")} verify, no live calls`
        )
        return yield* setExit(0)
      }
      const error = outcome.left
      yield* say(Render.cap(error._tag === "@rx/kernel/NonDeterminism" ? error.message : `replay of goal ${goalId} failed: ${error.message}`, 8_000))
      yield* setExit(ExitCode.diverged)
    }))

const inspect = (flags: Flags) =>
  Effect.gen(function*() {
    const step = Option.isNone(flags.step) ? undefined : Number(flags.step.value.trim())
    if (step !== undefined && !(Number.isSafeInteger(step) && step >= 1)) {
      return yield* new UsageError({ message: `--step: expected a step number from 1 up, got ${JSON.stringify(Option.getOrElse(flags.step, () => ""))}` })
    }
    const { children, events, goal, where } = yield* withGoals(flags, (goals) =>
      Effect.all({
        events: goals.events(flags.goalId),
        children: step === undefined ? goals.children(flags.goalId) : Effect.succeed([]),
        goal: step === undefined ? goals.summary(flags.goalId) : Effect.succeed(undefined),
        where: Effect.succeed(Render.whereFlag(whereOf(goals.where)))
      }))
    const last = Render.steps(events).length
    if (step !== undefined && step > last) {
      return yield* new UsageError({ message: `goal ${flags.goalId} has no step ${step} (${last === 0 ? "it has no steps yet" : `steps 1 to ${last}`})` })
    }
    const tree = { children, goal, where }
    yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify(Render.inspectJson(events, step, tree)))) : say(Render.inspect(events, step, tree).join("\n"))
  })

const events = (flags: Flags) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      if (flags.wait && !flags.follow) return yield* new UsageError({ message: "--wait goes with --follow" })
      if (!flags.follow) return yield* Effect.forEach(yield* goals.events(flags.goalId), sayJson, { discard: true })
      let orphaned = false
      yield* goals.follow(flags.goalId, flags.wait).pipe(
        Stream.runForEach((item) => {
          if (item._tag === "Event") return sayJson(item.event)
          orphaned = !flags.wait
          return note(
            `no rx runs goal ${flags.goalId} now (its runner stopped or was killed, or it waits to be resumed): rx resume ${flags.goalId} continues it${flags.wait ? "; waiting for a runner (Ctrl-C stops)" : "; rx events --follow --wait keeps waiting"}`
          )
        })
      )
      if (orphaned) yield* setExit(ExitCode.suspended)
    }))

const list = (flags: Flags) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      // Each summary says why an open goal waits: no log is read.
      const found = yield* goals.list
      if (flags.json) return yield* Effect.forEach(found, (g) => Console.log(Render.jsonLine(JSON.stringify({ ...g, phase: Render.phaseJson(Render.phaseOf(g)) }))), { discard: true })
      yield* say(
        found.length > 0
          ? ((ordered) => {
            const width = Render.listWidth(ordered)
            const idle = Render.idleHint(found, Render.whereFlag(whereOf(goals.where)))
            return [Render.listHeaderOf(width), ...ordered.map(([g, depth]) => Render.listLine(g, depth, width)), ...(idle === undefined ? [] : [idle])].join("\n")
          })(Render.tree(found))
          : goals.where._tag === "Server"
          ? `no goals yet at ${goals.where.url}`
          : Render.noGoals(goals.where.db, yield* Log.exists(goals.where.db))
      )
    }))

const cancel = (flags: Flags) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const outcome = yield* goals.cancel(flags.goalId, "cancelled with rx cancel")
      const at = goals.where._tag === "Server" ? goals.where.url : undefined
      yield* say(
        outcome === "already_terminated"
          ? `goal ${flags.goalId} has already terminated`
          : at === undefined
          ? `cancel requested: goal ${flags.goalId} stops within one step (a goal no process runs is cancelled when resumed)`
          : `cancel requested: goal ${flags.goalId} stops within one step at ${at}`
      )
    }))

const doctor = (flags: Flags) =>
  Effect.gen(function*() {
    const db = yield* Log.database(Settings.dbFlag(flags.settings))
    if (db.postgres) return yield* new UsageError({ message: "rx doctor checks a SQLite log; Postgres checks its own (rx list, inspect and replay read a Postgres log)" })
    const fs = yield* FileSystem.FileSystem
    if (!(yield* fs.exists(db.file).pipe(Effect.orElseSucceed(() => true)))) {
      return yield* new UsageError({ message: `no rx database at ${db.file} (pass --db or set RX_DB)` })
    }
    const report = yield* Doctor.check(db.file)
    yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify(Schema.encodeSync(Doctor.Report)(report)))) : say(Render.doctor(report, ExitCode.unhealthy))
    yield* setExit(report.healthy ? 0 : ExitCode.unhealthy)
  })

/** A command whose module is loaded when it runs: `rx list` loads no server, no model adapter, no tools. */
const later = <K extends string>(load: () => Promise<{ readonly [k in K]: (flags: Flags) => Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path | ExitStatus> }>, name: K) =>
(flags: Flags) => Effect.flatMap(Effect.promise(load), (module) => module[name](flags))

const config = later(() => import("./internal/config.js"), "config")
const serve = later(() => import("./internal/serving.js"), "serve")
const worker = later(() => import("./internal/serving.js"), "worker")
const demo = later(() => import("./Demo.js"), "demo")

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
