/**
 * Verify a recorded log by running the same runner again under replay Layers: the model
 * answers with the recorded responses, tools return the recorded outcomes, the clock gives
 * the recorded times, and a verifying store compares each appended event with the log.
 * No live call is made. The runner applies the rules of the behaviour version that wrote the
 * log, and only decisions are compared (which call, which input, which outcome, which
 * rejection kind, which termination), never wording, times or counters shown for inspection:
 * the first decision that differs is a `NonDeterminism` naming its seq.
 */
import { Cause, Clock, Context, Effect, Either, Exit, Layer, Option, Schema, Stream } from "effect"
import * as Behaviour from "./Behaviour.js"
import * as Event from "./Event.js"
import type * as Goal from "./Goal.js"
import * as GoalSummary from "./GoalSummary.js"
import { canonical } from "./internal/json.js"
import * as LanguageModel from "./LanguageModel.js"
import { ModelError } from "./LanguageModel.js"
import * as Runner from "./Runner.js"
import { AppendConflict, StateStore, StoreError } from "./StateStore.js"
import * as Tool from "./Tool.js"
import { ToolRegistry } from "./ToolRegistry.js"

/** The replay produced `actual` where the log holds `expected` (either may be missing). */
export class NonDeterminism extends Schema.TaggedError<NonDeterminism>()("@rx/kernel/NonDeterminism", {
  goalId: Schema.String,
  seq: Schema.Number,
  expected: Schema.NullOr(Schema.Unknown),
  actual: Schema.NullOr(Schema.Unknown)
}) {
  override get message() {
    const show = (e: unknown) => (e === null ? "nothing" : canonical(e))
    return `replay of goal ${this.goalId} diverged at seq ${this.seq}: the log has ${show(this.expected)}, the replay produced ${show(this.actual)}`
  }
}

/** The log cannot be replayed at all (empty, or not starting with `GoalSubmitted`). */
export class ReplayError extends Schema.TaggedError<ReplayError>()("@rx/kernel/ReplayError", { message: Schema.String }) {}

/** What a replay found: a terminated goal reproduced to its end, or an open goal's log reproduced as far as it goes. */
export type Verified =
  | { readonly _tag: "Complete"; readonly result: Goal.Result }
  | { readonly _tag: "Open"; readonly goalId: string; readonly events: number }

/** What of an event a replay must reproduce: its decision, not its wording, time or derived counters. */
export const decision = (event: Event.Event): unknown => {
  switch (event._tag) {
    case "GoalSubmitted":
      return event.continues === undefined
        ? [event.goal, event.options, event.tools, event.behaviour, event.instructions ?? ""]
        : [event.goal, event.options, event.tools, event.behaviour, event.instructions ?? "", event.continues]
    case "ModelResponded":
      // Which messages the request showed is part of what the model decided from.
      return event.heard === undefined ? event.response : [event.response, event.heard]
    case "ModelFailed":
      return null
    case "ActionRejected":
      return event.kind
    case "ToolStarted":
      // Which repairs read the call (behaviour 3) is part of the decision; clean calls compare as before.
      return event.repair === undefined ? [event.callId, event.tool, event.input] : [event.callId, event.tool, event.input, event.repair]
    case "ToolSucceeded":
      // What a call spent (behaviour 4) counts toward the budget: a decision; calls that report none compare as before.
      return event.usage === undefined
        ? [event.callId, event.tool, event.output, event.observed ?? null]
        : [event.callId, event.tool, event.output, event.observed ?? null, event.usage]
    case "ToolFailed":
      return [event.callId, event.tool, event.error.kind]
    case "IterationCompleted":
      // The fingerprint of the last call and its full result: a changed output shows here.
      return event.summary.fingerprint
    case "CancelRequested":
      return event.reason
    case "OptionsChanged":
      return event.options
    case "MessageSent":
      return [event.by, event.text]
    case "ApprovalRequested":
      return event.repair === undefined ? [event.callId, event.tool, event.input] : [event.callId, event.tool, event.input, event.repair]
    case "ApprovalDecided":
      return [event.callId, event.approved]
    case "Suspended":
      return event.reason
    case "TurnsSummarised":
      // Which turns were summarised, and whether a summary was had; its text is the model's answer, handed back.
      return [event.from, event.to, event.failed === undefined]
    case "Terminated":
      return event.reason
  }
}

const same = (a: Event.Event, b: Event.Event): boolean =>
  a._tag === b._tag && a.seq === b.seq && a.iteration === b.iteration && canonical(decision(a)) === canonical(decision(b))

