/**
 * The live progress line of `rx run` and `rx resume` on a terminal: what runs now (the model, or
 * a tool with its input) and for how long, redrawn in place on stderr:
 *
 *     … waiting for the model (qwen2.5) 3.4s
 *     … running shell {"command":"npm test"} 12.0s
 *
 * The pure part says what runs after each committed event (`activity`) and how the line reads
 * (`line`); the model's thoughts are step lines (`Render.thought`). `make` draws the line on
 * Effect's Clock and erases it before any other output, so output lines never mix with it.
 */
import type { Event, State } from "@rx/kernel"
import { type Duration, Effect, Schedule, type Scope } from "effect"
import * as Render from "./Render.js"

/** What runs: a model call, or a tool call with its input. Nothing running is `undefined`. */
export type Activity =
  | { readonly _tag: "Model" }
  | { readonly _tag: "Tool"; readonly tool: string; readonly input: unknown }

/** A fresh value per model call, so a retry (a new call) is told apart from the same one going on. */
const model = (): Activity => ({ _tag: "Model" })

/**
 * What runs once `event` is committed, given what ran before (`previous`, returned as is when
 * the event changes nothing, so its timer goes on). The runner calls the model after the goal's
 * start, a finished iteration, or a failed call to it (a retry; a suspension or the end follows
 * in the same commit otherwise); each tool call runs between its `ToolStarted` and its outcome.
 * Between those the kernel only decides (nothing slow runs), and a goal that ended, is
 * suspended or waits for a person's approval runs nothing.
 */
export const activity = (event: Event.Event, previous: Activity | undefined): Activity | undefined => {
  switch (event._tag) {
    case "GoalSubmitted":
    case "IterationCompleted":
    case "ModelFailed":
      return model()
    case "ToolStarted":
      return { _tag: "Tool", tool: event.tool, input: event.input }
    // Appended by others (another process, a resume's settings): what runs goes on.
    case "OptionsChanged":
    case "CancelRequested":
      return previous
    case "ModelResponded":
    case "ActionRejected":
    case "ToolSucceeded":
    case "ToolFailed":
    case "ApprovalDecided":
    case "ApprovalRequested":
    case "Suspended":
    case "Terminated":
      return undefined
  }
}

/**
 * What runs first when a goal is resumed from `state`: a resume commits nothing before it calls
 * the model, so no event would say so. A call cut short runs again (or is checked); a call
 * awaiting approval, the next call of an answer, or a cancelled or ended goal runs nothing yet.
 */
export const resumed = (state: State.State): Activity | undefined => {
  if (state.terminated !== null || state.cancelRequested !== null) return undefined
  if (state.pending !== null) return { _tag: "Tool", tool: state.pending.tool, input: state.pending.input }
  if (state.awaiting !== null || state.answer !== null) return undefined
  return model()
}

const two = (n: number) => String(n).padStart(2, "0")

/** Elapsed time, never ahead of the clock: `3.4s`, from a minute `1m 05s`, from an hour `1h 02m 05s`. */
export const elapsed = (ms: number): string => {
  const tenths = Number.isFinite(ms) ? Math.floor(Math.max(0, ms) / 100) : 0
  if (tenths < 600) return `${Math.floor(tenths / 10)}.${tenths % 10}s`
  const seconds = Math.floor(tenths / 10)
  const hours = Math.floor(seconds / 3600)
  const minutes = Math.floor(seconds / 60) % 60
  return hours === 0 ? `${minutes}m ${two(seconds % 60)}s` : `${hours}h ${two(minutes)}m ${two(seconds % 60)}s`
}

/**
 * Terminal columns a code point takes: none for combining and zero-width marks, two for wide
 * ones (CJK, Hangul, fullwidth forms, emoji), else one. Approximate, erring wide: a line
 * counted too wide is only cut early, one counted too narrow would wrap and stay on screen.
 */
const columnsOf = (cp: number): number => {
  if ((cp >= 0x300 && cp <= 0x36f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0xfe00 && cp <= 0xfe0f) || cp === 0xfeff) return 0
  if (
    (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2300 && cp <= 0x23ff) || (cp >= 0x2600 && cp <= 0x27bf) ||
    (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) || (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f000 && cp <= 0x1faff) || (cp >= 0x20000 && cp <= 0x3fffd)
  ) return 2
  return 1
}

/** `text` in at most `room` columns, ending in `…` when cut. */
const fit = (text: string, room: number): string => {
  let used = 0
  let all = ""
  // The longest prefix that leaves a column for the `…`.
  let kept = ""
  for (const ch of text) {
    used += columnsOf(ch.codePointAt(0) ?? 0)
    if (used > room) return room <= 0 ? "" : `${kept}…`
    all += ch
    if (used < room) kept = all
  }
  return text
}

/** At most `max` UTF-16 units of `text` (no surrogate pair split), `…` when cut: only the start of a large value is worked on. */
const head = (text: string, max: number): string => {
  if (text.length <= max) return text
  const cut = /[\ud800-\udbff]$/.test(text.slice(0, max)) ? max - 1 : max
  return `${text.slice(0, cut)}…`
}

/** One line: every run of whitespace (newlines, tabs) a single space. */
const flat = (text: string) => text.replace(/\s+/g, " ").trim()

/** A tool's input as JSON; inputs come from the log, so they are JSON, but a line never fails. */
const inputText = (input: unknown): string => {
  try {
    return JSON.stringify(input) ?? ""
  } catch {
    return "(input not shown)"
  }
}

