/**
 * The `rx` commands, each written once against `@rx/host`'s `Goals` (a local log or an rx serve):
 * call the host, print. Each is given its typed input (`Usage.Input`): what the command line
 * accepts is declared in `Usage`, checked and parsed by `Cli`.
 */
import { FileSystem, Path } from "@effect/platform"
import * as Goals from "@rx/host/Goals"
import * as Log from "@rx/host/Log"
import * as Settings from "@rx/host/Settings"
import * as View from "@rx/server/View"
import { Doctor } from "@rx/store-sqlite"
import { Console, Effect, Either, Option, Schema, Stream } from "effect"
import * as ExitCode from "./ExitCode.js"
import { ExitStatus, note, runGoal, say, sayJson, setExit, whereOf } from "./internal/goal.js"
import * as Render from "./Render.js"
import * as Usage from "./Usage.js"

export { ExitStatus }

/** A usage problem: printed as `rx: <message>`, exit 1. */
export const UsageError = Settings.UsageError
export type UsageError = Settings.UsageError

type In<D extends Usage.Doc> = Usage.Input<D>

/** The goal id a command is given. */
const idOf = (input: { readonly arg: Option.Option<string> }) => Option.getOrElse(input.arg, () => "")

/** Run `body` with the goals the command's settings name: at `--server`, else in the log. */
const withGoals = <A, E, R>(
  input: { readonly settings: Settings.Given; readonly cluster?: boolean; readonly failover?: Option.Option<number> },
  body: (goals: Goals.Service) => Effect.Effect<A, E, R>
) => Effect.flatMap(Goals.make(input.settings, { cluster: input.cluster === true, failover: input.failover ?? Option.none() }), body)

export const run = (flags: In<typeof Usage.run>) =>
  withGoals(flags, (goals) =>
    runGoal(goals, (hooks) =>
      goals.run({ goal: flags.arg, goalFile: flags.goalFile, continues: flags.continues, given: flags.settings, mcp: flags.mcp, mcpEnv: flags.mcpEnv, mcpSandbox: flags.mcpSandbox }, hooks), {
      json: flags.json
    }))

export const resume = (flags: In<typeof Usage.resume>) =>
  withGoals(flags, (goals) =>
    runGoal(goals, (hooks) => goals.resume({ goalId: idOf(flags), given: flags.settings, mcpEnv: flags.mcpEnv }, hooks), { json: flags.json, goalId: idOf(flags) }))

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
const decide = (flags: In<typeof Usage.approve>, approve: boolean, reason: string) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const id = idOf(flags)
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
        server === undefined && decided.cancelled !== undefined
          ? Render.terminal(`recorded, but goal ${id} was cancelled (${decided.cancelled}): it runs nothing more, and rx resume ${id}${flag} records its end`)
          : server === undefined
          ? Render.decidedNext(id, parent, approve, flag)
          : Render.terminal(`recorded at ${server}, which goes on with the goal ${approve ? "and runs the call exactly as requested" : "and tells the model"}`)
      ].join("\n"))
    }))

export const approve = (flags: In<typeof Usage.approve>) => decide(flags, true, "approved")

export const deny = (flags: In<typeof Usage.deny>) =>
  decide(flags, false, Option.getOrElse(Option.filter(Option.map(flags.reason, (r) => r.trim()), (r) => r !== ""), () => "denied with rx deny"))

/** Replay a goal's log and say whether it verifies (exit 0) or where it diverges. */
export const replay = (flags: In<typeof Usage.replay>) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const goalId = idOf(flags)
      const events = yield* goals.events(goalId)
      // The replayer (and the runner it drives) is loaded by this command only.
      const { Replay } = yield* Effect.promise(() => import("@rx/kernel"))
      const outcome = yield* Effect.either(Replay.check(events))
      if (flags.json) {
        // One object: identical (with how the goal ended, or null while it is open), or where it diverged.
        const verdict = Either.isRight(outcome)
          ? { goalId, identical: true, events: events.length, complete: outcome.right._tag === "Complete", reason: outcome.right._tag === "Complete" ? outcome.right.result.reason : null }
          : outcome.left._tag === "@rx/kernel/NonDeterminism"
          ? { goalId, identical: false, events: events.length, divergedAt: outcome.left.seq, expected: outcome.left.expected, actual: outcome.left.actual, message: outcome.left.message }
          : { goalId, identical: false, events: events.length, divergedAt: null, message: outcome.left.message }
        yield* Console.log(Render.jsonLine(JSON.stringify(verdict)))
        return yield* setExit(Either.isRight(outcome) ? 0 : ExitCode.diverged)
      }
      if (Either.isRight(outcome)) {
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

export const inspect = (flags: In<typeof Usage.inspect>) =>
  Effect.gen(function*() {
    const step = Option.getOrUndefined(flags.step)
    const goalId = idOf(flags)
    if (step === undefined) {
      const { view, where } = yield* withGoals(flags, (goals) => Effect.all({ view: goals.view(goalId), where: Effect.succeed(Render.whereFlag(whereOf(goals.where))) }))
      return yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify(Render.encodeGoal(view)))) : say(Render.inspect(view, where).join("\n"))
    }
    const all = View.steps(yield* withGoals(flags, (goals) => goals.events(goalId)))
    const one = all.find((s) => s.step === step)
    if (one === undefined) return yield* new UsageError({ message: `goal ${goalId} has no step ${step} (${all.length === 0 ? "it has no steps yet" : `steps 1 to ${all.length}`})` })
    yield* flags.json ? Console.log(Render.jsonLine(JSON.stringify({ goalId, ...Render.encodeStep(one) }))) : say(Render.step(one, Infinity, goalId).join("\n"))
  })

