/**
 * Running a goal at the command line: the events printed as they are committed (human lines, or
 * JSON lines with `--json`), a live status line on a terminal, Ctrl-C and SIGTERM, approvals
 * asked in place, and the exit code of how it ended.
 */
import { Control, Event, Goal, Options as RunOptions, Runner, type State, StateStore } from "@rx/kernel"
import { Cause, Console, Context, Effect, Exit, Fiber, Ref, Runtime } from "effect"
import * as Approval from "../Approval.js"
import * as ExitCode from "../ExitCode.js"
import * as Progress from "../Progress.js"
import * as Render from "../Render.js"
import * as Settings from "../Settings.js"
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

/**
 * Print each committed event: a JSON line, or a human line per step. `options` are the goal's
 * options before the first event printed (a resume), to say what a later change changed.
 */
export const printer = (json: boolean, options?: RunOptions.Options, pending?: State.Pending | null) => {
  // A resume's call cut short was started before: its outcome's line shows that call's input.
  const started = new Map<string, { readonly input: unknown }>(pending == null ? [] : [[pending.callId, { input: pending.input }]])
  let current = options
  return (event: Event.Event): Effect.Effect<void> => {
    if (json) return sayJson(event)
    if (event._tag === "ToolStarted") started.set(event.callId, event)
    if (event._tag === "GoalSubmitted") {
      current = event.options
      return say(Render.goalLine(event, event.options.settings ?? {}))
    }
    if (event._tag === "OptionsChanged") {
      const before = current
      current = event.options
      return say(`      options changed (seq ${event.seq})${before === undefined ? "" : `: ${Render.optionsDiff(before, event.options)}`}`)
    }
    const line = Render.stepLine(event, started, shownFailure)
    // A model failure's message, said in full once: the suspension and the closing line that follow do not repeat it.
    shownFailure = event._tag === "ModelFailed" && event.message.length <= 400 ? event.message : event._tag === "Suspended" ? shownFailure : undefined
    return line === undefined ? Effect.void : say(line)
  }
}

/** The model failure the step lines said in full last, if nothing came after but its suspension. */
let shownFailure: string | undefined

/** What a goal's run is given: the hooks the kernel calls. */
export interface RunHooks {
  readonly observe: Runner.Observer
  readonly approve: Runner.Approver | undefined
}

/** The result of a goal whose runner was stopped from outside (SIGTERM), as its log says. */
const stopped = (goalId: string) =>
  Effect.map(Goal.restore(goalId), (state) => Goal.result(state, { reason: "shutdown", detail: "rx was stopped before the goal ended" }))

/** The closing line of a run (not with `--json`), what to do next if the goal waits, and the exit code. */
export const finish = (result: Goal.Result, json: boolean, where: Render.Where) =>
  Effect.gen(function*() {
    const code = ExitCode.of(result)
    const next = Render.nextSteps(result, where)
    if (!json) yield* say(Render.endLine(result, code, shownFailure))
    if (next !== undefined) yield* json ? Console.error(Render.terminal(next)) : say(next)
    yield* setExit(code)
  })

/**
 * The live status line, on a terminal only (stderr a TTY, not `--json`): what runs and for how
 * long. Other output clears it and draws it again, so lines never mix.
 */
const statusLine = (json: boolean, goalId: string | undefined, options: RunOptions.Options | undefined) =>
  Effect.gen(function*() {
    if (json || !Output.stderrIsTerminal()) return (_: Event.Event): Effect.Effect<void> => Effect.void
    const progress = yield* Progress.make(
      { write: (text) => void process.stderr.write(text), columns: () => process.stderr.columns || 80 },
      options?.settings?.model ?? ""
    )
    // A resume commits nothing before its first model call: say what runs first.
    if (goalId !== undefined) yield* progress.set(Progress.resumed(yield* Goal.restore(goalId)))
    yield* Effect.acquireRelease(
      Effect.sync(() => Output.setStatusLine({ clear: () => Effect.runSync(progress.clear), redraw: () => Effect.runSync(progress.redraw) })),
      () => Effect.sync(() => Output.setStatusLine(undefined))
    )
    return (event: Event.Event): Effect.Effect<void> => progress.observe(event)
  })

/**
 * Run a goal (new or resumed), then print how it ended and set the exit code. Ctrl-C becomes a
 * recorded cancel; SIGTERM interrupts the runner, which records the call in flight and
 * `Suspended(shutdown)` (exit 11). With a person at the terminal (and not `--json`), a call that
 * needs approval is asked about in place; otherwise the goal suspends, and the way to decide it
 * is printed.
 */
export const runGoal = <E>(
  start: (hooks: RunHooks) => Effect.Effect<Goal.Result, E, StateStore.StateStore>,
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
      Output.err(`\ncancelling goal ${goalId}; press Ctrl-C again to stop at once\n`)
      Runtime.runFork(runtime)(Effect.ignore(Control.cancel(goalId, "cancelled by Ctrl-C")))
    })
    const print = printer(how.json, how.options, how.goalId === undefined ? null : (yield* Goal.restore(how.goalId)).pending)
    const status = yield* statusLine(how.json, how.goalId, how.options)
    const observe = (event: Event.Event) => {
      goalId = event.goalId
      return Effect.zipRight(print(event), status(event))
    }
    // "always" at the terminal: the tool runs without asking from now on, recorded as an options change.
    const always = (tool: string) =>
      goalId === undefined ? Effect.void : Control.changeOptions(goalId, (current): RunOptions.Input => ({
        ...current,
        approval: { ...current.approval, [tool]: "auto" }
      })).pipe(
        Effect.provideService(StateStore.StateStore, store),
        Effect.catchAll((error) => Console.error(Render.terminal(`rx: could not record that ${tool} is always allowed (${error.message}); this call is approved`))),
        Effect.asVoid
      )
    // A call too long to show at the prompt: its step in full, from another terminal.
    const whole = (request: State.Awaiting) => {
      const step = goalId !== undefined && request.callId.startsWith(`${goalId}:`) ? request.callId.slice(goalId.length + 1).split(":")[0] : undefined
      const db = how.db.source === "flag" ? ` --db ${Render.shellWord(how.db.label)}` : ""
      return step === undefined ? `rx events ${goalId ?? ""}${db}` : `rx inspect ${goalId} --step ${step}${db}`
    }
    const approve = !how.json && Approval.interactive() ? Approval.approver(Approval.stdio, always, whole) : undefined
    const fiber = yield* Effect.fork(start({ observe, approve }))
    let stopping = false
    yield* onTerminate(() => {
      if (stopping) return
      stopping = true
      Output.err(`\nrx: stopping (SIGTERM): the call in flight is recorded and the goal stays open for rx resume\n`)
      Runtime.runFork(runtime)(Fiber.interrupt(fiber))
    })
    const exit = yield* Fiber.await(fiber)
    const result = Exit.isSuccess(exit)
      ? exit.value
      : stopping && goalId !== undefined && Cause.isInterruptedOnly(exit.cause)
      ? yield* stopped(goalId)
      : yield* exit
    yield* finish(result, how.json, how.db.source === "flag" ? { db: how.db.label } : undefined)
  }))
