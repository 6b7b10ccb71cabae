/**
 * The events of a goal's log: the only source of truth. Each carries `goalId`, `seq` (0, 1,
 * 2, ... per goal, no gaps), `iteration` and `at` (epoch milliseconds, from Effect's Clock).
 */
import { Either, ParseResult, Schema } from "effect"
import { compile } from "./internal/guard.js"
import * as LanguageModel from "./LanguageModel.js"
import { Options } from "./Options.js"
import * as Settings from "./Settings.js"
import * as Tool from "./Tool.js"

/**
 * The version of the event encoding written by this rx; older versions are upcast on read.
 * 1: rx 0.1. 2: `GoalSubmitted.behaviour`, `ActionRejected.validation`. 3: `Options.settings`.
 * 4: sub-goals: `GoalSubmitted.parent`, `ToolSucceeded.usage`, `Suspended.child` (optional fields
 * no older event has, so version 3 is read as written). 5: long goals: `TurnsSummarised`,
 * `MessageSent`, `ModelResponded.heard`, `GoalSubmitted.continues` (what no older log has, so
 * version 4 is read as written).
 */
export const version = 5

const Base = {
  goalId: Schema.String,
  seq: Schema.NonNegativeInt,
  iteration: Schema.NonNegativeInt,
  at: Schema.Number
}

/** Why a run ended. */
export const Reason = Schema.Literal(
  "done",
  "max_iterations",
  "fatal_error",
  "repeated_failure",
  "malformed_output",
  "no_progress",
  "cancelled",
  "token_budget"
)
export type Reason = typeof Reason.Type

/** Why an answer was not executed. */
export const RejectionKind = Schema.Literal(
  "cut_off",
  "no_action",
  "bad_json",
  "unknown_tool",
  "invalid_input",
  /** Longer than `maxAnswerChars`: cut before it was recorded. */
  "too_large",
  /** A call the run's approval policy, or a person, does not allow: it never ran. */
  "denied",
  /** A call past `maxCallsPerAnswer` in one answer: it never ran. */
  "too_many_calls"
)
export type RejectionKind = typeof RejectionKind.Type

/** Why a runner stopped without ending the goal; `resume` continues it. */
export const SuspendReason = Tool.SuspendReason
export type SuspendReason = typeof SuspendReason.Type

/**
 * A sub-goal's link to the goal that delegated it: the parent, the parent's call that submitted
 * it (the sub-goal's id is derived from that call, so submitting it again finds it), and its
 * depth in the tree (1 for a sub-goal of a goal that has no parent).
 */
export const Parent = Schema.Struct({
  goalId: Schema.String,
  callId: Schema.String,
  depth: Schema.Int.pipe(Schema.positive())
})
export type Parent = typeof Parent.Type

/**
 * A goal that continues one that ended (`rx run --continue`): which, how it ended, what it had done
 * (its summary and newest steps, as text: `Prompt.carried`), and the new instruction. The new goal's
 * prompts show them with its goal; the old log is never reopened.
 */
export const Continues = Schema.Struct({
  goalId: Schema.String,
  reason: Reason,
  detail: Schema.String,
  done: Schema.String,
  text: Schema.String
})
export type Continues = typeof Continues.Type

/** Which call of an answer an event is about (0 for the first); absent for the answer as a whole. */
const index = Schema.optional(Schema.NonNegativeInt)

/**
 * Behaviour 3: the repairs (`Repair.Kind`) that read this call from what the model sent (the
 * answer stays recorded as sent in `ModelResponded`); absent when the call arrived clean.
 */
const repair = Schema.optional(Schema.Array(Schema.String))

/** The state after an iteration, as recorded for inspection. */
export const Summary = Schema.Struct({
  toolCalls: Schema.NonNegativeInt,
  consecutiveFailures: Schema.NonNegativeInt,
  consecutiveMalformed: Schema.NonNegativeInt,
  idleIterations: Schema.NonNegativeInt,
  repeats: Schema.NonNegativeInt,
  last: Schema.Literal("none", "ok", "error", "rejected"),
  /** Fingerprint of the last call and its full result: replay notices any changed output here. */
  fingerprint: Schema.String
})
export type Summary = typeof Summary.Type