export const events = (flags: In<typeof Usage.events>) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const goalId = idOf(flags)
      if (flags.wait && !flags.follow) return yield* new UsageError({ message: "--wait goes with --follow" })
      if (!flags.follow) return yield* Effect.forEach(yield* goals.events(goalId), sayJson, { discard: true })
      let orphaned = false
      yield* goals.follow(goalId, flags.wait).pipe(
        Stream.runForEach((item) => {
          if (item._tag === "Event") return sayJson(item.event)
          orphaned = !flags.wait
          return note(
            `no rx runs goal ${goalId} now (its runner stopped or was killed, or it waits to be resumed): rx resume ${goalId} continues it${flags.wait ? "; waiting for a runner (Ctrl-C stops)" : "; rx events --follow --wait keeps waiting"}`
          )
        })
      )
      if (orphaned) yield* setExit(ExitCode.suspended)
    }))

export const list = (flags: In<typeof Usage.list>) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      // Each summary says why an open goal waits, and where a fork was forked from: no log is read.
      const found = yield* goals.list
      if (flags.json) return yield* Effect.forEach(found, (g) => Console.log(Render.jsonLine(JSON.stringify({ ...g, phase: Render.phaseJson(Render.phaseOf(g)) }))), { discard: true })
      // A continuation keeps its goal's text: only ended goals whose text a newer goal has are looked up.
      const texts = new Map<string, number>()
      for (const g of found) texts.set(g.goal, (texts.get(g.goal) ?? 0) + 1)
      const continued = new Map<string, ReadonlyArray<string>>()
      for (const g of found) {
        if (g.status === "terminated" && (texts.get(g.goal) ?? 0) > 1) continued.set(g.goalId, yield* goals.continuedBy(g.goalId))
      }
      yield* say(
        found.length > 0
          ? ((ordered) => {
            const width = Render.listWidth(ordered)
            const idle = Render.idleHint(found, Render.whereFlag(whereOf(goals.where)))
            return [Render.listHeaderOf(width), ...ordered.map(([g, depth]) => Render.listLine(g, depth, width, continued.get(g.goalId))), ...(idle === undefined ? [] : [idle])].join("\n")
          })(Render.tree(found))
          : goals.where._tag === "Server"
          ? `no goals yet at ${goals.where.url}`
          : Render.noGoals(goals.where.db, yield* Log.exists(goals.where.db))
      )
    }))

export const cancel = (flags: In<typeof Usage.cancel>) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const goalId = idOf(flags)
      const outcome = yield* goals.cancel(goalId, "cancelled with rx cancel")
      const at = goals.where._tag === "Server" ? goals.where.url : undefined
      yield* say(
        outcome === "already_terminated"
          ? `goal ${goalId} has already terminated`
          : at === undefined
          ? `cancel requested: goal ${goalId} stops within one step (a goal no process runs is cancelled when resumed)`
          : `cancel requested: goal ${goalId} stops within one step at ${at}`
      )
    }))

export const sayTo = (flags: In<typeof Usage.say>) =>
  withGoals(flags, (goals) =>
    Effect.gen(function*() {
      const goalId = idOf(flags)
      const by = yield* Settings.userName
      yield* goals.say(goalId, Option.getOrElse(flags.more, () => ""), by)
      yield* say(`message sent: goal ${goalId} reads it at its next model request`)
    }))

export const doctor = (flags: In<typeof Usage.doctor>) =>
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

/** Where each command runs: the file system, paths, and the exit code it sets. */
export type Env = FileSystem.FileSystem | Path.Path | ExitStatus

/** A command whose module is loaded when it runs: `rx list` loads no server, no model adapter, no tools. */
const later = <D extends Usage.Doc, K extends string>(load: () => Promise<{ readonly [k in K]: (input: In<D>) => Effect.Effect<void, unknown, Env> }>, name: K) =>
(input: In<D>) => Effect.flatMap(Effect.promise(load), (module) => module[name](input))

export const fork = later<typeof Usage.fork, "fork">(() => import("./internal/fork.js"), "fork")
export const evaluate = later<typeof Usage.evaluate, "evaluate">(() => import("./internal/evaluate.js"), "evaluate")
export const config = later<typeof Usage.config, "config">(() => import("./internal/config.js"), "config")
export const serve = later<typeof Usage.serve, "serve">(() => import("./internal/serving.js"), "serve")
export const worker = later<typeof Usage.worker, "worker">(() => import("./internal/serving.js"), "worker")
export const demo = later<typeof Usage.demo, "demo">(() => import("./Demo.js"), "demo")