/** Characters of what runs kept for the line: wider than any terminal, small enough to redraw often. */
const describedChars = 1_000

/** What runs, as the line says it: one line, escaped, capped. Worked out once per activity, not per redraw. */
const describe = (now: Activity, label: string): string => {
  const what = now._tag === "Model"
    ? `waiting for the model${flat(label) === "" ? "" : ` (${head(label, 200)})`}`
    : `running ${head(now.tool, 200)} ${head(inputText(now.input), describedChars)}`
  return Render.terminal(flat(head(what, describedChars)))
}

/** A usable width: a terminal that reports none (or nonsense) counts as 80 columns. */
const width = (columns: number) => (Number.isFinite(columns) && columns >= 1 ? Math.floor(columns) : 80)

/**
 * The line from what runs, described, and the time so far: at most `columns - 1` wide, since a
 * line filling the last column makes some terminals wrap, and a wrapped line is not erased.
 */
const compose = (described: string, ms: number, columns: number): string => {
  const room = width(columns) - 1
  const time = elapsed(ms)
  const space = room - "… ".length - " ".length - time.length
  return space >= 1 ? `… ${fit(described, space)} ${time}` : fit(`… ${time}`, room)
}

/**
 * The line for `now` running `elapsedMs`, never wider than `columns` (one column is left free),
 * control characters escaped (`Render.terminal`), what runs cut with `…` to leave room for the
 * time. `label` names the model: `… waiting for the model (qwen2.5) 3.4s`.
 */
export const line = (now: Activity, elapsedMs: number, columns: number, label = ""): string =>
  compose(describe(now, label), elapsedMs, columns)

/** Where the line is drawn: a terminal's stream (stderr) and its width now. */
export interface Sink {
  readonly write: (text: string) => void
  readonly columns: () => number
}

/** A live progress line, drawn until its scope closes. */
export interface Progress {
  /** Note a committed event: what runs now, timed from now, drawn at once. */
  readonly observe: (event: Event.Event) => Effect.Effect<void>
  /** Name the model in the line from now on. */
  readonly relabel: (label: string) => Effect.Effect<void>
  /** Say what runs now (`resumed(state)` at the start of a resume), timed from now. */
  readonly set: (now: Activity | undefined) => Effect.Effect<void>
  /** Erase the line, if shown (before other output to the terminal). */
  readonly clear: Effect.Effect<void>
  /** Draw the line again, if something runs (after other output). */
  readonly redraw: Effect.Effect<void>
  /** Print a line of output to the sink: the progress line is erased first and drawn after. Escaped. */
  readonly print: (text: string) => Effect.Effect<void>
}

/** Carriage return, then erase the whole line: the cursor is left at its start. */
export const erase = "\r\u001b[2K"

/**
 * A progress line on `sink`, redrawn every `every` by a fiber of the scope; closing the scope
 * stops it and erases the line. `label` names the model in the line. Time is Effect's Clock,
 * read when built (so a TestClock drives it). `clear` and `redraw` are synchronous and may be
 * run with `Effect.runSync` from a write hook. A sink whose `write` throws is not written again.
 */
export const make = (sink: Sink, named = "", every: Duration.DurationInput = "200 millis"): Effect.Effect<Progress, never, Scope.Scope> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    // The state lives here and is only read and written inside `Effect.sync`, so each draw is
    // one step no other fiber (the ticker, an observer) can split.
    let now: Activity | undefined
    let label = named
    let described = ""
    let since = clock.unsafeCurrentTimeMillis()
    /** What the terminal shows of the line now ("" when nothing). */
    let shown = ""
    let closed = false
    let broken = false

    const put = (text: string) => {
      if (broken) return
      try {
        sink.write(text)
      } catch {
        // A terminal gone (EPIPE, EIO): the progress line is not worth failing the run for.
        broken = true
      }
    }
    const wipe = () => {
      if (shown === "") return
      put(erase)
      shown = ""
    }
    const draw = () => {
      if (closed || now === undefined) return wipe()
      const text = compose(described, clock.unsafeCurrentTimeMillis() - since, sink.columns())
      // Unchanged (the same tenth of a second, or second past a minute): nothing to write.
      if (text === shown) return
      put(`${erase}${text}`)
      shown = text
    }
    const start = (next: Activity | undefined) => {
      now = next
      described = next === undefined ? "" : describe(next, label)
      since = clock.unsafeCurrentTimeMillis()
      draw()
    }

    const set = (next: Activity | undefined) => Effect.sync(() => start(next))
    const observe = (event: Event.Event) =>
      Effect.sync(() => {
        const next = activity(event, now)
        // The same activity going on (an options change, a cancel request) keeps its timer.
        if (next !== now) start(next)
      })
    const clear = Effect.sync(wipe)
    const redraw = Effect.sync(draw)
    const print = (text: string) =>
      Effect.sync(() => {
        wipe()
        put(`${Render.terminal(text)}\n`)
        draw()
      })

    // Added before the ticker is forked, so it runs after the ticker is interrupted: nothing draws after it.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        wipe()
        closed = true
      })
    )
    yield* Effect.forkScoped(Effect.repeat(redraw, Schedule.spaced(every)))
    const relabel = (text: string) => Effect.sync(() => {
      label = text
    })
    return { observe, relabel, set, clear, redraw, print }
  })