/** Where a fork was forked from: the goal, and the iteration whose end its log was copied to. */
export const ForkedFrom = Schema.Struct({ goalId: Schema.String, iteration: Schema.NonNegativeInt })
export type ForkedFrom = typeof ForkedFrom.Type

export const GoalSubmitted = Schema.TaggedStruct("GoalSubmitted", {
  ...Base,
  goal: Schema.String,
  options: Options,
  tools: Schema.Array(Tool.Spec),
  /** Standing instructions for the model, shown with the goal in every prompt. */
  instructions: Schema.optional(Schema.String),
  /** The kernel behaviour version whose rules run this goal (`Behaviour`). */
  behaviour: Schema.Int.pipe(Schema.positive()),
  /** For a sub-goal: the goal and call that delegated it. */
  parent: Schema.optional(Parent),
  /** For a fork: the goal whose events up to the end of `iteration` this log starts with (copied, never run again). */
  forkedFrom: Schema.optional(ForkedFrom),
  /** For a goal that continues an ended one: that goal, how it ended, what it did, and the new instruction. */
  continues: Schema.optional(Continues)
})
export const ModelResponded = Schema.TaggedStruct("ModelResponded", {
  ...Base,
  response: LanguageModel.Response,
  /** How many messages sent to the goal (`MessageSent`, oldest first) the request showed: each is shown once, before this answer. */
  heard: Schema.optional(Schema.Int.pipe(Schema.positive()))
})
export const ModelFailed = Schema.TaggedStruct("ModelFailed", {
  ...Base,
  message: Schema.String,
  server: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Number),
  /** No later attempt could succeed: the goal ends instead of waiting for the model. */
  permanent: Schema.optional(Schema.Boolean)
})
export const ActionRejected = Schema.TaggedStruct("ActionRejected", {
  ...Base,
  kind: RejectionKind,
  /** What the model is told. */
  reason: Schema.String,
  /** For `invalid_input`: the tool's own verdict, as its validator worded it (replay hands it back). */
  validation: Schema.optional(Schema.String),
  /** For one call of an answer: which, and the tool it named. */
  index,
  tool: Schema.optional(Schema.String),
  /**
   * For `too_many_calls` of the answer as a whole (behaviour 3): how many calls past the cap were
   * dropped, all in this one rejection (their arguments are in the answer's `ModelResponded`).
   */
  dropped: Schema.optional(Schema.Int.pipe(Schema.positive())),
  repair,
  /** The rejected text or arguments, capped. */
  raw: Schema.String
})
/** A call as it runs: the fields of `ToolStarted` and of the `ApprovalRequested` that may precede it. */
const call = { ...Base, callId: Schema.String, tool: Schema.String, input: Schema.Unknown, index, repair }
export const ToolStarted = Schema.TaggedStruct("ToolStarted", call)
/** A call the approval policy says a person must allow, exactly as it will run if approved. */
export const ApprovalRequested = Schema.TaggedStruct("ApprovalRequested", call)
/** A person's decision on a requested call; appended by any process (`Control.approve`, `Control.deny`). */
export const ApprovalDecided = Schema.TaggedStruct("ApprovalDecided", {
  ...Base,
  callId: Schema.String,
  approved: Schema.Boolean,
  reason: Schema.String,
  /** Who decided, as the transport knows them (a terminal, a user name, an API token's name). */
  by: Schema.String
})
/** The runner stopped without ending the goal; the goal stays open and `resume` continues it. */
export const Suspended = Schema.TaggedStruct("Suspended", {
  ...Base,
  reason: SuspendReason,
  detail: Schema.String,
  /** The sub-goal whose wait this goal waits on (its call stays started; `resume` runs it again). */
  child: Schema.optional(Schema.String)
})
export const ToolSucceeded = Schema.TaggedStruct("ToolSucceeded", {
  ...Base,
  callId: Schema.String,
  tool: Schema.String,
  output: Schema.Unknown,
  /**
   * Behaviour 3: the fingerprint of what the result observes, apart from what restates the call,
   * for tools that say (`Tool.make`'s `observation`); the same `maxRepeats` times in a row is no progress.
   */
  observed: Schema.optional(Schema.String),
  /** Behaviour 4: tokens the call spent on the goal's behalf (a sub-goal's model calls), counted toward `maxTotalTokens`. */
  usage: Schema.optional(LanguageModel.Usage),
  durationMs: Schema.Number
})
export const ToolFailed = Schema.TaggedStruct("ToolFailed", {
  ...Base,
  callId: Schema.String,
  tool: Schema.String,
  error: Tool.Failure,
  durationMs: Schema.Number
})
export const IterationCompleted = Schema.TaggedStruct("IterationCompleted", {
  ...Base,
  summary: Summary
})
export const CancelRequested = Schema.TaggedStruct("CancelRequested", {
  ...Base,
  reason: Schema.String
})
/**
 * A message to a running goal from a person (`Control.say`), appended by any process: the model is
 * shown it at its next request, as the user's, once. It never interrupts a call in flight.
 */
