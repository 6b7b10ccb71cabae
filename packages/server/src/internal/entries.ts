/** The Schemas of `View`: a goal, its steps and their entries. */
import { Event, LanguageModel, Options, State } from "@rx/kernel"
import { Schema } from "effect"

const seq = Schema.Int
const index = Schema.optional(Schema.Int)

/** The model's answer: its text, each call it made, what it cost, and why it stopped (`length`: cut off). */
export const ModelResponded = Schema.TaggedStruct("ModelResponded", {
  seq,
  text: Schema.String,
  calls: Schema.Array(Schema.Struct({ name: Schema.String, arguments: Schema.String })),
  usage: LanguageModel.Usage,
  finishReason: Schema.optional(Schema.String)
})

export const ModelFailed = Schema.TaggedStruct("ModelFailed", { seq, message: Schema.String })

/** An answer, or one call of it (`index`), that was not run, with what the model said. */
export const ActionRejected = Schema.TaggedStruct("ActionRejected", {
  seq,
  kind: Event.RejectionKind,
  reason: Schema.String,
  index,
  tool: Schema.optional(Schema.String),
  raw: Schema.String
})

/**
 * A call, from its start (`seq`) to its outcome (`endSeq`; the same seq when the log does not hold
 * its start, and then its `input` is `null`): `running` until it has one, `ok`,
 * `command failed` (a command that ran and did not exit 0: `failed` says how, `stderrLastLine`
 * the last line it wrote there), or the kind of the tool's error (`unknown`: rx stopped during the
 * call, so its duration is `null`, and `spanMs` is the time from its start to that record, rx's
 * downtime included).
 */
export const Call = Schema.TaggedStruct("Call", {
  seq,
  callId: Schema.String,
  tool: Schema.String,
  index,
  input: Schema.Unknown,
  outcome: Schema.String,
  endSeq: Schema.optional(seq),
  output: Schema.optional(Schema.Unknown),
  error: Schema.optional(Schema.Struct({ kind: Schema.String, message: Schema.String })),
  durationMs: Schema.optional(Schema.NullOr(Schema.Number)),
  spanMs: Schema.optional(Schema.Number),
  failed: Schema.optional(Schema.String),
  stderrLastLine: Schema.optional(Schema.String)
})

export const ApprovalRequested = Schema.TaggedStruct("ApprovalRequested", {
  seq,
  at: Schema.Number,
  callId: Schema.String,
  tool: Schema.String,
  index,
  input: Schema.Unknown
})

export const ApprovalDecided = Schema.TaggedStruct("ApprovalDecided", {
  seq,
  at: Schema.Number,
  callId: Schema.String,
  approved: Schema.Boolean,
  reason: Schema.String,
  by: Schema.String
})

export const Suspended = Schema.TaggedStruct("Suspended", {
  seq,
  at: Schema.Number,
  reason: Event.SuspendReason,
  detail: Schema.String,
  child: Schema.optional(Schema.String)
})

export const CancelRequested = Schema.TaggedStruct("CancelRequested", { seq, reason: Schema.String })

/** One option a resume changed: its new value (absent: unset) and the one before (absent: unset). */
export const Change = Schema.Struct({ name: Schema.String, value: Schema.optional(Schema.Unknown), was: Schema.optional(Schema.Unknown) })
export type Change = typeof Change.Type

/** What a resume changed in the goal's options, from the options before it: the limits, then the recorded settings. */
export const OptionsChanged = Schema.TaggedStruct("OptionsChanged", { seq, at: Schema.Number, changes: Schema.Array(Change) })

export const Terminated = Schema.TaggedStruct("Terminated", { seq, reason: Event.Reason, detail: Schema.String })

export const MessageSent = Schema.TaggedStruct("MessageSent", { seq, at: Schema.Number, by: Schema.String, text: Schema.String })

