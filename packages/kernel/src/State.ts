/**
 * What deciding the next step needs, and nothing more: a pure, total fold over the events.
 * Memory stays flat: only the last `maxTurns` turns are kept, their text already capped.
 */
import { Schema } from "effect"
import * as Event from "./Event.js"
import { canonical, fingerprint, truncate } from "./internal/json.js"
import * as Options from "./Options.js"
import * as Tool from "./Tool.js"

/** Turns kept for the prompt; older ones are only counted. */
export const maxTurns = 32
/** Characters of one tool output, assistant text or rejection kept in State. */
export const maxTurnText = 8_000

/** One model answer and what came of it, as the prompt shows it. */
export const Turn = Schema.Struct({
  iteration: Schema.NonNegativeInt,
  text: Schema.String,
  /** The call that was started, if the answer held a valid one. */
  call: Schema.NullOr(Schema.Struct({ tool: Schema.String, input: Schema.Unknown })),
  result: Schema.NullOr(Schema.Struct({ status: Schema.Literal("ok", "error", "rejected"), content: Schema.String }))
})
export type Turn = typeof Turn.Type

/** A started call with no recorded outcome yet. */
export const Pending = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  input: Schema.Unknown,
  startedAt: Schema.Number
})
export type Pending = typeof Pending.Type

export const State = Schema.Struct({
  goalId: Schema.String,
  goal: Schema.String,
  options: Options.Options,
  tools: Schema.Array(Tool.Spec),
  /** The behaviour version whose rules run the goal (`Behaviour`). */
  behaviour: Schema.Int,
  /** The seq the next event takes: the number of events folded. */
  seq: Schema.NonNegativeInt,
  /** The iteration of the last event. */
  iteration: Schema.NonNegativeInt,
  /** Iterations completed. */
  completed: Schema.NonNegativeInt,
  pending: Schema.NullOr(Pending),
  turns: Schema.Array(Turn),
  /** Turns dropped from `turns`. */
  omitted: Schema.NonNegativeInt,
  toolCalls: Schema.NonNegativeInt,
  consecutiveFailures: Schema.NonNegativeInt,
  consecutiveMalformed: Schema.NonNegativeInt,
  /** Completed iterations since the last successful tool call. */
  idleIterations: Schema.NonNegativeInt,
  /** Whether the current iteration had a successful tool call. */
  progressed: Schema.Boolean,
  /** Fingerprint of the last call and its result, and how many times in a row it was seen. */
  repeat: Schema.Struct({ signature: Schema.String, count: Schema.NonNegativeInt }),
  /** Fingerprints of the latest calls and results, oldest first, for cycle detection. */
  recent: Schema.Array(Schema.String),
  last: Event.Summary.fields.last,
  fatal: Schema.NullOr(Tool.Failure),
  /** The model could not answer (after the adapter's own retries). */
  modelFailure: Schema.NullOr(Schema.String),
  usage: Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number }),
  cancelRequested: Schema.NullOr(Schema.String),
  terminated: Schema.NullOr(Schema.Struct({ reason: Event.Reason, detail: Schema.String }))
})
export type State = typeof State.Type

/** The version of the State encoding; a snapshot of another version is ignored and rebuilt. */
export const version = 2

/** The State before any event. */
export const empty = (goalId: string): State => ({
  goalId,
  goal: "",
  options: Options.defaults,
  tools: [],
  behaviour: 1,
  seq: 0,
  iteration: 0,
  completed: 0,
  pending: null,
  turns: [],
  omitted: 0,
  toolCalls: 0,
  consecutiveFailures: 0,
  consecutiveMalformed: 0,
  idleIterations: 0,
  progressed: false,
  repeat: { signature: "", count: 0 },
  recent: [],
  last: "none",
  fatal: null,
  modelFailure: null,
  usage: { inputTokens: 0, outputTokens: 0 },
  cancelRequested: null,
  terminated: null
})

type Mutable = { -readonly [K in keyof State]: State[K] }

/**
 * A fresh copy with every field listed in one literal: all States share one shape, which keeps
 * V8's objects fast (spreading a large object gives slow dictionary-mode objects).
 */
const copy = (s: State, seq: number, iteration: number): Mutable => ({
  goalId: s.goalId,
  goal: s.goal,
  options: s.options,
  tools: s.tools,
  behaviour: s.behaviour,
  seq,
  iteration,
  completed: s.completed,
  pending: s.pending,
  turns: s.turns,
  omitted: s.omitted,
  toolCalls: s.toolCalls,
  consecutiveFailures: s.consecutiveFailures,
  consecutiveMalformed: s.consecutiveMalformed,
  idleIterations: s.idleIterations,
  progressed: s.progressed,
  repeat: s.repeat,
  recent: s.recent,
  last: s.last,
  fatal: s.fatal,
  modelFailure: s.modelFailure,
  usage: s.usage,
  cancelRequested: s.cancelRequested,
  terminated: s.terminated
})

