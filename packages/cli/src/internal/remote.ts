/**
 * The commands against a running `rx serve` (`--server URL`, or `RX_SERVER`): the same output as
 * with a local log, through `@rx/server`'s typed `Client`. Every decision is the server's; the
 * command only submits, follows and prints. The token is `RX_TOKEN`, or for a server on this
 * machine the file `rx serve` wrote next to the log.
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { type Event, Goal, Replay, State } from "@rx/kernel"
import { type ApiError, Client, Config as ServerConfig } from "@rx/server"
import { Console, Effect, Option, Runtime, Stream } from "effect"
import * as ExitCode from "../ExitCode.js"
import * as Render from "../Render.js"
import * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"
import * as Usage from "../Usage.js"
import { finish, note, printer, say, sayJson, setExit } from "./goal.js"
import { takeOver } from "./interrupt.js"
import * as Output from "./output.js"
import * as Setup from "./setup.js"

/** The token file of the server whose log is `db`: beside it, 0600. */
export const tokenFile = (db: Settings.Database) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    // A Postgres log has no folder here: the token goes where the default log would be.
    return path.join(path.dirname(db.postgres ? yield* Settings.defaultDb : db.file), "rx-server.token")
  })

/** The server the command should talk to: `--server`, else `RX_SERVER`; none for a local log. */
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
    const db = yield* Settings.database(given.db === undefined || typeof given.db === "boolean" ? Option.none() : given.db)
    const file = yield* tokenFile(db)
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(
      Effect.mapError(() => new UsageError({ message: `${howTo}: there is no token file at ${file} (rx serve writes it there when RX_TOKEN is unset, beside the log it uses)` }))
    )
    return text.trim()
  })

/** A client of the server the flags name. */
const connect = (url: string, given: Setup.Given) =>
  Effect.flatMap(tokenFor(url, given), (token) => Effect.provide(Client.make({ url, token }), NodeHttpClient.layer))

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
const refuseOthers = (given: Setup.Given, allowed: ReadonlyArray<Settings.Key>, what: string) =>
  Effect.gen(function*() {
    const isGiven = (value: Option.Option<string> | boolean | undefined) => value === true || (typeof value === "object" && Option.isSome(value))
    const other = Settings.keys.find((key) => !allowed.includes(key) && key !== "server" && key !== "db" && isGiven(given[key]))
    if (other !== undefined) {
      return yield* new UsageError({ message: `--${Settings.table[other].flag} does not apply with --server: the server runs goals with its own model, tools and sandbox (${what})` })
    }
  })

/** What `rx run --server` may set: the limits, the approval policy, the folder and instructions. */
const runKeys: ReadonlyArray<Settings.Key> = [...Usage.limits, "ask", "deny", "workspace", "instructions"]

/** The flags of a remote command. */
export interface Remote {
  readonly url: string
  readonly given: Setup.Given
  readonly json: boolean
}

/**
 * Follow the goal's events from the start, print those from `printFrom` on, and stop at its end
 * or when it suspends (a person must decide, the model is unavailable, the server stopped); then
 * the closing line and exit code of a local run. Ctrl-C asks the server to cancel the goal.
 */
const follow = (rx: Client.Service, url: string, goalId: string, printFrom: number, json: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<never>()
    let presses = 0
    yield* takeOver(() => {
      presses++
      if (presses > 1) process.exit(ExitCode.interrupted)
      Output.err(`\ncancelling goal ${goalId} at ${url}; press Ctrl-C again to stop following at once\n`)
      Runtime.runFork(runtime)(Effect.ignore(rx.cancel(goalId)))
    })
    const print = printer(json)
    let state = State.empty(goalId)
    const stops = (event: Event.Event) => event._tag === "Terminated" || (event._tag === "Suspended" && event.seq >= printFrom)
    yield* rx.events(goalId).pipe(
      Stream.takeUntil(stops),
      Stream.runForEach((event) =>
        Effect.suspend(() => {
          state = State.reduce(state, event)
          return event.seq >= printFrom ? print(event) : Effect.void
        })
      )
    )
    yield* finish(Goal.result(state, { reason: "shutdown", detail: "the server ended the events before the goal ended" }), json, { server: url })
  }))

/** `rx run --server`: submit, then follow to the end as a local run prints it. */
export const run = (remote: Remote, goal: Option.Option<string>, goalFile: Option.Option<string>) =>
  Effect.gen(function*() {
    const { given, url } = remote
    yield* refuseOthers(given, runKeys, "rx run --server takes the limits, --ask, --deny, --workspace (a folder inside the server's root) and --instructions")
    const flags = yield* Settings.fromFlags(given)
    // The limits and approvals of the environment apply as in a local run; a workspace only from the flag.
    const values = Settings.values(Settings.merge(flags, yield* Settings.fromEnv(runKeys.filter((key) => key !== "workspace" && key !== "instructions"))))
    const approval = yield* Settings.approval(values.ask ?? [], values.deny ?? [], Setup.builtinNames, Setup.builtinNames)
    const options = { ...Setup.runOptions(values), ...(Object.keys(approval).length === 0 ? {} : { approval }) }
    const text = yield* Setup.goalText(goal, goalFile, options)
    const path = yield* Path.Path
    const instructions = values.instructions === undefined ? undefined : yield* Setup.readText(path.resolve(values.instructions), "the --instructions file", Setup.maxInstructionBytes)
    const rx = yield* connect(url, given)
    const { goalId } = yield* rx.submit({
      goal: text,
      options,
      ...(instructions === undefined || instructions.trim() === "" ? {} : { instructions: instructions.trim() }),
      ...(flags.workspace === undefined ? {} : { workspace: flags.workspace.value })
    }).pipe(Effect.mapError(explain(url)))
    if (!remote.json) yield* note(`goal ${goalId} submitted to ${url}; Ctrl-C cancels it`)
    yield* follow(rx, url, goalId, 0, remote.json).pipe(Effect.mapError(explain(url)))
  })