export const MessageSent = Schema.TaggedStruct("MessageSent", {
  ...Base,
  /** Who sent it, as the transport knows them (a terminal's user, an API token's name). */
  by: Schema.String,
  text: Schema.String,
  /** The key a transport gave the message (an HTTP `Idempotency-Key`): a retry with the same key appends nothing. */
  key: Schema.optional(Schema.String)
})
/** The goal's options from here on (a resume with other settings, a raised limit); appended by any process. */
export const OptionsChanged = Schema.TaggedStruct("OptionsChanged", {
  ...Base,
  options: Options
})
/**
 * Behaviour 5: the model's plain-text summary of the turns of iterations `from` to `to`, with the
 * summary before it, asked before those turns leave the prompt; later prompts show it instead of
 * them. `cut`: the answer was longer than a summary may be, and cut. `failed`: no summary could
 * be had (the request was refused, the answer was no text): the turns are only counted.
 */
export const TurnsSummarised = Schema.TaggedStruct("TurnsSummarised", {
  ...Base,
  from: Schema.NonNegativeInt,
  to: Schema.NonNegativeInt,
  text: Schema.String,
  usage: LanguageModel.Usage,
  cut: Schema.optional(Schema.Literal(true)),
  failed: Schema.optional(Schema.String)
})
export const Terminated = Schema.TaggedStruct("Terminated", {
  ...Base,
  reason: Reason,
  detail: Schema.String
})

export const Event = Schema.Union(
  GoalSubmitted,
  ModelResponded,
  ModelFailed,
  ActionRejected,
  ToolStarted,
  ToolSucceeded,
  ToolFailed,
  IterationCompleted,
  CancelRequested,
  OptionsChanged,
  ApprovalRequested,
  ApprovalDecided,
  Suspended,
  TurnsSummarised,
  MessageSent,
  Terminated
)
export type Event = typeof Event.Type
export type Encoded = typeof Event.Encoded

/** An event of a given tag. */
export type Of<Tag extends Event["_tag"]> = Extract<Event, { readonly _tag: Tag }>

/** The id of call `index` of an iteration's answer: derived, never random, so a retried call keeps it. */
export const callId = (goalId: string, iteration: number, index = 0): string =>
  index === 0 ? `${goalId}:${iteration}` : `${goalId}:${iteration}:${index}`

/** Events appended by someone other than the runner (a transport); the runner folds them in. */
export const isExternal = (event: Event): boolean =>
  event._tag === "CancelRequested" || event._tag === "OptionsChanged" || event._tag === "ApprovalDecided" || event._tag === "MessageSent"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** rx 0.1 prefixed a tool's verdict on an invalid input with this; version 2 keeps the verdict apart. */
const invalidInputPrefix = /^invalid input for [^:]*: ([\s\S]*)$/

/**
 * 1 to 2: rx 0.1 ran every goal under behaviour 1, and worded an invalid input's rejection as
 * `invalid input for <tool>: <verdict>`.
 */