/** Replay a goal's log, terminated or still open; an open log is verified as far as it goes. */
export const check = (
  events: ReadonlyArray<Event.Event>
): Effect.Effect<Verified, NonDeterminism | ReplayError | Behaviour.UnsupportedBehaviour> =>
  Effect.gen(function*() {
    const first = events[0]
    if (first === undefined || first._tag !== "GoalSubmitted") {
      return yield* new ReplayError({ message: "a log must start with GoalSubmitted" })
    }
    const { goalId } = first
    const open = events[events.length - 1]?._tag !== "Terminated"
    const encode = (event: Event.Event | undefined) => (event === undefined ? null : Schema.encodeSync(Event.Event)(event))
    let position = 0
    let divergence: NonDeterminism | undefined
    let reachedEnd = false
    const diverge = (seq: number, actual: Event.Event | undefined) => {
      divergence = new NonDeterminism({ goalId, seq, expected: encode(events[seq]), actual: encode(actual) })
      return new StoreError({ message: divergence.message, goalId, seq })
    }
    /** Whether the live runner was shut down next: its next own event is `Suspended(shutdown)`. */
    const shutdownNext = () => {
      let i = position
      while (i < events.length && Event.isExternal(events[i] as Event.Event)) i++
      const next = events[i]
      return next?._tag === "Suspended" && next.reason === "shutdown"
    }
    /** Deliver external events (cancel requests, option changes) recorded at the current position. */
    const deliverExternal = () => {
      while (position < events.length && Event.isExternal(events[position] as Event.Event)) position++
    }

    const store = StateStore.of({
      append: (_goalId, expectedSeq, batch) =>
        Effect.suspend((): Effect.Effect<void, AppendConflict | StoreError> => {
          if (expectedSeq === position && batch[0] !== undefined && !Event.isExternal(batch[0])) deliverExternal()
          if (expectedSeq !== position) return Effect.fail(new AppendConflict({ goalId, expectedSeq, actualSeq: position }))
          // The live runner was shut down here: interrupt this one at the same point.
          if (shutdownNext() && batch[0]?._tag !== "Suspended") return Effect.interrupt
          if (open && position === events.length) {
            // An open log ends here: what the runner would do next was never recorded.
            reachedEnd = true
            return Effect.fail(new StoreError({ message: "end of an open log", goalId, seq: position }))
          }
          for (const [i, event] of batch.entries()) {
            const recorded = events[position + i]
            if (recorded === undefined || !same(recorded, event)) return Effect.fail(diverge(position + i, event))
          }
          position += batch.length
          return Effect.void
        }),
      load: (_goalId, fromSeq = 0) =>
        Effect.sync(() => {
          deliverExternal()
          return events.slice(fromSeq, position)
        }),
      goal: () => Effect.sync(() => Option.fromNullable(events.slice(0, position).reduce(GoalSummary.update, undefined))),
      goals: () => Effect.succeed([]),
      changes: () => Stream.never,
      first: () => Effect.never,
      snapshot: () => Effect.succeed(Option.none()),
      lease: () => Effect.void,
      runner: () => Effect.succeed(Option.none())
    })

    const answers = events.flatMap((e, i): ReadonlyArray<Effect.Effect<LanguageModel.Response, ModelError>> =>
      e._tag === "ModelResponded"
        ? [Effect.succeed(withArguments(e.response, batchAfter(events, i)))]
        : e._tag === "ModelFailed"
        ? [Effect.fail(new ModelError({ message: e.message, ...(e.server === undefined ? {} : { server: e.server }), ...(e.status === undefined ? {} : { status: e.status }), ...(e.permanent === undefined ? {} : { permanent: e.permanent }) }))]
        : e._tag === "TurnsSummarised"
        // A failed summary is handed back as an empty answer: no summary again, with the usage recorded.
        ? [Effect.succeed<LanguageModel.Response>({ text: e.failed === undefined ? e.text : "", toolCalls: [], finishReason: "stop", usage: e.usage })]
        : []
    )
    let answered = 0
    const model = LanguageModel.LanguageModel.of({
      generate: () =>
        Effect.suspend(() =>
          shutdownNext()
            ? Effect.interrupt
            : answers[answered++] ?? Effect.fail(new ModelError({ message: "the log holds no further model answer", permanent: true }))
        )
    })

    const outcomes = new Map<string, Tool.Outcome>()
    const verdicts = new Map<string, string>()
    for (const event of events) {
      if (event._tag === "ToolSucceeded") {
        outcomes.set(event.callId, {
          _tag: "Success",
          output: event.output,
          ...(event.observed === undefined ? {} : { observed: event.observed }),
          ...(event.usage === undefined ? {} : { usage: event.usage })
        })
      }
      if (event._tag === "ToolFailed") outcomes.set(event.callId, { _tag: "Failure", error: event.error })
      if (event._tag === "ActionRejected" && event.validation !== undefined) {
        verdicts.set(Event.callId(goalId, event.iteration, event.index), event.validation)
      }
    }
    /** The live call waited (a sub-goal waited): the runner's next own event is the `Suspended` it led to. */
    const waitedNext = (): Tool.Outcome | undefined => {
      let i = position
      while (i < events.length && Event.isExternal(events[i] as Event.Event)) i++
      const next = events[i]
      if (next?._tag !== "Suspended" || (next.child === undefined && next.reason === "shutdown")) return undefined
      return { _tag: "Waiting", reason: next.reason, detail: next.detail, ...(next.child === undefined ? {} : { child: next.child }) }
    }
    const recorded = (callId: string) => waitedNext() ?? outcomes.get(callId) ?? Tool.failure("unknown", `the log holds no outcome for call ${callId}`)
    const registry = ToolRegistry.of({
      specs: first.tools,
      prepare: (call) => {
        const verdict = verdicts.get(call.callId)
        if (verdict !== undefined) return Either.left(verdict)
        return Either.right({
          call,
          run: Effect.sync(() => recorded(call.callId)),
          recover: Effect.sync(() => Option.fromNullable(outcomes.get(call.callId)))
        })
      }
    })

    const clock = recordedClock(events)

    const layers = Layer.succeedContext(
      Context.make(StateStore, store).pipe(Context.add(LanguageModel.LanguageModel, model), Context.add(ToolRegistry, registry))
    )
    const replayed = <E>(effect: Effect.Effect<Goal.Result, E, Runner.Services>) =>
      effect.pipe(Effect.provide(layers), Effect.withClock(clock), Effect.exit)
    const { behaviour, continues, goal, instructions, options, parent } = first
    let exit = yield* replayed(Runner.run({ goal, instructions, options, goalId, behaviour, parent, continues }))
    // A run that stopped without ending (suspended, shut down) was resumed later: so is the replay.
    while (divergence === undefined && !reachedEnd && position < events.length && stopped(exit)) {
      exit = yield* replayed(Runner.resume(goalId))
    }
    if (divergence !== undefined) return yield* divergence
    if (reachedEnd || (position === events.length && stopped(exit))) return { _tag: "Open", goalId, events: events.length } as const
    if (Exit.isFailure(exit)) {
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure) && failure.value._tag === "@rx/kernel/UnsupportedBehaviour") return yield* failure.value
      return yield* new ReplayError({ message: `replay failed: ${Option.match(failure, { onNone: () => Cause.pretty(exit.cause), onSome: (error) => error.message })}` })
    }
    if (position < events.length) return yield* new NonDeterminism({ goalId, seq: position, expected: encode(events[position]), actual: null })
    return { _tag: "Complete", result: exit.value } as const
  })

