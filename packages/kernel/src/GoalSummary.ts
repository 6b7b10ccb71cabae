/**
 * One line per goal, kept by stores beside the log for listing: maintained by folding each
 * appended event, so it is never a second source of truth.
 */
import { Schema } from "effect"
import * as Event from "./Event.js"

/** Why a runner stopped without ending the goal (`Suspended`). */
export const Suspension = Schema.Struct({
  reason: Event.SuspendReason,
  detail: Schema.String,
  /** The sub-goal whose wait the goal waits on. */
  child: Schema.optional(Schema.String)
})

/** A call waiting for a person's decision: as requested, with its place in the answer. */
export const Approval = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  input: Schema.Unknown,
  /** The call's index in its answer. */
  index: Schema.NonNegativeInt
})

export const GoalSummary = Schema.Struct({
  goalId: Schema.String,
  goal: Schema.String,
  /** For a sub-goal: the goal that delegated it (`GoalSubmitted.parent`); null for a goal submitted on its own. */
  parent: Schema.NullOr(Schema.String),
  /** For a fork (`rx fork`): the goal and iteration it was forked from (`GoalSubmitted.forkedFrom`); null otherwise. */
  forkedFrom: Schema.NullOr(Event.ForkedFrom),
  status: Schema.Literal("open", "terminated"),
  /** Iterations completed. */
  iterations: Schema.NonNegativeInt,
  /** The seq the next event will take. */
  nextSeq: Schema.NonNegativeInt,
  /** The iteration of the last event. */
  lastIteration: Schema.NonNegativeInt,
  reason: Schema.NullOr(Event.Reason),
  /**
   * Why the open goal waits, as its last runner recorded (`Suspended`), until the goal moves on
   * (what others append meanwhile, a decision, a cancel, an options change, keeps it); the
   * State's `suspended`, kept here so a listing reads no log.
   */
  suspended: Schema.NullOr(Suspension),
  /** The call waiting for a person's decision, exactly as it will run if approved; null once decided, or cancelled. */
  approval: Schema.NullOr(Approval),
  submittedAt: Schema.Number,
  updatedAt: Schema.Number
})
export type GoalSummary = typeof GoalSummary.Type

/** A summary as a store's row holds it: why a goal waits, and what it was forked from, as JSON text (NULL when none). */
export const Stored = Schema.Struct({
  ...GoalSummary.fields,
  suspended: Schema.NullOr(Schema.parseJson(Suspension)),
  approval: Schema.NullOr(Schema.parseJson(Approval)),
  forkedFrom: Schema.NullOr(Schema.parseJson(Event.ForkedFrom))
})

/** A summary's fields that say why an open goal waits. */
export type Waiting = Pick<GoalSummary, "suspended" | "approval">

/** Nothing waits: a goal just submitted, or ended. */
export const notWaiting: Waiting = { suspended: null, approval: null }

/**
 * `waiting` after `event`: a `Suspended` says why; what others append (a decision, a cancel, an
 * options change) keeps it and anything else clears it, as the reducer does. An approval request
 * waits until its call is decided, rejected, started or cancelled, or the goal ends.
 */
export const waitingAfter = (waiting: Waiting, event: Event.Event): Waiting => {
  const { approval, suspended } = waiting
  switch (event._tag) {
    case "Suspended":
      return {
        suspended: event.child === undefined ? { reason: event.reason, detail: event.detail } : { reason: event.reason, detail: event.detail, child: event.child },
        approval
      }
    case "ApprovalRequested":
      return { suspended: null, approval: { callId: event.callId, tool: event.tool, input: event.input, index: event.index ?? 0 } }
    case "ApprovalDecided":
      return approval?.callId === event.callId ? { suspended, approval: null } : waiting
    case "OptionsChanged":
    case "MessageSent":
      return waiting
    case "CancelRequested":
      return approval === null ? waiting : { suspended, approval: null }
    case "ActionRejected":
      return suspended === null && (approval === null || approval.index !== event.index)
        ? waiting
        : { suspended: null, approval: approval !== null && approval.index === event.index ? null : approval }
    case "ToolStarted":
    case "Terminated":
      return suspended === null && approval === null ? waiting : notWaiting
    default:
      return suspended === null ? waiting : { suspended: null, approval }
  }
}

/** The summary after `event`; `undefined` before `GoalSubmitted`. */
export const update = (summary: GoalSummary | undefined, event: Event.Event): GoalSummary | undefined => {
  if (event._tag === "GoalSubmitted") {
    return {
      goalId: event.goalId,
      goal: event.goal,
      parent: event.parent?.goalId ?? null,
      forkedFrom: event.forkedFrom ?? null,
      status: "open",
      iterations: 0,
      nextSeq: event.seq + 1,
      lastIteration: event.iteration,
      reason: null,
      suspended: null,
      approval: null,
      submittedAt: event.at,
      updatedAt: event.at
    }
  }
  if (summary === undefined) return undefined
  const iterations = event._tag === "IterationCompleted" ? 1 : 0
  return advanced(summary, event, iterations, event._tag === "Terminated" ? event.reason : undefined, waitingAfter(summary, event))
}