const fromV1 = (encoded: unknown): unknown => {
  if (!isRecord(encoded)) return encoded
  if (encoded["_tag"] === "GoalSubmitted") return { ...encoded, behaviour: 1 }
  if (encoded["_tag"] === "ActionRejected" && encoded["kind"] === "invalid_input" && typeof encoded["reason"] === "string") {
    const verdict = invalidInputPrefix.exec(encoded["reason"])?.[1]
    return verdict === undefined ? encoded : { ...encoded, validation: verdict }
  }
  return encoded
}

/** 2 to 3: the transport's settings, loose keys of `options.metadata` before, move to `options.settings`. */
const fromV2 = (encoded: unknown): unknown => {
  if (!isRecord(encoded) || (encoded["_tag"] !== "GoalSubmitted" && encoded["_tag"] !== "OptionsChanged")) return encoded
  const options = encoded["options"]
  if (!isRecord(options) || !isRecord(options["metadata"])) return encoded
  const { metadata, settings } = Settings.fromMetadata(options["metadata"])
  return settings === undefined ? encoded : { ...encoded, options: { ...options, settings, metadata } }
}

/** 3 to 4: version 4 only adds optional fields (a sub-goal's link, a call's usage, the sub-goal waited on), which no older event has. */
const fromV3 = (encoded: unknown): unknown => encoded

/** 4 to 5: version 5 only adds events no older log has. */
const fromV4 = (encoded: unknown): unknown => encoded

/** Upcasters from each older version to the next; index `v - 1` upgrades version `v` to `v + 1`. */
const upcasters: ReadonlyArray<(encoded: unknown) => unknown> = [fromV1, fromV2, fromV3, fromV4]

/** Bring an encoded event of `fromVersion` to the current version. */
export const upcast = (fromVersion: number, encoded: unknown): Either.Either<unknown, string> => {
  if (Number.isInteger(fromVersion) && fromVersion > version) {
    return Either.left(`written by a newer rx (event version ${fromVersion}; this rx reads 1 to ${version}): upgrade rx to read it`)
  }
  if (!Number.isInteger(fromVersion) || fromVersion < 1) {
    return Either.left(`event version ${fromVersion} is not supported by this rx (it reads versions 1 to ${version})`)
  }
  let value = encoded
  for (let v = fromVersion; v < version; v++) {
    const step = upcasters[v - 1]
    if (step === undefined) return Either.left(`no upcaster from event version ${v}`)
    value = step(value)
  }
  return Either.right(value)
}

const decodeEvent = Schema.decodeUnknownEither(Event)
const encodeEvent = Schema.encodeSync(Event)

/** Accepts exactly the valid events that decoding would return unchanged (the fast path). */
const isEvent = compile(Schema.typeSchema(Event).ast)

/** Whether `value` is an event exactly as this rx writes it. */
export const is = (value: unknown): value is Event =>
  isEvent === undefined ? Either.isRight(decodeEvent(value)) : isEvent(value)

/** Decode an encoded event of `fromVersion`; `Left` says what is wrong. */
export const decode = (encoded: unknown, fromVersion: number = version): Either.Either<Event, string> => {
  if (fromVersion === version && isEvent?.(encoded) === true) return Either.right(encoded as Event)
  return Either.flatMap(upcast(fromVersion, encoded), (value) =>
    Either.mapLeft(decodeEvent(value), (error) => ParseResult.TreeFormatter.formatErrorSync(error))
  )
}

/** Decode an event from its JSON text. */
export const decodeJson = (json: string, fromVersion: number = version): Either.Either<Event, string> =>
  Either.flatMap(
    Either.try({ try: (): unknown => JSON.parse(json), catch: (error) => `not JSON: ${error instanceof Error ? error.message : String(error)}` }),
    (value) => decode(value, fromVersion)
  )

/** The JSON text of an event (the log's and `rx events`' encoding). */
export const encodeJson = (event: Event): string => JSON.stringify(isEvent?.(event) === true ? event : encodeEvent(event))
