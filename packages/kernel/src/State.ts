/**
 * What deciding the next step needs, and nothing more: a pure, total fold over the events.
 * Memory stays flat: only the last `maxTurns` turns are kept, their text already capped.
 */
import { Schema } from "effect"
import * as Behaviour from "./Behaviour.js"
import * as Event from "./Event.js"
import { canonical, fingerprint, truncate } from "./internal/json.js"
import * as LanguageModel from "./LanguageModel.js"
import * as Options from "./Options.js"
import * as Tool from "./Tool.js"

/** Turns kept for the prompt; older ones are only counted. */
export const maxTurns = 32
/** Characters of one tool output, assistant text or rejection kept in State. */
export const maxTurnText = 8_000

/** What came of a call, or of an answer, as the model is shown it. */
export const Result = Schema.Struct({ status: Schema.Literal("ok", "error", "rejected"), content: Schema.String })
export type Result = typeof Result.Type

/** One model answer and what came of it, as the prompt shows it. */
export const Turn = Schema.Struct({
  iteration: Schema.NonNegativeInt,
  text: Schema.String,
  /** The answer's calls in order, each with its result once it has one. */
  calls: Schema.Array(Schema.Struct({ tool: Schema.String, input: Schema.Unknown, result: Schema.NullOr(Result) })),
  /** Why the answer as a whole was not executed (no call to show). */
  result: Schema.NullOr(Result),
  /** Messages sent to the goal that the request for this answer showed first (`MessageSent`). */
  heard: Schema.optional(Schema.Array(Schema.Struct({ by: Schema.String, text: Schema.String })))
})
export type Turn = typeof Turn.Type

/** The answer being worked through: its calls run one by one, in order. */
export const Answer = Schema.Struct({
  response: LanguageModel.Response,
  /** How many calls the answer makes (a text action, or an answer with none, counts as one). */
  calls: Schema.NonNegativeInt,
  /** The index of the next call to decide. */
  next: Schema.NonNegativeInt,
  started: Schema.Boolean,
  rejected: Schema.Boolean
})
export type Answer = typeof Answer.Type

/** A call waiting for a person's decision, exactly as it will run. */
export const Awaiting = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  input: Schema.Unknown,
  index: Schema.NonNegativeInt,
  decision: Schema.NullOr(Schema.Struct({ approved: Schema.Boolean, reason: Schema.String, by: Schema.String }))
})
export type Awaiting = typeof Awaiting.Type

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
  /** Standing instructions shown with the goal ("" when none). */
  instructions: Schema.String,
  /** The behaviour version whose rules run the goal (`Behaviour`). */
  behaviour: Schema.Int,
  /** The ended goal this one continues, and what it did (`GoalSubmitted.continues`). */
  continues: Schema.NullOr(Event.Continues),
  /** The seq the next event takes: the number of events folded. */
  seq: Schema.NonNegativeInt,
  /** The iteration of the last event. */
  iteration: Schema.NonNegativeInt,
  /** Iterations completed. */
  completed: Schema.NonNegativeInt,
  pending: Schema.NullOr(Pending),
  /** The current answer while its calls are worked through; null between iterations. */
  answer: Schema.NullOr(Answer),
  awaiting: Schema.NullOr(Awaiting),
  /** Why the last runner stopped without ending the goal, until the goal moves on. */
  suspended: Schema.NullOr(Schema.Struct({ reason: Event.SuspendReason, detail: Schema.String, child: Schema.optional(Schema.String) })),
  turns: Schema.Array(Turn),
  /** Turns dropped from `turns`. */
  omitted: Schema.NonNegativeInt,
  /**
   * Behaviour 5: the turns summarised (`TurnsSummarised`): those of iterations up to `through` are
   * shown as `text`, the latest summary ("" when none could be had), and no longer as turns;
   * `lost` counts the turns whose summary failed, which the prompt only counts.
   */
  compacted: Schema.Struct({ through: Schema.NonNegativeInt, text: Schema.String, lost: Schema.NonNegativeInt }),
  /** Messages sent to the goal not shown to the model yet, oldest first; its next request shows them. */
  inbox: Schema.Array(Schema.Struct({ by: Schema.String, text: Schema.String })),
  toolCalls: Schema.NonNegativeInt,
  consecutiveFailures: Schema.NonNegativeInt,
  consecutiveMalformed: Schema.NonNegativeInt,
  /** Completed iterations since the last successful tool call. */
  idleIterations: Schema.NonNegativeInt,
  /** Whether the current iteration had a successful tool call. */
  progressed: Schema.Boolean,
  /** Fingerprint of the last call and its result, and how many times in a row it was seen. */
  repeat: Schema.Struct({ signature: Schema.String, count: Schema.NonNegativeInt }),
  /**
   * Behaviour 3: the tool and observation of the last result (`ToolSucceeded.observed`), and how
   * many results in a row observed the same, whatever their calls' arguments; empty after a
   * result that cannot tell (a failure, a tool that does not say).
   */
  observed: Schema.Struct({ signature: Schema.String, count: Schema.NonNegativeInt }),
  /** Fingerprints of the latest calls and results, oldest first, for cycle detection. */
  recent: Schema.Array(Schema.String),
  /** A fingerprint of every call and full result of the current answer, chained: replay notices any changed output. */
  answered: Schema.String,
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
export const version = 4