/**
 * The summary moved to `last`, with `iterations` more completed and the reason if it ended. Every
 * field in one literal: a spread here gave V8 slow objects (about 1 µs per append).
 */
const advanced = (
  summary: GoalSummary,
  last: Event.Event,
  iterations: number,
  terminated: Event.Reason | undefined,
  waiting: Waiting
): GoalSummary => ({
  goalId: summary.goalId,
  goal: summary.goal,
  parent: summary.parent,
  forkedFrom: summary.forkedFrom,
  status: terminated === undefined ? summary.status : "terminated",
  iterations: summary.iterations + iterations,
  nextSeq: last.seq + 1,
  lastIteration: last.iteration,
  reason: terminated ?? summary.reason,
  suspended: waiting.suspended,
  approval: waiting.approval,
  submittedAt: summary.submittedAt,
  updatedAt: last.at
})

/** The summary after a batch of events: one object, however long the batch. */
export const updateAll = (summary: GoalSummary | undefined, events: ReadonlyArray<Event.Event>): GoalSummary | undefined => {
  let current = summary
  let iterations = 0
  let terminated: Event.Reason | undefined
  let waiting: Waiting = current ?? notWaiting
  for (const event of events) {
    if (event._tag === "GoalSubmitted" || current === undefined) {
      current = update(current, event)
      if (current !== undefined) waiting = current
      continue
    }
    if (event._tag === "IterationCompleted") iterations++
    if (event._tag === "Terminated") terminated = event.reason
    waiting = waitingAfter(waiting, event)
  }
  const last = events[events.length - 1]
  if (
    current === undefined || last === undefined ||
    (iterations === 0 && terminated === undefined && last.seq + 1 === current.nextSeq && waiting === current)
  ) {
    return current
  }
  return advanced(current, last, iterations, terminated, waiting)
}

/** Which goals `StateStore.goals` returns, newest first. */
export const Query = Schema.Struct({
  status: Schema.optional(Schema.Literal("open", "terminated")),
  /** Only the sub-goals of this goal. */
  parent: Schema.optional(Schema.String),
  /** Only the forks of this goal. */
  forkedFrom: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.Int.pipe(Schema.positive()))
})
export type Query = typeof Query.Type

/**
 * Why a goal waits after `events`, the tail of its log from (at or before) its last `Suspended`
 * and its last `ApprovalRequested`: what a store that kept no such field fills its summaries with.
 */
export const waitingOf = (events: ReadonlyArray<Event.Event>): Waiting => {
  let waiting = notWaiting
  for (const event of events) waiting = waitingAfter(waiting, event)
  return waiting
}

/**
 * What a goal is doing now, from its summary and whether a runner holds it (its lease): ended;
 * running; waiting, on a person's decision (`approval`), on a sub-goal (`sub-goal`, `child`) or
 * on its model (`outage`); or idle: open, and nothing runs it (its runner was stopped or killed,
 * or a decision came after it stopped), so only `resume` continues it.
 */
export type Phase =
  | { readonly _tag: "terminated"; readonly reason: Event.Reason | null }
  | { readonly _tag: "running" }
  | { readonly _tag: "waiting"; readonly on: "approval" | "sub-goal" | "outage"; readonly child?: string | undefined }
  | { readonly _tag: "idle"; readonly why: "stopped" | "shutdown" | "decided" }

/** The goal's `Phase`: `running` is whether a live runner holds it now. */
export const phase = (
  summary: {
    readonly status: string
    readonly reason: Event.Reason | null
    readonly suspended: { readonly reason: Event.SuspendReason; readonly child?: string | undefined } | null
    readonly approval: object | null
  },
  running: boolean
): Phase => {
  if (summary.status === "terminated") return { _tag: "terminated", reason: summary.reason }
  if (summary.approval !== null) return { _tag: "waiting", on: "approval" }
  if (running) return { _tag: "running" }
  const suspended = summary.suspended
  if (suspended === null) return { _tag: "idle", why: "stopped" }
  if (suspended.child !== undefined) return { _tag: "waiting", on: "sub-goal", child: suspended.child }
  switch (suspended.reason) {
    case "model_unavailable":
      return { _tag: "waiting", on: "outage" }
    case "awaiting_approval":
      return { _tag: "idle", why: "decided" }
    case "shutdown":
      return { _tag: "idle", why: "shutdown" }
  }
}