/**
 * The clock a replay runs under: each read gives the time of the next event the runner drafts,
 * as recorded; a sleep returns at once (a replay waits for nothing, and its own `sleep` must not
 * read this clock again).
 */
export const recordedClock = (events: ReadonlyArray<Event.Event>): Clock.Clock => {
  const times = events.flatMap((e) => (Event.isExternal(e) ? [] : [e.at]))
  let ticks = 0
  const tick = () => times[ticks++] ?? times[times.length - 1] ?? 0
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: tick,
    unsafeCurrentTimeNanos: () => BigInt(tick()) * 1_000_000n,
    currentTimeMillis: Effect.sync(tick),
    currentTimeNanos: Effect.sync(() => BigInt(tick()) * 1_000_000n),
    sleep: () => Effect.void
  }
}

/** Replay a terminated goal's log and check the runner reproduces it; an open goal's log is a `ReplayError`. */
export const verify = (
  events: ReadonlyArray<Event.Event>
): Effect.Effect<Goal.Result, NonDeterminism | ReplayError | Behaviour.UnsupportedBehaviour> =>
  Effect.flatMap(check(events), (verified) =>
    verified._tag === "Complete"
      ? Effect.succeed(verified.result)
      : new ReplayError({ message: `goal ${verified.goalId} is still open: its ${verified.events} events verify, but it has no end yet` }))

/** A runner that stopped without ending the goal: suspended, or interrupted where the live one was shut down. */
const stopped = (exit: Exit.Exit<Goal.Result, unknown>): boolean =>
  Exit.isSuccess(exit) ? exit.value.status === "suspended" : Cause.isInterruptedOnly(exit.cause)

/** The answer of the `ModelResponded` at `events[i]` as the model gave it (see `withArguments`). */
export const answerAt = (events: ReadonlyArray<Event.Event>, i: number): LanguageModel.Response | undefined => {
  const event = events[i]
  return event?._tag === "ModelResponded" ? withArguments(event.response, batchAfter(events, i)) : undefined
}

/** The answer as the model gave it: arguments the log keeps only in a `ToolStarted` of the same batch put back. */
const withArguments = (response: LanguageModel.Response, after: ReadonlyArray<Event.Event>): LanguageModel.Response => {
  if (!response.toolCalls.some((call) => call.argumentsInToolStarted === true)) return response
  return {
    ...response,
    toolCalls: response.toolCalls.map((call, index) => {
      if (call.argumentsInToolStarted !== true) return call
      const started = after.find((e): e is Event.Of<"ToolStarted"> => e._tag === "ToolStarted" && (e.index ?? 0) === index)
      return started === undefined ? call : { id: call.id, name: call.name, arguments: JSON.stringify(started.input) }
    })
  }
}

/** The events after `i` that belong to its iteration, up to the next answer. */
const batchAfter = (events: ReadonlyArray<Event.Event>, i: number): ReadonlyArray<Event.Event> => {
  const iteration = events[i]?.iteration
  const out: Array<Event.Event> = []
  for (let j = i + 1; j < events.length; j++) {
    const event = events[j] as Event.Event
    if (event.iteration !== iteration || event._tag === "ModelResponded") break
    out.push(event)
  }
  return out
}