/** A summary of earlier steps, or (`failed`) why none was made. */
const { cut, failed, from, text, to, usage } = Event.TurnsSummarised.fields
export const TurnsSummarised = Schema.TaggedStruct("TurnsSummarised", { seq, from, to, text, usage, cut, failed })

/** The state after the step, as the kernel recorded it. */
const { consecutiveFailures, consecutiveMalformed, idleIterations, repeats, toolCalls } = Event.Summary.fields
export const IterationCompleted = Schema.TaggedStruct("IterationCompleted", { seq, toolCalls, consecutiveFailures, consecutiveMalformed, idleIterations, repeats })

export const Entry = Schema.Union(
  ModelResponded,
  ModelFailed,
  ActionRejected,
  Call,
  ApprovalRequested,
  ApprovalDecided,
  Suspended,
  CancelRequested,
  OptionsChanged,
  Terminated,
  MessageSent,
  TurnsSummarised,
  IterationCompleted
)
export type Entry = typeof Entry.Type

/** An iteration's entries (`step`), or (`summary`) a summary of earlier steps, shown as a step of its own. */
export const Step = Schema.Struct({
  step: Schema.Int,
  summary: Schema.optional(Schema.Literal(true)),
  entries: Schema.Array(Entry)
})
export type Step = typeof Step.Type

/** What a goal does now (`GoalSummary.Phase`), encoded as `{"state": "running" | "waiting" | "idle" | "terminated", ...}`. */
export const Phase = Schema.Union(
  Schema.Struct({ state: Schema.Literal("terminated"), reason: Schema.NullOr(Event.Reason) }),
  Schema.Struct({ state: Schema.Literal("running") }),
  Schema.Struct({ state: Schema.Literal("waiting"), on: Schema.Literal("approval", "sub-goal", "outage"), child: Schema.optional(Schema.String) }),
  Schema.Struct({ state: Schema.Literal("idle"), why: Schema.Literal("stopped", "shutdown", "decided") })
).pipe(Schema.rename({ state: "_tag" }))

/** A sub-goal as its parent's view lists it. */
export const Child = Schema.Struct({
  goalId: Schema.String,
  goal: Schema.String,
  status: Schema.String,
  phase: Phase,
  reason: Schema.NullOr(Schema.String),
  suspended: State.State.fields.suspended
})
export type Child = typeof Child.Type

/** What a resume changed in the options, when, and after which iteration (0: before the first step). */
export const Changed = Schema.Struct({ seq, at: Schema.Number, iteration: Schema.Int, changes: Schema.Array(Change) })

/**
 * A goal whole, as `rx inspect` shows it: what it was asked and with what, where it is now
 * (`phase`, when a store says whether a runner holds it), its place in its tree, its steps, and
 * why it stopped (`termination`, the audit's lines).
 */
export const Goal = Schema.Struct({
  goalId: Schema.String,
  goal: Schema.String,
  submittedAt: Schema.DateFromString,
  status: Schema.Literal("open", "terminated"),
  phase: Schema.optional(Phase),
  terminated: State.State.fields.terminated,
  suspended: State.State.fields.suspended,
  iterations: Schema.Int,
  events: Schema.Int,
  usage: State.State.fields.usage,
  parent: Schema.NullOr(Event.Parent),
  continues: Schema.NullOr(Schema.String),
  /** How the goal it continues ended, and what this one was told. */
  continuedWith: Schema.NullOr(Schema.Struct({ reason: Schema.String, text: Schema.String })),
  continuedBy: Schema.Array(Schema.String),
  children: Schema.Array(Child),
  forkedFrom: Schema.NullOr(Event.ForkedFrom),
  forks: Schema.Array(Event.ForkedFrom),
  options: Options.Options,
  optionsChanged: Schema.Array(Changed),
  instructions: Schema.optional(Schema.String),
  tools: Schema.Array(Schema.String),
  steps: Schema.Array(Step),
  termination: Schema.Array(Schema.String)
})
export type Goal = typeof Goal.Type