/** The State before any event. */
export const empty = (goalId: string): State => ({
  goalId,
  goal: "",
  options: Options.defaults,
  tools: [],
  instructions: "",
  behaviour: 1,
  continues: null,
  seq: 0,
  iteration: 0,
  completed: 0,
  pending: null,
  answer: null,
  awaiting: null,
  suspended: null,
  turns: [],
  omitted: 0,
  compacted: noCompaction,
  inbox: [],
  toolCalls: 0,
  consecutiveFailures: 0,
  consecutiveMalformed: 0,
  idleIterations: 0,
  progressed: false,
  repeat: { signature: "", count: 0 },
  observed: noObservation,
  recent: [],
  answered: "",
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
  instructions: s.instructions,
  behaviour: s.behaviour,
  continues: s.continues,
  seq,
  iteration,
  completed: s.completed,
  pending: s.pending,
  answer: s.answer,
  awaiting: s.awaiting,
  suspended: null,
  turns: s.turns,
  omitted: s.omitted,
  compacted: s.compacted,
  inbox: s.inbox,
  toolCalls: s.toolCalls,
  consecutiveFailures: s.consecutiveFailures,
  consecutiveMalformed: s.consecutiveMalformed,
  idleIterations: s.idleIterations,
  progressed: s.progressed,
  repeat: s.repeat,
  observed: s.observed,
  recent: s.recent,
  answered: s.answered,
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
      next.instructions = event.instructions ?? ""
      next.behaviour = event.behaviour
      next.continues = event.continues ?? null
      return next
    case "ModelResponded": {
      const { response } = event
      const heard = event.heard === undefined ? undefined : state.inbox.slice(0, event.heard)
      const turn: Turn = heard === undefined
        ? { iteration, text: truncate(response.text, maxTurnText), calls: [], result: null }
        : { iteration, text: truncate(response.text, maxTurnText), calls: [], result: null, heard }
      if (event.heard !== undefined) next.inbox = state.inbox.slice(event.heard)
      const calls = Behaviour.rules(state.behaviour).multiCall ? Math.max(1, response.toolCalls.length) : 1
      next.answer = { response, calls, next: 0, started: false, rejected: false }
      next.answered = ""
      next.turns = appended(state.turns, turn, maxTurns)
      next.omitted = state.turns.length >= maxTurns ? state.omitted + 1 : state.omitted
      next.progressed = false
      next.usage = {
        inputTokens: state.usage.inputTokens + response.usage.inputTokens,
        outputTokens: state.usage.outputTokens + response.usage.outputTokens
      }
      return next
    }
    case "ModelFailed":
      // A model that may answer later suspends the goal; one that never will ends it.
      if (!Behaviour.rules(state.behaviour).suspendWhenUnavailable || (event.permanent ?? LanguageModel.isPermanent(event.status))) {
        next.modelFailure = event.message
      }
      return next
    case "ActionRejected": {
      const result: Result = { status: "rejected", content: truncate(event.reason, maxTurnText) }
      const call = event.index === undefined ? undefined : { tool: event.tool ?? "", input: event.raw, result }
      next.turns = updateTurn(state.turns, iteration, (turn) =>
        call === undefined ? { ...turn, result } : { ...turn, calls: [...turn.calls, call] })
      if (state.answer !== null) {
        next.answer = {
          ...state.answer,
          next: event.index === undefined ? state.answer.calls : event.index + 1,
          rejected: state.answer.rejected || event.kind !== "denied"
        }
      }
      if (state.awaiting?.index === event.index) next.awaiting = null
      if (event.kind !== "denied") next.last = "rejected"
      return next
    }
    case "ToolStarted":
      next.turns = updateTurn(state.turns, iteration, (turn) => ({
        ...turn,
        calls: [...turn.calls, { tool: event.tool, input: event.input, result: null }]
      }))
      next.pending = { callId: event.callId, tool: event.tool, input: event.input, startedAt: event.at }
      if (state.answer !== null) next.answer = { ...state.answer, next: (event.index ?? 0) + 1, started: true }
      next.awaiting = null
      next.consecutiveMalformed = 0
      next.toolCalls = state.toolCalls + 1
      return next
    case "ApprovalRequested":
      next.awaiting = { callId: event.callId, tool: event.tool, input: event.input, index: event.index ?? 0, decision: null }
      return next
    case "ApprovalDecided":
      if (state.awaiting?.callId === event.callId && state.awaiting.decision === null) {
        next.awaiting = { ...state.awaiting, decision: { approved: event.approved, reason: event.reason, by: event.by } }
      }
      next.suspended = state.suspended
      return next
    case "Suspended":
      next.suspended = event.child === undefined ? { reason: event.reason, detail: event.detail } : { reason: event.reason, detail: event.detail, child: event.child }
      return next
    case "ToolSucceeded": {
      const full = canonical(event.output)
      next.turns = withCallResult(state.turns, iteration, { status: "ok", content: truncate(full, maxTurnText) })
      next.pending = null
      next.consecutiveFailures = 0
      next.progressed = true
      next.repeat = repeatOf(state, event.tool, "ok", full)
      if (Behaviour.rules(state.behaviour).sameResults) next.observed = observedOf(state, event.tool, event.observed)
      next.recent = remember(state.recent, next.repeat.signature)
      next.answered = fingerprint(state.answered + next.repeat.signature)
      next.last = "ok"
      // Behaviour 4: what the call spent (a sub-goal's tokens) counts toward the budget.
      if (event.usage !== undefined) {
        next.usage = {
          inputTokens: state.usage.inputTokens + event.usage.inputTokens,
          outputTokens: state.usage.outputTokens + event.usage.outputTokens
        }
      }
      return next
    }
    case "ToolFailed": {
      const full = `${event.error.kind} error: ${event.error.message}`
      next.turns = withCallResult(state.turns, iteration, { status: "error", content: truncate(full, maxTurnText) })
      next.pending = null
      next.consecutiveFailures = state.consecutiveFailures + 1
      if (event.error.kind === "fatal") next.fatal = event.error
      next.repeat = repeatOf(state, event.tool, "error", full + canonical(event.error.details ?? null))
      next.observed = noObservation
      next.recent = remember(state.recent, next.repeat.signature)
      next.answered = fingerprint(state.answered + next.repeat.signature)
      next.last = "error"
      return next
    }
    case "IterationCompleted":
      // An answer none of whose calls could start counts as malformed.
      if (state.answer !== null && state.answer.rejected && !state.answer.started) {
        next.consecutiveMalformed = state.consecutiveMalformed + 1
      }
      next.answer = null
      next.completed = state.completed + 1
      next.idleIterations = state.progressed ? 0 : state.idleIterations + 1
      next.progressed = false
      return next
    case "CancelRequested":
      next.cancelRequested = state.cancelRequested ?? event.reason
      next.suspended = state.suspended
      return next
    case "OptionsChanged":
      next.options = event.options
      next.suspended = state.suspended
      return next
    case "MessageSent":
      next.inbox = [...state.inbox, { by: event.by, text: truncate(event.text, maxTurnText) }]
      next.suspended = state.suspended
      return next
    case "TurnsSummarised": {
      const { compacted } = state
      const lost = event.failed === undefined ? 0 : state.turns.filter((turn) => turn.iteration >= event.from && turn.iteration <= event.to).length
      next.compacted = { through: Math.max(compacted.through, event.to), text: event.failed === undefined ? event.text : compacted.text, lost: compacted.lost + lost }
      next.usage = {
        inputTokens: state.usage.inputTokens + event.usage.inputTokens,
        outputTokens: state.usage.outputTokens + event.usage.outputTokens
      }
      return next
    }
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
  // rx 0.1 answers held one call: the fingerprint of that call and its result.
  fingerprint: Behaviour.rules(state.behaviour).multiCall ? state.answered : state.repeat.signature
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

/** The turn with its last call's result set. */
const withCallResult = (turns: ReadonlyArray<Turn>, iteration: number, result: Result) =>
  updateTurn(turns, iteration, (turn) => {
    const last = turn.calls[turn.calls.length - 1]
    return last === undefined ? turn : { ...turn, calls: [...turn.calls.slice(0, -1), { ...last, result }] }
  })

/** Fingerprints kept in `recent`: enough for the longest cycle period at any sensible `maxRepeats`. */
export const maxRecent = 64

const remember = (recent: ReadonlyArray<string>, signature: string): ReadonlyArray<string> => appended(recent, signature, maxRecent)

/** `items` with `item` appended, the oldest dropped beyond `max`: one new array. */
const appended = <A>(items: ReadonlyArray<A>, item: A, max: number): ReadonlyArray<A> => {
  const from = items.length >= max ? 1 : 0
  const next = new Array<A>(items.length - from + 1)
  for (let i = from; i < items.length; i++) next[i - from] = items[i] as A
  next[next.length - 1] = item
  return next
}

const noObservation: State["observed"] = { signature: "", count: 0 }
const noCompaction: State["compacted"] = { through: 0, text: "", lost: 0 }

/** After a result of `tool` that observed `observed` (if it says): how many in a row observed the same. */
const observedOf = (state: State, tool: string, observed: string | undefined): State["observed"] => {
  if (observed === undefined) return noObservation
  const signature = `${tool}\u0000${observed}`
  return { signature, count: signature === state.observed.signature ? state.observed.count + 1 : 1 }
}

const repeatOf = (state: State, tool: string, status: string, content: string): State["repeat"] => {
  const input = state.pending?.tool === tool ? canonical(state.pending.input) : ""
  const signature = fingerprint(`${tool}\u0000${input}\u0000${status}\u0000${content}`)
  return { signature, count: signature === state.repeat.signature ? state.repeat.count + 1 : 1 }
}
