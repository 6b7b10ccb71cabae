/**
 * The live status line of `rx run` and `rx resume` on a terminal: what runs now (the model, or
 * a tool with its input) and for how long, redrawn in place on stderr. The pure part says what
 * runs after each committed event and how the line reads; `make` draws it on a clock, and is
 * cleared around every other line printed, so output never mixes with it.
 */
import type { Event } from "@rx/kernel"
import { Clock, type Duration, Effect, Ref, Schedule, type Scope } from "effect"
import * as Render from "./Render.js"

/** What runs: the model, a tool call, or nothing (the goal ended, waits, or is suspended). */
export type Activity =
  | { readonly _tag: "Model" }
  | { readonly _tag: "Tool"; readonly tool: string; readonly input: unknown }
  | { readonly _tag: "Idle" }

const model: Activity = { _tag: "Model" }
const idle: Activity = { _tag: "Idle" }

/**
 * What runs after `event` is committed. A model call follows the goal's start, a finished
 * iteration, a change of options or a decision; each call runs between its `ToolStarted` and its
 * outcome, and the answer's next call (or the end of the iteration) follows.
 */
export const activity = (event: Event.Event, previous: Activity): Activity => {
  switch (event._tag) {
    case "GoalSubmitted":
    case "IterationCompleted":
    case "ApprovalDecided":
      return model
    case "ToolStarted":
      return { _tag: "Tool", tool: event.tool, input: event.input }
    case "ModelResponded":
    case "ToolSucceeded":
    case "ToolFailed":
    case "ActionRejected":
      // Between a call and the next: the kernel is drafting, nothing slow runs.
      return idle
    case "ModelFailed":
      return model
    case "OptionsChanged":
    case "CancelRequested":
      return previous
    case "ApprovalRequested":
    case "Suspended":
    case "Terminated":
      return idle
  }
}

/** Elapsed time as `3.4s`, or `2m 05s` from a minute on. */
export const elapsed = (ms: number): string => {
  const seconds = Math.max(0, ms) / 1000
  if (seconds < 60) return `${seconds.toFixed(1)}s`
  const whole = Math.floor(seconds)
  return `${Math.floor(whole / 60)}m ${String(whole % 60).padStart(2, "0")}s`
}

/** The line for an activity running `ms`, at most `columns` wide; nothing when idle. */
export const line = (now: Activity, ms: number, columns: number, label: string): string | undefined => {
  if (now._tag === "Idle") return undefined
  const time = ` ${elapsed(ms)}`
  const what = now._tag === "Model" ? `waiting for the model${label === "" ? "" : ` (${label})`}` : `running ${now.tool} ${JSON.stringify(now.input) ?? ""}`
  const flat = Render.terminal(what.replace(/\s+/g, " "))
  const room = Math.max(10, columns - 1) - time.length - 2
  return `… ${flat.length > room ? `${flat.slice(0, Math.max(0, room - 1))}…` : flat}${time}`
}

/** Where the line is drawn: a terminal's stream and its width. */
export interface Sink {
  readonly write: (text: string) => void
  readonly columns: () => number
}

export interface StatusLine {
  /** Note a committed event: what runs now, timed from now. */
  readonly observe: (event: Event.Event) => Effect.Effect<void>
  /** Erase the line (before other output). */
  readonly clear: Effect.Effect<void>
  /** Draw the line again (after other output). */
  readonly redraw: Effect.Effect<void>
}

const erase = "\r\u001b[2K"

/**
 * A status line on `sink`, redrawn every `every` by a fiber of the scope; closing the scope
 * erases it. `label` names the model in the line.
 */
export const make = (sink: Sink, label = "", every: Duration.DurationInput = "200 millis"): Effect.Effect<StatusLine, never, Scope.Scope> =>
  Effect.gen(function*() {
    const state = yield* Ref.make<{ readonly now: Activity; readonly since: number; readonly shown: boolean }>({ now: idle, since: 0, shown: false })
    const clear = Ref.update(state, (s) => {
      if (s.shown) sink.write(erase)
      return { ...s, shown: false }
    })
    const redraw = Effect.flatMap(Clock.currentTimeMillis, (at) =>
      Ref.update(state, (s) => {
        const text = line(s.now, at - s.since, sink.columns(), label)
        if (text === undefined) {
          if (s.shown) sink.write(erase)
          return { ...s, shown: false }
        }
        sink.write(`${erase}${text}`)
        return { ...s, shown: true }
      }))
    const observe = (event: Event.Event) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        Ref.update(state, (s) => {
          const now = activity(event, s.now)
          return now._tag === s.now._tag && now._tag !== "Tool" ? s : { ...s, now, since: at }
        })).pipe(Effect.zipRight(redraw))
    yield* Effect.forkScoped(Effect.repeat(redraw, Schedule.spaced(every)))
    yield* Effect.addFinalizer(() => clear)
    return { observe, clear, redraw }
  })
