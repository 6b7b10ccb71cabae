/**
 * Running a goal at the command line: the events printed as they are committed (human lines, or
 * JSON lines with `--json`), a live status line on a terminal, Ctrl-C and SIGTERM, approvals
 * asked in place, and the exit code of how it ended.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Goals from "@rx/host/Goals"
import * as Log from "@rx/host/Log"
import { Control, Event, Goal, type Options as RunOptions, State } from "@rx/kernel"
import { Cause, Console, Context, Effect, Exit, Fiber, Layer, Ref } from "effect"
import * as Approval from "../Approval.js"
import * as ExitCode from "../ExitCode.js"
import * as Progress from "../Progress.js"
import * as Render from "../Render.js"
import { onTerminate, takeOver } from "./interrupt.js"
import * as Output from "./output.js"

/** The exit code the process ends with. */
export class ExitStatus extends Context.Tag("@rx/cli/ExitStatus")<ExitStatus, Ref.Ref<number>>() {}

export const setExit = (code: number) => Effect.flatMap(ExitStatus, (ref) => Ref.set(ref, code))

/** Print human text: control characters from the log are shown, never sent to the terminal. */
export const say = (text: string) => Console.log(Render.terminal(text))

/** A note on stderr, escaped like everything printed. */
export const note = (text: string) => Console.error(Render.terminal(`rx: note: ${text}`))

/** Print one event as a JSON line (the encoding `rx events` prints). */
export const sayJson = (event: Event.Event) => Console.log(Render.jsonLine(Event.encodeJson(event)))

/** What a run printed in full: a model failure's message, which the suspension and closing line after it do not repeat. */
export interface Said {
  failure: string | undefined
}

/**
 * Print each committed event: a JSON line, or a human line per step. `options` are the goal's
 * options before the first event printed (a resume), to say what a later change changed; `said`
 * is the run's own (printers of one run share it, each run has its own).
 */
export const printer = (
  json: boolean,
  options?: RunOptions.Options,
  pending?: State.Pending | null,
  root?: string,
  said: Said = { failure: undefined },
  /** The events of a goal as recorded: where the input of a sub-goal's call started before this run (cut short by a crash) is found. */
  recorded?: (goalId: string) => Effect.Effect<ReadonlyArray<Event.Event>, unknown>
) => {
  // A resume's call cut short was started before: its outcome's line shows that call's input.
  const started = new Map<string, { readonly input: unknown }>(pending == null ? [] : [[pending.callId, { input: pending.input }]])
  /** The input of a call whose outcome comes with no `ToolStarted` seen in this run: from its goal's log. */
  const startedBefore = (event: Event.Event): Effect.Effect<void> => {
    if ((event._tag !== "ToolSucceeded" && event._tag !== "ToolFailed") || started.has(event.callId) || recorded === undefined) return Effect.void
    return recorded(event.goalId).pipe(
      Effect.map((events) => {
        const call = events.find((e) => e._tag === "ToolStarted" && e.callId === event.callId)
        if (call?._tag === "ToolStarted") started.set(call.callId, call)
      }),
      Effect.ignore
    )
  }
  let current = options
  // The goal run (the first one seen): the events of its sub-goals are shown under their own ids.
  let top = root
  return (event: Event.Event): Effect.Effect<void> => {
    if (json) return sayJson(event)
    if (event._tag === "ToolStarted") started.set(event.callId, event)
    top ??= event.goalId
    if (event.goalId !== top) {
      return Effect.zipRight(
        startedBefore(event),
        Effect.suspend(() => {
          const line = Render.subGoalLine(event, started)
          return line === undefined ? Effect.void : say(line)
        })
      )
    }
    if (event._tag === "GoalSubmitted") {
      current = event.options
      return say(Render.goalLine(event, event.options.settings ?? {}))
    }
    if (event._tag === "OptionsChanged") {
      const before = current
      current = event.options
      return say(`      options changed (seq ${event.seq})${before === undefined ? "" : `: ${Render.optionsDiff(before, event.options)}`}`)
    }
    const line = Render.stepLine(event, started, said.failure)
    // A model failure's message, said in full once: the suspension and the closing line that follow do not repeat it.
    said.failure = event._tag === "ModelFailed" && event.message.length <= 400 ? event.message : event._tag === "Suspended" ? said.failure : undefined
    return line === undefined ? Effect.void : say(line)
  }
}

/** How messages name where a goal is: the log given with --db, or the server; nothing for the default log. */
export const whereOf = (where: Goals.Where): Render.Where =>
  where._tag === "Server" ? { server: where.url } : where.db.source === "flag" ? { db: where.db.label } : undefined

/** The closing line of a run (not with `--json`), what to do next if the goal waits, and the exit code. */
export const finish = (result: Goal.Result, json: boolean, where: Render.Where, said: Said) =>
  Effect.gen(function*() {
    const code = ExitCode.of(result)
    const next = Render.nextSteps(result, where)
    if (!json) yield* say(Render.endLine(result, code, said.failure))
    if (next !== undefined) yield* json ? Console.error(Render.terminal(next)) : say(next)
    yield* setExit(code)
  })

/** The live status line, on a terminal only (stderr a TTY, not `--json`): what runs and for how long. Other output clears it and draws it again. */
const statusLine = (json: boolean) =>
  Effect.gen(function*() {
    if (json || !Output.stderrIsTerminal()) return undefined
    const progress = yield* Progress.make({ write: (text) => void process.stderr.write(text), columns: () => process.stderr.columns || 80 })
    yield* Effect.acquireRelease(
      Effect.sync(() => Output.setStatusLine({ clear: () => Effect.runSync(progress.clear), redraw: () => Effect.runSync(progress.redraw) })),
      () => Effect.sync(() => Output.setStatusLine(undefined))
    )
    return progress
  })