/** `rx resume --server`: the server resumes the goal; its new events are printed to the end. */
export const resume = (remote: Remote, goalId: string) =>
  Effect.gen(function*() {
    yield* refuseOthers(remote.given, [], "the goal goes on with the settings it recorded")
    const rx = yield* connect(remote.url, remote.given)
    const before = yield* rx.goal(goalId).pipe(Effect.mapError(explain(remote.url)))
    yield* rx.resume(goalId).pipe(Effect.mapError(explain(remote.url)))
    yield* follow(rx, remote.url, goalId, before.nextSeq, remote.json).pipe(Effect.mapError(explain(remote.url)))
  })

/** `rx list --server`: every goal, newest first, as `rx list` shows a local log's. */
export const list = (remote: Remote) =>
  Effect.gen(function*() {
    const rx = yield* connect(remote.url, remote.given)
    const goals = yield* Stream.runCollect(rx.goals()).pipe(Effect.mapError(explain(remote.url)))
    if (remote.json) return yield* Effect.forEach(goals, (g) => Console.log(Render.jsonLine(JSON.stringify(g))), { discard: true })
    yield* say(
      goals.length === 0
        ? `no goals yet at ${remote.url}`
        : [
          Render.listHeader,
          ...Array.from(goals, (g) => Render.listLine({ ...g, status: g.status === "terminated" ? "terminated" : "open" }))
        ].join("\n")
    )
  })

/** The goal's events as far as they are recorded. */
export const recorded = (remote: Remote, goalId: string) =>
  Effect.gen(function*() {
    const rx = yield* connect(remote.url, remote.given)
    const events = yield* Stream.runCollect(rx.events(goalId, { follow: false })).pipe(Effect.mapError(explain(remote.url)))
    return Array.from(events)
  })

/** `rx events --server`: the events as JSON lines; with `follow`, until the goal terminates. */
export const events = (remote: Remote, goalId: string, following: boolean) =>
  Effect.gen(function*() {
    const rx = yield* connect(remote.url, remote.given)
    yield* rx.events(goalId, { follow: following }).pipe(Stream.runForEach(sayJson), Effect.mapError(explain(remote.url)))
  })

/** `rx cancel --server`. */
export const cancel = (remote: Remote, goalId: string) =>
  Effect.gen(function*() {
    const rx = yield* connect(remote.url, remote.given)
    const done = yield* rx.cancel(goalId).pipe(
      Effect.as(true),
      Effect.catchTag("@rx/server/Conflict", () => Effect.succeed(false)),
      Effect.mapError(explain(remote.url))
    )
    yield* say(done ? `cancel requested: goal ${goalId} stops within one step at ${remote.url}` : `goal ${goalId} has already terminated`)
  })

/** `rx approve/deny --server`: the call the goal waits on (or `call`); the server goes on with it. */
export const decide = (remote: Remote, goalId: string, approve: boolean, call: Option.Option<string>, reason: string | undefined, by: string) =>
  Effect.gen(function*() {
    const rx = yield* connect(remote.url, remote.given)
    const goal = yield* rx.goal(goalId).pipe(Effect.mapError(explain(remote.url)))
    const callId = Option.getOrElse(call, () => goal.approval?.callId ?? "")
    if (callId === "") {
      return yield* new UsageError({
        message: goal.status === "terminated"
          ? `goal ${goalId} has terminated (${goal.reason ?? "?"}); there is nothing to decide`
          : `goal ${goalId} waits for no decision (rx inspect ${goalId} --server ${remote.url} shows its approvals)`
      })
    }
    // The server records who decided as `<by> (via http)`.
    yield* rx.decide(goalId, callId, { approve, by, ...(reason === undefined ? {} : { reason }) }).pipe(Effect.mapError(explain(remote.url)))
    // The call decided on, whole (or how much is not shown, and where), then what happens next.
    const view = goal.approval !== null && goal.approval.callId === callId
      ? Render.callView(goal.approval.tool, goal.approval.input, `rx events ${goalId} --server ${Render.shellWord(remote.url)}`)
      : []
    yield* say([
      Render.terminal(`${approve ? "approved" : "denied"} call ${callId} of goal ${goalId}${view.length === 0 ? "" : ":"}`),
      ...view.map((line) => `  ${line}`),
      Render.terminal(`recorded at ${remote.url}, which goes on with the goal ${approve ? "and runs the call exactly as requested" : "and tells the model"}`)
    ].join("\n"))
  })

/** `rx replay --server`: the goal's log as the server has it, replayed here with no live calls. */
export const replay = (remote: Remote, goalId: string, json = false) =>
  Effect.flatMap(recorded(remote, goalId), (events) => replayEvents(goalId, events, json))

/** Replay `events` and say whether they verify (exit 0) or where they diverge. */
export const replayEvents = (goalId: string, events: ReadonlyArray<Event.Event>, json = false) =>
  Effect.gen(function*() {
    const outcome = yield* Effect.either(Replay.check(events))
    if (json) {
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
  })