/** Apply one event. Pure and total: every event in every State gives a new State. */
export const reduce = (state: State, event: Event.Event): State => {
  const iteration = event.iteration
  const next = copy(state, event.seq + 1, iteration)
  switch (event._tag) {
    case "GoalSubmitted":
      next.goalId = event.goalId
      next.goal = event.goal
      next.options = event.options
      next.tools = event.tools
      next.behaviour = event.behaviour
      return next
    case "ModelResponded": {
      const { response } = event
      const turn: Turn = { iteration, text: truncate(response.text, maxTurnText), call: null, result: null }
      const full = state.turns.length >= maxTurns
      next.turns = full ? [...state.turns.slice(1), turn] : [...state.turns, turn]
      next.omitted = full ? state.omitted + 1 : state.omitted
      next.progressed = false
      next.usage = {
        inputTokens: state.usage.inputTokens + response.usage.inputTokens,
        outputTokens: state.usage.outputTokens + response.usage.outputTokens
      }
      return next
    }
    case "ModelFailed":
      next.modelFailure = event.message
      return next
    case "ActionRejected":
      next.turns = withResult(state.turns, iteration, { status: "rejected", content: truncate(event.reason, maxTurnText) })
      next.consecutiveMalformed = state.consecutiveMalformed + 1
      next.last = "rejected"
      return next
    case "ToolStarted":
      next.turns = updateTurn(state.turns, iteration, (turn) => ({ ...turn, call: { tool: event.tool, input: event.input } }))
      next.pending = { callId: event.callId, tool: event.tool, input: event.input, startedAt: event.at }
      next.consecutiveMalformed = 0
      next.toolCalls = state.toolCalls + 1
      return next
    case "ToolSucceeded": {
      const full = canonical(event.output)
      next.turns = withResult(state.turns, iteration, { status: "ok", content: truncate(full, maxTurnText) })
      next.pending = null
      next.consecutiveFailures = 0
      next.progressed = true
      next.repeat = repeatOf(state, event.tool, "ok", full)
      next.recent = remember(state.recent, next.repeat.signature)
      next.last = "ok"
      return next
    }
    case "ToolFailed": {
      const full = `${event.error.kind} error: ${event.error.message}`
      next.turns = withResult(state.turns, iteration, { status: "error", content: truncate(full, maxTurnText) })
      next.pending = null
      next.consecutiveFailures = state.consecutiveFailures + 1
      if (event.error.kind === "fatal") next.fatal = event.error
      next.repeat = repeatOf(state, event.tool, "error", full + canonical(event.error.details ?? null))
      next.recent = remember(state.recent, next.repeat.signature)
      next.last = "error"
      return next
    }
    case "IterationCompleted":
      next.completed = state.completed + 1
      next.idleIterations = state.progressed ? 0 : state.idleIterations + 1
      next.progressed = false
      return next
    case "CancelRequested":
      next.cancelRequested = state.cancelRequested ?? event.reason
      return next
    case "OptionsChanged":
      next.options = event.options
      return next
    case "Terminated":
      next.pending = null
      next.terminated = { reason: event.reason, detail: event.detail }
      return next
  }
}

/** Fold events over a State. */
export const fold = (state: State, events: Iterable<Event.Event>): State => {
  let current = state
  for (const event of events) current = reduce(current, event)
  return current
}

/** The State of a goal from its whole log. */
export const fromEvents = (goalId: string, events: Iterable<Event.Event>): State => fold(empty(goalId), events)

/** The summary recorded in `IterationCompleted`. */
export const summary = (state: State): Event.Summary => ({
  toolCalls: state.toolCalls,
  consecutiveFailures: state.consecutiveFailures,
  consecutiveMalformed: state.consecutiveMalformed,
  idleIterations: state.idleIterations,
  repeats: state.repeat.count,
  last: state.last,
  fingerprint: state.repeat.signature
})

/** The turns with the newest one updated, if it belongs to `iteration`; otherwise unchanged. */
const updateTurn = (turns: ReadonlyArray<Turn>, iteration: number, f: (turn: Turn) => Turn): ReadonlyArray<Turn> => {
  const index = turns.length - 1
  const turn = turns[index]
  if (turn === undefined || turn.iteration !== iteration) return turns
  const updated = turns.slice()
  updated[index] = f(turn)
  return updated
}

const withResult = (turns: ReadonlyArray<Turn>, iteration: number, result: NonNullable<Turn["result"]>) =>
  updateTurn(turns, iteration, (turn) => ({ ...turn, result }))

/** Fingerprints kept in `recent`: enough for the longest cycle period at any sensible `maxRepeats`. */
export const maxRecent = 64

const remember = (recent: ReadonlyArray<string>, signature: string): ReadonlyArray<string> =>
  recent.length >= maxRecent ? [...recent.slice(1), signature] : [...recent, signature]

const repeatOf = (state: State, tool: string, status: string, content: string): State["repeat"] => {
  const input = state.pending?.tool === tool ? canonical(state.pending.input) : ""
  const signature = fingerprint(`${tool}\u0000${input}\u0000${status}\u0000${content}`)
  return { signature, count: signature === state.repeat.signature ? state.repeat.count + 1 : 1 }
}