/**
 * Run a goal (new or resumed) of `goals`, then print how it ended and set the exit code. Ctrl-C
 * becomes a recorded cancel. On a local log, SIGTERM interrupts the runner, which records the call
 * in flight and `Suspended(shutdown)` (exit 11); with a person at the terminal (and not `--json`),
 * a call that needs approval is asked about in place; otherwise the goal suspends, and the way to
 * decide it is printed.
 */
export const runGoal = <E>(
  goals: Goals.Service,
  start: (hooks: Goals.Hooks) => Effect.Effect<Goal.Result, E>,
  how: { readonly json: boolean; readonly goalId?: string }
) =>
  Effect.scoped(Effect.gen(function*() {
    const where = whereOf(goals.where)
    const server = goals.where._tag === "Server" ? goals.where.url : undefined
    let goalId = how.goalId
    let presses = 0
    yield* takeOver(() => {
      presses++
      if (presses > 1 || goalId === undefined) process.exit(ExitCode.interrupted)
      Output.err(server === undefined
        ? `\ncancelling goal ${goalId}; press Ctrl-C again to stop at once\n`
        : `\ncancelling goal ${goalId} at ${server}; press Ctrl-C again to stop following at once\n`)
      Effect.runFork(Effect.ignore(goals.cancel(goalId, "cancelled by Ctrl-C")))
    })
    const said: Said = { failure: undefined }
    let print = printer(how.json, undefined, undefined, how.goalId, said, goals.events)
    const status = server === undefined ? yield* statusLine(how.json) : undefined
    const observe = (event: Event.Event) => {
      const first = goalId === undefined
      // The goal run is the first one seen; its sub-goals' events come after.
      goalId ??= event.goalId
      const own = event.goalId === goalId
      const submitted = first && server !== undefined && !how.json ? note(`goal ${event.goalId} submitted to ${server}; Ctrl-C cancels it`) : Effect.void
      const progress = status === undefined || !own
        ? Effect.void
        : Effect.zipRight(event._tag === "GoalSubmitted" ? status.relabel(event.options.settings?.model ?? "") : Effect.void, status.observe(event))
      return Effect.zipRight(submitted, Effect.zipRight(print(event), progress))
    }
    // A resume says what goes on, with what, and what it recorded, before its first step.
    const starting = (s: Goals.Starting) =>
      Effect.gen(function*() {
        print = printer(how.json, s.state.options, s.state.pending, s.state.goalId, said, goals.events)
        if (!how.json) yield* say(Render.resumeLine(s.state, s.settings))
        for (const event of s.changed) {
          yield* how.json ? sayJson(event) : say(`settings of this resume, recorded at seq ${event.seq}: ${Render.optionsDiff(s.before, event.options)}`)
        }
        print = printer(how.json, s.changed.at(-1)?.options ?? s.state.options, s.state.pending, s.state.goalId, said, goals.events)
        if (status !== undefined) {
          yield* status.relabel(s.settings.model ?? "")
          // A resume commits nothing before its first model call: say what runs first.
          yield* status.set(Progress.resumed(s.state))
        }
      })
    // "always" at the terminal: the tool runs without asking from now on in the goal that asked
    // (the run's, or a sub-goal's), recorded as an options change of that goal.
    const always = (tool: string, asking: string) =>
      Control.changeOptions(asking, (current): RunOptions.Input => ({
        ...current,
        approval: { ...current.approval, [tool]: "auto" }
      })).pipe(
        Effect.provide(goals.where._tag === "Log" ? Log.layer(goals.where.db, "write") : Layer.fail(new Error("no log here"))),
        Effect.provide(NodeContext.layer),
        Effect.catchAll((error) => Console.error(Render.terminal(`rx: could not record that ${tool} is always allowed (${error.message}); this call is approved`))),
        Effect.asVoid
      )
    // A call too long to show at the prompt: its step in full, from another terminal.
    const whole = (request: State.Awaiting, asking: string) => {
      const step = request.callId.startsWith(`${asking}:`) ? request.callId.slice(asking.length + 1).split(":")[0] : undefined
      const db = where !== undefined && "db" in where ? ` --db ${Render.shellWord(where.db)}` : ""
      return step === undefined ? `rx events ${asking}${db}` : `rx inspect ${asking} --step ${step}${db}`
    }
    const approve = server === undefined && !how.json && Approval.interactive() ? Approval.approver(Approval.stdio, always, whole) : undefined
    const fiber = yield* Effect.fork(start({ observe, approve, starting }))
    let stopping = false
    if (server === undefined) {
      yield* onTerminate((signal) => {
        if (stopping) return
        stopping = true
        Output.err(`\nrx: stopping (${signal}): the call in flight is recorded and the goal stays open for rx resume\n`)
        Effect.runFork(Fiber.interrupt(fiber))
      })
    }
    const exit = yield* Fiber.await(fiber)
    const result = Exit.isSuccess(exit)
      ? exit.value
      : stopping && goalId !== undefined && Cause.isInterruptedOnly(exit.cause)
      ? Goal.result(State.fromEvents(goalId, yield* goals.events(goalId)), { reason: "shutdown", detail: "rx was stopped before the goal ended" })
      : yield* exit
    yield* finish(result, how.json, where, said)
  }))
